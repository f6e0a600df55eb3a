//! Prints a summary of a kern-profile raw file: header, statistics, per-vCPU sample spacing,
//! the most frequent stacks, the exact-count totals, the code bytes recorded per address space
//! and the allocation events per allocator (`alloc=`). A debugging aid for the plugin.
//!
//! `cargo run -p kern-profile-sampler --example kp-dump -- FILE [TOP]`

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;

use kern_profile_format::{RawReader, RawSummary, Record};

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
    let mut sum = RawSummary::default();
    // Page-table base -> (records, the first one's address and bytes).
    let mut code: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    let mut spaces: BTreeMap<u64, u64> = BTreeMap::new();
    let mut table = None;
    // (allocator, op) -> (events, of which never returned)
    let mut events: std::collections::BTreeMap<(u16, u8), (u64, u64)> = Default::default();
    while let Some(rec) = r.next_record()? {
        sum.add(&rec);
        match rec {
            Record::Sample(s) => {
                let mut st = vec![s.pc];
                st.extend(s.frames());
                *stacks.entry(st).or_default() += 1;
                times.entry(s.vcpu).or_default().push(s.time_ns);
                icounts.entry(s.vcpu).or_default().push(s.icount);
                if let Some(b) = s.page_table_base() {
                    *spaces.entry(b).or_default() += 1;
                }
            }
            Record::CodeBytes(c) => {
                let e = code.entry(c.page_table_base).or_insert_with(|| {
                    let hex: Vec<String> = c.bytes.iter().map(|b| format!("{b:02x}")).collect();
                    (0, format!("{:#x}: {}", c.vaddr, hex.join(" ")))
                });
                e.0 += 1;
            }
            Record::HostTimer(t) => println!("host timer: {t:?}"),
            Record::AllocTable(t) => table = Some(t),
            Record::AllocEvent(e) => {
                let c = events.entry((e.allocator, e.op.as_u8())).or_default();
                c.0 += 1;
                c.1 += e.unreturned() as u64;
            }
            Record::AllocStats(s) => println!("allocation hooks: {s:?}"),
            Record::Unknown { kind, offset } => println!("unknown record kind {kind} at {offset}"),
            _ => {}
        }
    }
    if let Some(t) = r.truncation() {
        println!("truncated: {t:?}");
    }
    println!(
        "samples: {} (user {}, with [SP] word {}), stops by reason: {}",
        sum.samples, sum.user_samples, sum.sp_words, sum.stops
    );
    println!("stats: {:?}", sum.stats);
    if sum.exact_blocks > 0 {
        println!(
            "exact: {} blocks, {} instructions",
            sum.exact_blocks, sum.exact_instructions
        );
    }
    println!(
        "address spaces (page-table bases of samples): {}",
        spaces
            .iter()
            .map(|(b, n)| format!("{b:#x} ({n} samples)"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (b, (n, first)) in &code {
        println!("code bytes in {b:#x}: {n} records, the first at {first}");
    }
    if let Some(t) = &table {
        for f in &t.functions {
            println!("hooked {:#x} {:?} {}", f.entry, f.op, f.name);
        }
    }
    for ((a, op), (n, unreturned)) in &events {
        let name = table
            .as_ref()
            .and_then(|t| t.allocators.get(*a as usize))
            .map_or("?", String::as_str);
        println!("allocator {name} op {op}: {n} events ({unreturned} never returned)");
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
