//! Measures `analyze` on a synthetic trace held in memory.
//!
//! `cargo run --release -p kern-profile-alloc --example throughput -- [RECORDS] [MAX_FRAMES]`
//!
//! The trace mimics a kernel heap: two allocators, 200 call sites with 8 to MAX_FRAMES
//! (default 24, at most 64) frames,
//! allocations, frees, and reallocations (some of which "move"), about 20 000 blocks live at
//! once. (Timelines are drawn by the aggregator: `kern-profile --alloc --timeline`.)

use std::time::Instant;

use kern_profile_alloc::{analyze, Options, View};
use kern_profile_format::memtrace::{encode_record, Op};

fn main() {
    let mut args = std::env::args().skip(1);
    let records: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000_000);
    let max_frames: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
        .clamp(8, 64);

    let t = Instant::now();
    let bytes = synthetic(records, max_frames);
    eprintln!(
        "built {records} records of 8 to {max_frames} frames ({:.1} MiB) in {:.2?}",
        bytes.len() as f64 / (1 << 20) as f64,
        t.elapsed()
    );

    for view in View::ALL {
        let opts = Options {
            view,
            ..Options::default()
        };
        let t = Instant::now();
        let a = analyze(&bytes[..], &opts).expect("analysis");
        let dt = t.elapsed();
        assert_eq!(a.records, records);
        println!(
            "view {:<9} {records} records in {:.3} s: {:.2} M records/s, {:.0} MiB/s",
            view.name(),
            dt.as_secs_f64(),
            records as f64 / dt.as_secs_f64() / 1e6,
            bytes.len() as f64 / (1 << 20) as f64 / dt.as_secs_f64(),
        );
        if view == View::Live {
            for p in &a.allocators {
                eprintln!("  {}: {:?}", p.name, p.stats);
            }
        }
    }
}

/// A deterministic trace of `n` records.
fn synthetic(n: u64, max_frames: u64) -> Vec<u8> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let sites: Vec<Vec<u64>> = (0..200u64)
        .map(|s| {
            (0..8 + s % (max_frames - 7))
                .map(|d| 0xc010_0000 + s * 0x1000 + d * 0x40)
                .collect()
        })
        .collect();
    // Live pointers of each allocator: "malloc" gets 90 % of the operations, "buddy" 10 %.
    let mut live: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut next_ptr = 0xd000_0000u64;
    let mut out = Vec::with_capacity(n as usize * (20 + 8 * (8 + max_frames as usize) / 2));
    for _ in 0..n {
        let r = next();
        let site = &sites[(r % sites.len() as u64) as usize];
        let a = usize::from(r % 10 == 0);
        let name: &[u8] = [&b"malloc"[..], &b"buddy"[..]][a];
        let live = &mut live[a];
        let choice = (r >> 16) % 100;
        if live.len() < 10_000 && choice < 50 || live.is_empty() {
            next_ptr += 16 * (1 + (r >> 40) % 64);
            live.push(next_ptr);
            encode_record(&mut out, name, Op::Alloc, next_ptr, (r >> 8) % 4096, site);
        } else if choice < 60 {
            let i = ((r >> 24) as usize) % live.len();
            let ptr = live[i];
            if (r >> 50) % 4 == 0 {
                // A moving realloc: later operations use a fresh pointer.
                next_ptr += 4096;
                live[i] = next_ptr;
            }
            encode_record(&mut out, name, Op::Realloc, ptr, (r >> 8) % 8192, site);
        } else {
            let i = ((r >> 24) as usize) % live.len();
            let ptr = live.swap_remove(i);
            encode_record(&mut out, name, Op::Free, ptr, 0, site);
        }
    }
    out
}
