//! Views, peaks, reallocations, double and unknown frees, on traces built from real bytes.

mod common;

use common::{check_live_sum, map, names, only, Trace};
use kern_profile_alloc::{analyze, AllocatorStats, Options, View};

const S1: &[u64] = &[0xc010_0010, 0xc010_0011];
const S2: &[u64] = &[0xc020_0020];
const S3: &[u64] = &[0xc030_0030, 0xc030_0031, 0xc030_0032];

/// Six operations: three allocations, a free, two more allocations.
fn basic() -> Trace {
    let mut t = Trace::new();
    t.alloc("heap", 0x1000, 100, S1) // live 100
        .alloc("heap", 0x2000, 50, S2) // 150
        .alloc("heap", 0x3000, 30, S1) // 180: the peak, operation #2
        .free("heap", 0x1000, 0) // 80
        .alloc("heap", 0x4000, 20, S3) // 100
        .alloc("heap", 0x5000, 10, S2); // 110
    t
}

#[test]
fn live_view_is_the_default_and_holds_what_is_left() {
    let t = basic();
    let a = analyze(&t.bytes[..], &Options::default()).unwrap();
    assert_eq!(a.view, View::Live);
    assert_eq!(a.records, 6);
    let p = only(&a);
    assert_eq!(p.name, "heap");
    let want = map(&[(S1, 30), (S2, 60), (S3, 20)]);
    assert_eq!(p.stacks, want);
    assert_eq!(p.live_stacks, want);
}

#[test]
fn allocated_view_sums_sizes() {
    let a = basic().analyze(View::Allocated);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S1, 130), (S2, 60), (S3, 20)]));
    // The live stacks do not depend on the view.
    assert_eq!(p.live_stacks, map(&[(S1, 30), (S2, 60), (S3, 20)]));
}

#[test]
fn count_view_counts_allocations() {
    let a = basic().analyze(View::Count);
    assert_eq!(only(&a).stacks, map(&[(S1, 2), (S2, 2), (S3, 1)]));
}

#[test]
fn peak_view_is_the_live_split_at_the_peak() {
    let a = basic().analyze(View::Peak);
    // At operation #2: S1 holds 100 + 30, S2 50; S3 did not exist yet.
    assert_eq!(only(&a).stacks, map(&[(S1, 130), (S2, 50)]));
}

#[test]
fn stats_of_the_basic_trace() {
    let t = basic();
    let a = t.analyze(View::Live);
    let p = only(&a);
    assert_eq!(
        p.stats,
        AllocatorStats {
            operations: 6,
            allocations: 5,
            reallocations: 0,
            frees: 1,
            bytes_allocated: 210,
            peak_live: 180,
            peak_at_op: 2,
            peak_at_offset: t.offsets[2],
            live_at_end: 110,
            live_blocks_at_end: 4,
            ..AllocatorStats::default()
        }
    );
    // Every operation is a point of the (short) timeline.
    assert_eq!(
        p.timeline,
        vec![(0, 100), (1, 150), (2, 180), (3, 80), (4, 100), (5, 110)]
    );
}

#[test]
fn peak_reached_twice_keeps_the_first_operation() {
    let mut t = Trace::new();
    t.alloc("heap", 1, 10, S1)
        .free("heap", 1, 0)
        .alloc("heap", 2, 10, S2) // back to 10: not a new peak
        .alloc("heap", 3, 5, S3); // 15: the peak, operation #3
    let a = t.analyze(View::Peak);
    let p = only(&a);
    assert_eq!(p.stats.peak_live, 15);
    assert_eq!(p.stats.peak_at_op, 3);
    assert_eq!(p.stats.peak_at_offset, t.offsets[3]);
    assert_eq!(p.stacks, map(&[(S2, 10), (S3, 5)]));

    let mut t = Trace::new();
    t.alloc("heap", 1, 10, S1)
        .free("heap", 1, 0)
        .alloc("heap", 2, 10, S2);
    let a = t.analyze(View::Peak);
    let p = only(&a);
    assert_eq!((p.stats.peak_live, p.stats.peak_at_op), (10, 0));
    assert_eq!(p.stacks, map(&[(S1, 10)]));
}

#[test]
fn non_moving_realloc_is_confirmed_by_later_operations_on_the_pointer() {
    let mut t = Trace::new();
    t.alloc("heap", 0x100, 8, S1) // 8
        .realloc("heap", 0x100, 32, S2) // 32: the 8 units leave S1, S2 holds 32
        .realloc("heap", 0x100, 16, S3) // the pointer was kept: 16, held by S3
        .alloc("heap", 0x200, 1, S1); // 17
    let a = t.analyze(View::Live);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S3, 16), (S1, 1)]));
    assert_eq!(p.stats.live_at_end, 17);
    assert_eq!(p.stats.live_unconfirmed_at_end, 16);
    assert_eq!(p.stats.live_moved_at_end, 0);
    assert_eq!((p.stats.peak_live, p.stats.peak_at_op), (32, 1));

    t.free("heap", 0x100, 0);
    let a = t.analyze(View::Allocated);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S1, 9), (S2, 32), (S3, 16)]));
    assert_eq!(p.live_stacks, map(&[(S1, 1)]));
    let s = &p.stats;
    assert_eq!(
        (s.operations, s.allocations, s.reallocations, s.frees),
        (5, 2, 2, 1)
    );
    assert_eq!(s.bytes_allocated, 57);
    assert_eq!((s.live_at_end, s.live_blocks_at_end), (1, 1));
    assert_eq!(s.live_unconfirmed_at_end, 0);
    assert_eq!(
        (s.unknown_frees, s.double_frees, s.unknown_reallocs),
        (0, 0, 0)
    );
    assert_eq!(
        (s.moves_detected, s.matched_to_moved, s.reused_live),
        (0, 0, 0)
    );
    let a = t.analyze(View::Count);
    assert_eq!(only(&a).stacks, map(&[(S1, 2), (S2, 1), (S3, 1)]));
}

#[test]
fn moving_realloc_is_detected_when_the_old_pointer_comes_back() {
    let mut t = Trace::new();
    t.alloc("heap", 0xa000, 8, S1) // 8
        .realloc("heap", 0xa000, 64, S2) // 64, moved somewhere unknown
        .alloc("heap", 0xa000, 4, S3); // the old pointer again: proof of the move; 68
    let a = t.analyze(View::Live);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S2, 64), (S3, 4)]));
    let s = &p.stats;
    assert_eq!(s.moves_detected, 1);
    assert_eq!(s.reused_live, 0);
    assert_eq!((s.live_at_end, s.live_blocks_at_end), (68, 2));
    assert_eq!((s.live_moved_at_end, s.live_unconfirmed_at_end), (64, 0));

    // The moved block is then freed through its new pointer, which the trace never showed.
    t.free("heap", 0xb000, 0);
    let a = t.analyze(View::Live);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S3, 4)]));
    let s = &p.stats;
    assert_eq!(
        (s.unknown_frees, s.double_frees, s.matched_to_moved),
        (1, 0, 1)
    );
    assert_eq!(
        (s.live_at_end, s.live_blocks_at_end, s.live_moved_at_end),
        (4, 1, 0)
    );
    check_live_sum(p);
}

#[test]
fn a_growing_buffer_moved_at_each_realloc_is_followed_to_its_free() {
    let mut t = Trace::new();
    t.alloc("heap", 0xa, 8, S1) // 8
        .realloc("heap", 0xa, 16, S2) // 16; moved to 0xb (unknown)
        .realloc("heap", 0xb, 32, S2) // 32: 0xb is where the 16 units went
        .realloc("heap", 0xc, 64, S2) // 64
        .free("heap", 0xd, 0); // 0
    let a = t.analyze(View::Allocated);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S1, 8), (S2, 112)]));
    assert!(p.live_stacks.is_empty());
    let s = &p.stats;
    assert_eq!((s.reallocations, s.unknown_reallocs), (3, 2));
    assert_eq!(
        (s.unknown_frees, s.double_frees, s.matched_to_moved),
        (1, 0, 3)
    );
    assert_eq!((s.peak_live, s.peak_at_op), (64, 3));
    assert_eq!((s.live_at_end, s.live_blocks_at_end), (0, 0));
    assert_eq!(p.timeline, vec![(0, 8), (1, 16), (2, 32), (3, 64), (4, 0)]);
}

#[test]
fn an_unknown_realloc_without_candidates_is_a_new_block() {
    let mut t = Trace::new();
    t.realloc("heap", 0x77, 40, S2).alloc("heap", 0x88, 2, S1);
    let a = t.analyze(View::Live);
    let p = only(&a);
    assert_eq!(p.stacks, map(&[(S2, 40), (S1, 2)]));
    assert_eq!(p.stats.unknown_reallocs, 1);
    assert_eq!(p.stats.matched_to_moved, 0);
    assert_eq!(p.stats.live_unconfirmed_at_end, 40);
}

#[test]
fn double_and_unknown_frees_are_counted_not_fatal() {
    let mut t = Trace::new();
    t.alloc("heap", 0xa, 10, S1)
        .free("heap", 0xa, 0)
        .free("heap", 0xa, 0) // double free
        .alloc("heap", 0xa, 5, S1) // handed out again: no longer "freed"
        .free("heap", 0xa, 0)
        .free("heap", 0xa, 0) // double free
        .free("heap", 0xf00, 0) // unknown pointer
        .free("heap", 0xf00, 0) // freed before and not allocated since: double free
        .alloc("heap", 0xb, 7, S2);
    let a = t.analyze(View::Live);
    let p = only(&a);
    let s = &p.stats;
    assert_eq!(s.frees, 6);
    assert_eq!((s.double_frees, s.unknown_frees), (3, 1));
    assert_eq!(s.matched_to_moved, 0);
    assert_eq!((s.live_at_end, s.live_blocks_at_end), (7, 1));
    assert_eq!(p.stacks, map(&[(S2, 7)]));
    assert_eq!((s.peak_live, s.peak_at_op), (10, 0));
}

#[test]
fn a_double_free_while_a_reallocated_block_is_pending_is_taken_as_its_free() {
    // A moving realloc can land on an address freed earlier; its free then looks like a
    // double free. It is counted as one, and retires the reallocated block.
    let mut t = Trace::new();
    t.alloc("heap", 0xa, 8, S1)
        .free("heap", 0xa, 0)
        .alloc("heap", 0xb, 8, S1)
        .realloc("heap", 0xb, 16, S2) // moved to 0xa, in fact
        .free("heap", 0xa, 0);
    let a = t.analyze(View::Live);
    let p = only(&a);
    let s = &p.stats;
    assert_eq!(
        (s.double_frees, s.unknown_frees, s.matched_to_moved),
        (1, 0, 1)
    );
    assert_eq!(s.live_at_end, 0);
    assert!(p.stacks.is_empty());
}

#[test]
fn a_free_with_a_size_only_matches_a_moved_block_of_that_size() {
    // A page allocator that frees with the page count.
    let mut t = Trace::new();
    t.alloc("pages", 0x1000, 4, S1)
        .realloc("pages", 0x1000, 8, S2) // moved...
        .alloc("pages", 0x1000, 2, S3) // ...as this proves
        .free("pages", 0x9000, 5) // no block of 5 pages may have moved: nothing retired
        .free("pages", 0x8000, 8); // the moved block
    let a = t.analyze(View::Live);
    let p = only(&a);
    let s = &p.stats;
    assert_eq!(
        (s.unknown_frees, s.matched_to_moved, s.moves_detected),
        (2, 1, 1)
    );
    assert_eq!((s.live_at_end, s.live_moved_at_end), (2, 0));
    assert_eq!(p.stacks, map(&[(S3, 2)]));
}

#[test]
fn an_allocation_at_a_live_pointer_retires_the_earlier_block() {
    let mut t = Trace::new();
    t.alloc("heap", 0xa, 10, S1).alloc("heap", 0xa, 20, S2);
    let a = t.analyze(View::Live);
    let p = only(&a);
    assert_eq!(p.stats.reused_live, 1);
    assert_eq!(p.stats.moves_detected, 0);
    assert_eq!((p.stats.live_at_end, p.stats.live_blocks_at_end), (20, 1));
    assert_eq!(p.stacks, map(&[(S2, 20)]));
    assert_eq!((p.stats.peak_live, p.stats.peak_at_op), (20, 1));
}

#[test]
fn several_allocators_are_separate_and_sorted_by_name() {
    let mut t = Trace::new();
    t.alloc("malloc", 0x10, 100, S1)
        .alloc("buddy", 0x10, 4, S2) // same pointer, other allocator
        .alloc("vmem", 0x10, 1, S3)
        .free("malloc", 0x10, 0)
        .alloc("malloc", 0x20, 40, S1)
        .free("buddy", 0x10, 4)
        .alloc("buddy", 0x30, 2, S2);
    let a = t.analyze(View::Live);
    assert_eq!(a.records, 7);
    assert_eq!(names(&a), vec!["buddy", "malloc", "vmem"]);
    let [buddy, malloc, vmem] = &a.allocators[..] else {
        unreachable!()
    };
    assert_eq!(buddy.stacks, map(&[(S2, 2)]));
    assert_eq!(
        (
            buddy.stats.operations,
            buddy.stats.peak_live,
            buddy.stats.peak_at_op
        ),
        (3, 4, 0)
    );
    assert_eq!(buddy.stats.peak_at_offset, t.offsets[1]);
    assert_eq!(malloc.stacks, map(&[(S1, 40)]));
    assert_eq!(
        (
            malloc.stats.operations,
            malloc.stats.frees,
            malloc.stats.peak_live
        ),
        (3, 1, 100)
    );
    assert_eq!(malloc.stats.peak_at_offset, t.offsets[0]);
    assert_eq!(vmem.stacks, map(&[(S3, 1)]));
    assert_eq!(vmem.stats.operations, 1);
    for p in &a.allocators {
        assert_eq!(p.stats.unknown_frees + p.stats.double_frees, 0);
        check_live_sum(p);
    }
}

#[test]
fn frames_are_kept_exactly_as_recorded() {
    // Same frames in another order, an empty stack, and 64 frames: three distinct stacks.
    let long: Vec<u64> = (0..64).map(|i| 0xc000_0000 + i).collect();
    let mut t = Trace::new();
    t.alloc("heap", 1, 1, &[1, 2])
        .alloc("heap", 2, 2, &[2, 1])
        .alloc("heap", 3, 4, &[])
        .alloc("heap", 4, 8, &long)
        .alloc("heap", 5, 16, &[1, 2]);
    let a = t.analyze(View::Live);
    assert_eq!(
        only(&a).stacks,
        map(&[(&[1, 2], 17), (&[2, 1], 2), (&[], 4), (&long, 8)])
    );
}

#[test]
fn long_traces_keep_a_bounded_timeline_with_the_peak() {
    let mut t = Trace::new();
    // A sawtooth of about 16 700 operations, with its peak in the middle.
    for i in 0..10_000u64 {
        let size = if i == 6_789 { 1_000 } else { 1 + i % 7 };
        t.alloc("heap", 0x1000 + i, size, S1);
        if i % 3 != 0 {
            t.free("heap", 0x1000 + i, 0);
        }
    }
    let opts = Options {
        timeline_points: 50,
        ..Options::default()
    };
    let a = analyze(&t.bytes[..], &opts).unwrap();
    let p = only(&a);
    assert!(p.timeline.len() <= 50, "{}", p.timeline.len());
    assert!(p
        .timeline
        .contains(&(p.stats.peak_at_op, p.stats.peak_live)));
    assert!(p.timeline.windows(2).all(|w| w[0].0 < w[1].0));

    let none = Options {
        timeline_points: 0,
        ..Options::default()
    };
    assert!(only(&analyze(&t.bytes[..], &none).unwrap())
        .timeline
        .is_empty());
}

#[test]
fn sizes_saturate_instead_of_overflowing() {
    let mut t = Trace::new();
    t.alloc("heap", 1, u64::MAX, S1)
        .alloc("heap", 2, u64::MAX, S1)
        .realloc("heap", 1, u64::MAX, S2)
        .free("heap", 2, 0)
        .free("heap", 1, 0);
    for view in View::ALL {
        let a = t.analyze(view);
        assert_eq!(only(&a).stats.peak_live, u64::MAX);
    }
}
