//! Allocation mode on a raw file with allocation events (the plugin's `alloc=`), against
//! tests/data/tiny.elf: told from a memtrace by its magic, the hooked function named as the
//! leaf of each stack (its entry looked up as is), the same views and report as memtrace.

mod common;

use std::path::Path;

use common::tiny::*;
use kern_profile::alloc_cmd::{AllocFormat, AllocView};
use kern_profile_format::memtrace::{encode_record, Op};
use kern_profile_format::{
    AllocEvent, AllocTable, HookedFunction, SamplingMode, StopReason, VERSION_3,
};

/// `leaf` hooked as the heap's alloc, `middle` as its realloc, `kernel::work` as its free;
/// no sampling (`alloc=` alone).
fn raw() -> Vec<u8> {
    let mut out = Vec::new();
    let mut h = common::header(1, false);
    h.sampling = SamplingMode::Off;
    h.encode_version(VERSION_3, &mut out);
    let f = |entry, op, name: &str| HookedFunction {
        entry,
        allocator: 0,
        op,
        name: name.into(),
    };
    AllocTable {
        allocators: vec!["heap".into()],
        functions: vec![
            f(LEAF, Op::Alloc, "leaf"),
            f(0xc010_0040, Op::Realloc, "middle"),
            f(0xc010_0060, Op::Free, "kernel::work"),
        ],
    }
    .encode(4, &mut out);
    let mut ev = |t: u64, function: u16, op, ptr, new_ptr, size, frames: &[u64]| {
        AllocEvent {
            vcpu: 0,
            op,
            flags: 0,
            function,
            allocator: 0,
            stop: StopReason::NullFramePointer.into(),
            time_ns: t,
            icount: 0,
            size,
            ptr,
            new_ptr,
            frames,
        }
        .encode(4, &mut out)
    };
    let deep = [RET_MIDDLE, RET_WORK, RET_START];
    ev(1, 0, Op::Alloc, 0x1000, 0, 64, &deep);
    ev(2, 0, Op::Alloc, 0x2000, 0, 32, &deep[1..]);
    // Moves 0x2000 to 0x5000: the block is known to be there.
    ev(3, 1, Op::Realloc, 0x2000, 0x5000, 48, &deep[2..]);
    ev(4, 0, Op::Alloc, 0x2000, 0, 16, &deep[1..]);
    ev(5, 2, Op::Free, 0x1000, 0, 0, &deep[2..]);
    out
}

/// The allocation command's text report of `input`'s live view, its files into `out`.
fn live_report(input: &Path, out: &Path) -> String {
    let mut text = Vec::new();
    common::alloc_tiny(
        input,
        out,
        AllocFormat::Text,
        AllocView::Live,
        Some(&mut text),
    )
    .unwrap();
    String::from_utf8(text).unwrap()
}

#[test]
fn raw_allocation_events_give_the_memtrace_views() {
    let dir = common::temp_dir("alloc-hooks");
    let raw = common::write(&dir, "raw", &raw());
    let out = dir.join("out");
    let r = common::alloc_tiny(&raw, &out, AllocFormat::Folded, AllocView::Live, None).unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let heap = std::fs::read_to_string(out.join("mem-heap.folded")).unwrap();
    // The leaf is the hooked function itself, named at its entry.
    assert_eq!(heap, "_start;kernel::work;leaf 16\n_start;middle 48\n");
    let text = live_report(&raw, &out);
    assert!(
        text.starts_with("allocation hooks: 5 events, 1 allocator(s)\n"),
        "{text}"
    );
    for line in [
        "  allocations                              3\n",
        "  reallocations                            1\n",
        "  frees                                    1\n",
        "  live at end                             64  in 2 block(s)\n",
        "  frees of unknown pointers                0\n",
        "              48   75.0%  _start;middle\n",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
    assert!(!text.contains("may have moved"), "{text}");
}

#[test]
fn memtrace_files_still_read_as_memtrace() {
    let dir = common::temp_dir("alloc-hooks-memtrace");
    let mut t = Vec::new();
    encode_record(
        &mut t,
        b"heap",
        Op::Alloc,
        0x1000,
        64,
        &[RET_MIDDLE, RET_START],
    );
    let memtrace = common::write(&dir, "memtrace", &t);
    let text = live_report(&memtrace, &dir);
    assert!(
        text.starts_with("memtrace: 1 records, 1 allocator(s)\n"),
        "{text}"
    );
    assert!(text.contains("_start;middle"), "{text}");
}

#[test]
fn a_cpu_recording_is_not_an_allocation_trace() {
    let dir = common::temp_dir("alloc-hooks-cpu");
    let raw = common::write(&dir, "raw", &common::synthetic_raw(false));
    let e = common::alloc_tiny(&raw, &dir, AllocFormat::Text, AllocView::Live, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("holds no allocation events: record them with the plugin's alloc=SPEC"),
        "{e}"
    );
}

#[test]
fn an_allocation_only_recording_points_to_alloc() {
    let dir = common::temp_dir("alloc-hooks-only");
    let raw = common::write(&dir, "raw", &raw());
    let e = kern_profile::run_cpu(
        &raw,
        Some(&common::tiny_elf()),
        &kern_profile::Options::default(),
        &mut Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.ends_with("holds allocation events only (recorded with alloc= and neither delay= nor period=): read it with --alloc"),
        "{e}"
    );
}
