//! Prints a summary of a kern-profile raw file: header, statistics, per-vCPU sample spacing,
//! the most frequent stacks and the exact-count totals. A debugging aid for the plugin.
//!
//! `cargo run -p kern-profile-recorder --example kp-dump -- FILE [TOP]`

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;

use kern_profile_format::{RawReader, Record};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: kp-dump FILE [TOP]")?;
    let top: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10);
    let mut r = RawReader::new(BufReader::new(File::open(&path)?))?;
    let h = r.header().clone();
    println!("header: {h:?}");
    let mut stacks: HashMap<Vec<u64>, u64> = HashMap::new();
    let mut times: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut icounts: HashMap<u32, Vec<u64>> = HashMap::new();
    let (mut samples, mut user, mut sp_words, mut exact_blocks, mut exact_insns) =
        (0u64, 0, 0, 0, 0u64);
    let mut stops = [0u64; 8];
    let mut stats = None;
    while let Some(rec) = r.next_record()? {
        match rec {
            Record::Sample(s) => {
                samples += 1;
                user += s.user() as u64;
                sp_words += s.sp_word().is_some() as u64;
                stops[(s.stop as usize).min(7)] += 1;
                let mut st = vec![s.pc];
                st.extend(s.frames());
                *stacks.entry(st).or_default() += 1;
                times.entry(s.vcpu).or_default().push(s.time_ns);
                icounts.entry(s.vcpu).or_default().push(s.icount);
            }
            Record::ExactBlocks(b) => {
                for blk in b.iter() {
                    exact_blocks += 1;
                    exact_insns += blk.executions * blk.instructions().len() as u64;
                }
            }
            Record::Stats(s) => stats = Some(s),
            Record::HostTimer(t) => println!("host timer: {t:?}"),
            Record::Unknown { kind, offset } => println!("unknown record kind {kind} at {offset}"),
        }
    }
    if let Some(t) = r.truncation() {
        println!("truncated: {t:?}");
    }
    println!(
        "samples: {samples} (user {user}, with [SP] word {sp_words}), stops by reason {:?}",
        &stops[..6]
    );
    println!("stats: {stats:?}");
    if exact_blocks > 0 {
        println!("exact: {exact_blocks} blocks, {exact_insns} instructions");
    }
    let mut vcpus: Vec<_> = times.keys().copied().collect();
    vcpus.sort();
    for v in vcpus {
        let t = &times[&v];
        let mut d: Vec<u64> = t.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
        d.sort();
        let ic = &icounts[&v];
        let mut di: Vec<u64> = ic.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
        di.sort();
        let med = |x: &[u64]| x.get(x.len() / 2).copied().unwrap_or(0);
        println!(
            "vCPU {v}: {} samples, spacing ns median {} (p10 {}, p90 {}), instructions median {}",
            t.len(),
            med(&d),
            d.get(d.len() / 10).copied().unwrap_or(0),
            d.get(d.len() * 9 / 10).copied().unwrap_or(0),
            med(&di)
        );
    }
    let mut v: Vec<_> = stacks.into_iter().collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    for (st, n) in v.into_iter().take(top) {
        let s: Vec<String> = st.iter().map(|a| format!("{a:#x}")).collect();
        println!("{n:8} {}", s.join(" <- "));
    }
    Ok(())
}
