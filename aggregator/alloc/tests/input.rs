//! What the analysis does with bad input: bad op bytes, a torn last record, an empty trace,
//! arbitrary bytes.

mod common;

use common::{check_live_sum, map, only, Trace};
use kern_profile_alloc::{analyze, AllocError, Options, Skip, Truncation, View};
use kern_profile_format::FormatError;

const S1: &[u64] = &[0xc010_0010, 0xc010_0011];
const S2: &[u64] = &[0xc020_0020];

fn three() -> Trace {
    let mut t = Trace::new();
    t.alloc("heap", 0x10, 10, S1)
        .alloc("heap", 0x20, 20, S2)
        .free("heap", 0x10, 0);
    t
}

fn lenient() -> Options {
    Options {
        lenient: true,
        ..Options::default()
    }
}

#[test]
fn empty_trace() {
    let a = analyze(&[][..], &Options::default()).unwrap();
    assert_eq!(a.records, 0);
    assert!(a.allocators.is_empty());
    assert_eq!(a.truncation, None);
    assert!(a.skips.is_empty());
}

#[test]
fn bad_op_is_an_error_naming_the_offset_in_strict_mode() {
    let mut t = three();
    let op_at = t.offsets[1] as usize + 1 + 4; // after nlen and "heap"
    t.bytes[op_at] = 3;
    let err = analyze(&t.bytes[..], &Options::default()).unwrap_err();
    match &err {
        AllocError::Format(FormatError::Corrupt { offset, what }) => {
            assert_eq!(*offset, t.offsets[1]);
            assert!(what.contains(&format!("byte offset {op_at}")), "{what}");
        }
        other => panic!("unexpected error {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("byte offset {}", t.offsets[1])),
        "{msg}"
    );
}

#[test]
fn bad_op_is_skipped_and_reported_in_lenient_mode() {
    let mut t = three();
    t.bytes[t.offsets[1] as usize + 5] = 0x80;
    let a = analyze(&t.bytes[..], &lenient()).unwrap();
    assert_eq!(a.records, 2);
    assert_eq!(
        a.skips,
        vec![Skip {
            offset: t.offsets[1],
            bytes: t.offsets[2] - t.offsets[1],
        }]
    );
    let p = only(&a);
    // The allocation of 20 units was lost with its record; the free still applies.
    assert_eq!(
        (p.stats.operations, p.stats.allocations, p.stats.frees),
        (2, 1, 1)
    );
    assert_eq!(p.stats.live_at_end, 0);
    assert_eq!((p.stats.peak_live, p.stats.peak_at_op), (10, 0));
}

#[test]
fn a_torn_last_record_is_a_warning_and_every_complete_record_counts() {
    let t = three();
    let last = t.offsets[2] as usize;
    for cut in last + 1..t.bytes.len() {
        let a = analyze(&t.bytes[..cut], &Options::default()).unwrap();
        assert_eq!(a.records, 2, "cut at {cut}");
        let tr: Truncation = a.truncation.expect("truncation");
        assert_eq!(tr.offset, last as u64);
        assert_eq!(tr.available, cut - last);
        let p = only(&a);
        assert_eq!(p.stacks, map(&[(S1, 10), (S2, 20)]));
        assert_eq!((p.stats.live_at_end, p.stats.peak_at_op), (30, 1));
    }
}

/// xorshift64*: deterministic bytes without a dependency.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[test]
fn arbitrary_bytes_never_panic() {
    for seed in 1..300u64 {
        let bytes = noise(seed, (seed as usize * 37) % 3000);
        for opts in [Options::default(), lenient()] {
            for view in View::ALL {
                let opts = Options {
                    view,
                    timeline_points: 7,
                    ..opts.clone()
                };
                if let Ok(a) = analyze(&bytes[..], &opts) {
                    for p in &a.allocators {
                        assert!(p.timeline.len() <= 7);
                    }
                }
            }
        }
    }
}

#[test]
fn damaged_traces_never_panic_and_stay_consistent() {
    // A plausible trace with reallocations, then bytes overwritten here and there.
    let mut t = Trace::new();
    for i in 0..2000u64 {
        let ptr = 0x1000 + (i % 97) * 16;
        match i % 5 {
            0 | 1 => t.alloc("malloc", ptr, i % 300, S1),
            2 => t.realloc("malloc", ptr, i % 500, S2),
            3 => t.free("malloc", ptr, 0),
            _ => t.alloc("buddy", ptr << 4, 1 + i % 4, S2),
        };
    }
    for seed in 1..60u64 {
        let mut bytes = t.bytes.clone();
        let damage = noise(seed, 64);
        for pair in damage.chunks(2) {
            let at = (pair[0] as usize * 131 + pair[1] as usize * 7919 + seed as usize * 4099)
                % bytes.len();
            bytes[at] = pair[1];
        }
        let a = analyze(&bytes[..], &lenient()).expect("lenient analysis");
        assert!(a.records > 0);
        for p in &a.allocators {
            // Sizes here are small, so nothing saturates and the stacks add up.
            if p.stats.peak_live < u64::MAX / 2 {
                check_live_sum(p);
            }
            assert!(p.stats.live_at_end <= p.stats.peak_live);
        }
    }
}
