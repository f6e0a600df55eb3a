//! Allocation mode on synthetic memtrace traces against tests/data/tiny.elf: stacks named
//! with the CPU path's code (return addresses at addr - 1), per-allocator files, errors.

mod common;

use common::tiny::*;
use kern_profile::alloc_cmd::{run_alloc_to, AllocCmdError, AllocFormat, AllocOptions, AllocView};
use kern_profile_format::memtrace::{encode_record, Op};

fn trace() -> Vec<u8> {
    let mut t = Vec::new();
    let deep = [RET_MIDDLE, RET_WORK, RET_START];
    encode_record(&mut t, b"heap", Op::Alloc, 0x1000, 64, &deep);
    encode_record(&mut t, b"heap", Op::Alloc, 0x2000, 32, &deep[1..]);
    encode_record(&mut t, b"heap", Op::Free, 0x2000, 0, &deep[1..]);
    encode_record(&mut t, b"heap", Op::Alloc, 0x3000, 8, &[0x10, RET_START]);
    encode_record(&mut t, b"page allocator", Op::Alloc, 0x10_0000, 2, &deep);
    t
}

#[test]
fn stacks_are_named_like_cpu_stacks() {
    let dir = common::temp_dir("alloc-synthetic");
    let memtrace = common::write(&dir, "memtrace", &trace());
    let out = dir.join("out");
    let r =
        common::alloc_tiny(&memtrace, &out, AllocFormat::Folded, AllocView::Live, None).unwrap();
    assert_eq!(
        r.files,
        [
            out.join("mem-heap.folded"),
            out.join("mem-page_allocator.folded")
        ]
    );
    let heap = std::fs::read_to_string(out.join("mem-heap.folded")).unwrap();
    assert_eq!(heap, "_start;[unknown] 8\n_start;kernel::work;middle 64\n");
    let r = common::alloc_tiny(
        &memtrace,
        &out,
        AllocFormat::Folded,
        AllocView::Allocated,
        None,
    )
    .unwrap();
    assert!(r.warnings.is_empty());
    let heap = std::fs::read_to_string(out.join("mem-heap.folded")).unwrap();
    assert_eq!(
        heap,
        "_start;[unknown] 8\n_start;kernel::work 32\n_start;kernel::work;middle 64\n"
    );
    let r = common::alloc_tiny(&memtrace, &out, AllocFormat::Svg, AllocView::Live, None).unwrap();
    let svg = std::fs::read_to_string(&r.files[0]).unwrap();
    assert!(
        svg.contains("heap: 72 units still allocated"),
        "{}",
        &svg[..2000.min(svg.len())]
    );
}

#[test]
fn bad_traces_are_errors_or_warnings() {
    let dir = common::temp_dir("alloc-bad");
    let mut t = trace();
    let len = t.len();
    // A bad op byte in the first record: an error naming its offset (strict), a skip
    // (lenient).
    t[1 + 4] = 9;
    let memtrace = common::write(&dir, "bad", &t);
    let e = common::alloc_tiny(&memtrace, &dir, AllocFormat::Folded, AllocView::Live, None)
        .unwrap_err();
    assert!(matches!(e, AllocCmdError::Analyze { .. }), "{e}");
    assert!(e.to_string().contains("offset"), "{e}");
    let lenient = AllocOptions {
        lenient: true,
        ..common::alloc_opts(AllocFormat::Folded, AllocView::Live)
    };
    let r = run_alloc_to(&memtrace, Some(&common::tiny_elf()), &dir, &lenient, None).unwrap();
    assert!(
        r.warnings.iter().any(|w| w.to_string().contains("skipped")),
        "{:?}",
        r.warnings
    );
    // Cut short: a warning, the complete records used.
    let cut = common::write(&dir, "cut", &trace()[..len - 3]);
    let r = common::alloc_tiny(&cut, &dir, AllocFormat::Folded, AllocView::Live, None).unwrap();
    assert!(
        r.warnings
            .iter()
            .any(|w| w.to_string().contains("ends inside a record")),
        "{:?}",
        r.warnings
    );
    // Missing file.
    let e = run_alloc_to(
        &dir.join("nope"),
        Some(&common::tiny_elf()),
        &dir,
        &common::alloc_opts(AllocFormat::Folded, AllocView::Live),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn random_traces_never_panic() {
    let dir = common::temp_dir("alloc-fuzz");
    let mut x = 0x1234_5678u32;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let good = trace();
    for round in 0..200 {
        let bytes: Vec<u8> = if round % 2 == 0 {
            let mut b = good.clone();
            for _ in 0..3 {
                let i = next() as usize % b.len();
                b[i] = next() as u8;
            }
            b
        } else {
            (0..next() % 600).map(|_| next() as u8).collect()
        };
        let memtrace = common::write(&dir, "fuzz", &bytes);
        let o = AllocOptions {
            lenient: round % 3 == 0,
            ..common::alloc_opts(
                [AllocFormat::Folded, AllocFormat::Svg, AllocFormat::Text][round % 3],
                [
                    AllocView::Live,
                    AllocView::Peak,
                    AllocView::Count,
                    AllocView::Allocated,
                ][round % 4],
            )
        };
        let mut sink = Vec::new();
        let text = (o.format == AllocFormat::Text).then_some(&mut sink as &mut dyn std::io::Write);
        let _ = run_alloc_to(
            &memtrace,
            Some(&common::tiny_elf()),
            &dir.join("out"),
            &o,
            text,
        );
    }
}
