//! Allocation events of a raw file (`alloc=` hooks) through the memtrace model: the same
//! statistics and views, reallocs tracked at their new pointer, events replayed in time
//! order across vCPUs, and the raw file told from a memtrace by its magic.

mod common;

use kern_profile_alloc::{analyze_any, analyze_raw, AllocError, Options, Source, View};
use kern_profile_format::memtrace::Op;
use kern_profile_format::{
    alloc_flags, AllocEvent, AllocTable, Arch, HookedFunction, SamplingMode, VERSION_3,
};
use kern_profile_test_support::alloc_event::alloc_event;
use kern_profile_test_support::raw_file::marked_header;

const KMALLOC: u64 = 0xc010_2650;
const KREALLOC: u64 = 0xc010_2810;
const KFREE: u64 = 0xc010_2aa0;
const PAGES: u64 = 0xc010_2cb0;

/// A raw file with kmalloc's three functions and a page allocator hooked.
struct Raw {
    bytes: Vec<u8>,
}

impl Raw {
    fn new() -> Raw {
        let mut bytes = Vec::new();
        marked_header(Arch::I386, SamplingMode::Off, 2).encode_version(VERSION_3, &mut bytes);
        let f = |entry, allocator, op, name: &str| HookedFunction {
            entry,
            allocator,
            op,
            name: name.into(),
        };
        AllocTable {
            allocators: vec!["kmalloc".into(), "pages".into()],
            functions: vec![
                f(KMALLOC, 0, Op::Alloc, "kmalloc"),
                f(KREALLOC, 0, Op::Realloc, "krealloc"),
                f(KFREE, 0, Op::Free, "kfree"),
                f(PAGES, 1, Op::Alloc, "pages_alloc"),
            ],
        }
        .encode(4, &mut bytes);
        Raw { bytes }
    }

    #[allow(clippy::too_many_arguments)]
    fn ev(
        &mut self,
        vcpu: u32,
        t: u64,
        function: u16,
        ptr: u64,
        new_ptr: u64,
        size: u64,
        caller: u64,
        flags: u8,
    ) -> &mut Self {
        let (op, allocator) = match function {
            0 => (Op::Alloc, 0),
            1 => (Op::Realloc, 0),
            2 => (Op::Free, 0),
            _ => (Op::Alloc, 1),
        };
        AllocEvent {
            flags,
            allocator,
            size,
            ptr,
            new_ptr,
            ..alloc_event(vcpu, op, function, t, &[caller, 0xc010_0010])
        }
        .encode(4, &mut self.bytes);
        self
    }

    fn alloc(&mut self, t: u64, ptr: u64, size: u64, caller: u64) -> &mut Self {
        self.ev(0, t, 0, ptr, 0, size, caller, 0)
    }

    fn realloc(&mut self, t: u64, old: u64, new: u64, size: u64, caller: u64) -> &mut Self {
        self.ev(0, t, 1, old, new, size, caller, 0)
    }

    fn free(&mut self, t: u64, ptr: u64) -> &mut Self {
        self.ev(0, t, 2, ptr, 0, 0, 0xc010_1000, 0)
    }
}

fn opts(view: View) -> Options {
    Options {
        view,
        ..Options::default()
    }
}

#[test]
fn a_moving_realloc_is_tracked_at_its_new_pointer() {
    let mut r = Raw::new();
    r.alloc(1, 0x100, 200, 0xc010_1400)
        .realloc(2, 0x100, 0x900, 1500, 0xc010_1410)
        // The old pointer is handed out again: no "may have moved" guesswork.
        .alloc(3, 0x100, 48, 0xc010_1420)
        .free(4, 0x100)
        .alloc(5, 0x200, 10, 0xc010_1430)
        .free(6, 0x900);
    let a = analyze_raw(&r.bytes[..], &opts(View::Live)).unwrap();
    assert_eq!(a.source, Source::Hooks);
    assert_eq!(a.records, 6);
    let k = &a.allocators[0];
    assert_eq!(k.name, "kmalloc");
    let s = &k.stats;
    assert_eq!(
        (s.allocations, s.reallocations, s.frees, s.bytes_allocated),
        (3, 1, 2, 1758)
    );
    assert_eq!(
        (s.peak_live, s.live_at_end, s.live_blocks_at_end),
        (1548, 10, 1)
    );
    assert_eq!(
        (
            s.moves_detected,
            s.unknown_frees,
            s.double_frees,
            s.live_unconfirmed_at_end
        ),
        (0, 0, 0, 0)
    );
    // The live stack starts with the hooked function's entry.
    let live: Vec<_> = k.live_stacks.iter().collect();
    assert_eq!(live, [(&vec![KMALLOC, 0xc010_1430, 0xc010_0010], &10)]);
    // An allocator of the table that was never called still has its (empty) profile.
    assert_eq!(a.allocators[1].name, "pages");
    assert_eq!(a.allocators[1].stats.operations, 0);
}

#[test]
fn events_are_replayed_in_time_order_across_vcpus() {
    // vCPU 1's batch reached the file first, but its allocation came after vCPU 0's free.
    let mut r = Raw::new();
    r.alloc(10, 0x100, 64, 0xc010_1400);
    r.ev(1, 30, 0, 0x100, 0, 32, 0xc010_1500, 0);
    r.free(20, 0x100);
    let a = analyze_raw(&r.bytes[..], &opts(View::Live)).unwrap();
    let s = &a.allocators[0].stats;
    assert_eq!((s.reused_live, s.unknown_frees, s.live_at_end), (0, 0, 32));
}

#[test]
fn events_at_the_same_host_time_keep_the_vcpus_order() {
    // Events carry no instruction count without `period=` (0): only the host time orders
    // them, and a tie keeps the order the vCPU wrote them in.
    let mut r = Raw::new();
    r.alloc(10, 0x100, 64, 0xc010_1400)
        .free(10, 0x100)
        .alloc(10, 0x100, 32, 0xc010_1400);
    let a = analyze_raw(&r.bytes[..], &opts(View::Live)).unwrap();
    let s = &a.allocators[0].stats;
    assert_eq!((s.reused_live, s.unknown_frees, s.live_at_end), (0, 0, 32));
}

#[test]
fn null_results_and_calls_that_never_returned_are_counted_apart() {
    let mut r = Raw::new();
    r.alloc(1, 0, 4096, 0xc010_1400)
        .alloc(2, 0x100, 8, 0xc010_1400)
        .realloc(3, 0x100, 0, 1 << 30, 0xc010_1410)
        .ev(0, 4, 1, 0x100, 0, 99, 0xc010_1410, alloc_flags::UNRETURNED)
        .ev(0, 5, 0, 0, 0, 99, 0xc010_1410, alloc_flags::UNRETURNED)
        .realloc(6, 0, 0x300, 16, 0xc010_1420)
        .free(7, 0);
    let a = analyze_raw(&r.bytes[..], &opts(View::Count)).unwrap();
    let s = &a.allocators[0].stats;
    assert_eq!((s.failed, s.unreturned), (2, 2));
    // realloc(NULL, 16) allocates; free(NULL) is a free of nothing.
    assert_eq!(
        (
            s.allocations,
            s.reallocations,
            s.frees,
            s.unknown_reallocs,
            s.unknown_frees
        ),
        (1, 1, 1, 0, 0)
    );
    // The block whose realloc failed or never returned is still there.
    assert_eq!((s.live_at_end, s.live_blocks_at_end), (24, 2));
}

#[test]
fn raw_files_and_memtraces_are_told_apart() {
    let mut r = Raw::new();
    r.alloc(1, 0x100, 64, 0xc010_1400);
    let a = analyze_any(&r.bytes[..], &Options::default()).unwrap();
    assert_eq!((a.source, a.records), (Source::Hooks, 1));
    let mut t = common::Trace::new();
    t.alloc("kmalloc", 0x100, 64, &[0xc010_2700, 0xc010_1400]);
    let m = analyze_any(&t.bytes[..], &Options::default()).unwrap();
    assert_eq!((m.source, m.records), (Source::Memtrace, 1));
    let empty = analyze_any(&[][..], &Options::default()).unwrap();
    assert_eq!(empty.records, 0);
}

#[test]
fn files_without_events_or_with_damage_say_so() {
    // A CPU recording: no allocator table.
    let mut cpu = Vec::new();
    marked_header(Arch::X86_64, SamplingMode::DelayMicros(10), 1).encode(&mut cpu);
    let e = analyze_any(&cpu[..], &Options::default()).unwrap_err();
    assert!(matches!(e, AllocError::NoAllocationEvents));
    assert!(e
        .to_string()
        .contains("record them with the plugin's alloc=SPEC"));

    let mut r = Raw::new();
    let at = r.bytes.len();
    r.ev(0, 1, 7, 0x100, 0, 8, 0xc010_1400, 0);
    let e = analyze_raw(&r.bytes[..], &Options::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("raw file: the allocation event at byte offset {at} names hooked function 7, which the allocator table lacks")
    );

    let mut r = Raw::new();
    r.alloc(1, 0x100, 64, 0xc010_1400)
        .alloc(2, 0x200, 64, 0xc010_1400);
    let cut = &r.bytes[..r.bytes.len() - 3];
    let a = analyze_raw(cut, &Options::default()).unwrap();
    assert_eq!(a.records, 1);
    assert!(a.truncation.is_some());
}
