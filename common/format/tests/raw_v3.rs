//! Format version 3: the allocation-hook records round trip, version 2 files keep skipping
//! kind 5, and corrupt or newer files are refused with the offset or the version named.

use kern_profile_format::memtrace::Op;
use kern_profile_format::*;
use kern_profile_test_support::damage::damaged_copies;
use kern_profile_test_support::raw_file::marked_header;

fn header(arch: Arch) -> Header {
    Header {
        start_unix_ns: 1_700_000_000_000_000_000,
        ..marked_header(arch, SamplingMode::Off, 2)
    }
}

fn table() -> AllocTable {
    AllocTable {
        allocators: vec!["kmalloc".into(), "pages".into()],
        functions: vec![
            HookedFunction {
                entry: 0xc010_2650,
                allocator: 0,
                op: Op::Alloc,
                name: "kernel::kalloc::kmalloc".into(),
            },
            HookedFunction {
                entry: 0xc010_2810,
                allocator: 0,
                op: Op::Realloc,
                name: "kernel::kalloc::krealloc".into(),
            },
            HookedFunction {
                entry: 0xc010_3030,
                allocator: 1,
                op: Op::Free,
                name: "kernel::kalloc::pages_free".into(),
            },
        ],
    }
}

const FRAMES: [u64; 3] = [0xc010_1400, 0xc010_1240, 0xc010_0010];

fn event(frames: &[u64]) -> AllocEvent<'_> {
    AllocEvent {
        vcpu: 1,
        op: Op::Realloc,
        flags: alloc_flags::USER,
        function: 1,
        allocator: 0,
        stop: StopReason::NullFramePointer.into(),
        time_ns: 12_345,
        icount: 678,
        size: 1500,
        ptr: 0x40_1010,
        new_ptr: 0x40_2020,
        frames,
    }
}

fn v3_file(arch: Arch) -> Vec<u8> {
    let h = header(arch);
    let mut out = Vec::new();
    h.encode_version(VERSION_3, &mut out);
    table().encode(h.ptr_width(), &mut out);
    event(&FRAMES).encode(h.ptr_width(), &mut out);
    AllocHookStats {
        events: 1,
        dropped: 0,
    }
    .encode(&mut out);
    out
}

#[test]
fn allocation_records_round_trip() {
    for arch in [Arch::I386, Arch::X86_64] {
        let bytes = v3_file(arch);
        let mut r = RawReader::new(&bytes[..]).unwrap();
        assert_eq!(r.version(), VERSION_3);
        match r.next_record().unwrap() {
            Some(Record::AllocTable(t)) => {
                assert_eq!(t, table());
                assert_eq!(t.allocator_of(2), Some("pages"));
                assert_eq!(t.allocator_of(9), None);
            }
            other => panic!("expected the table, got {other:?}"),
        }
        match r.next_record().unwrap() {
            Some(Record::AllocEvent(e)) => {
                assert_eq!(
                    (e.vcpu, e.op, e.function, e.allocator),
                    (1, Op::Realloc, 1, 0)
                );
                assert!(e.user() && !e.unreturned());
                assert_eq!(e.stop_reason(), Some(StopReason::NullFramePointer));
                assert_eq!((e.time_ns, e.icount, e.size), (12_345, 678, 1500));
                assert_eq!((e.ptr, e.new_ptr), (0x40_1010, 0x40_2020));
                assert_eq!(e.frames().collect::<Vec<_>>(), FRAMES);
            }
            other => panic!("expected an event, got {other:?}"),
        }
        match r.next_record().unwrap() {
            Some(Record::AllocStats(s)) => assert_eq!((s.events, s.dropped), (1, 0)),
            other => panic!("expected the statistics, got {other:?}"),
        }
        assert!(r.next_record().unwrap().is_none());
        let mut r = RawReader::new(&bytes[..]).unwrap();
        let sum = RawSummary::read(&mut r).unwrap();
        assert_eq!((sum.alloc_events, sum.unknown_records), (1, 0));
        assert_eq!(sum.alloc_stats.map(|s| s.events), Some(1));
    }
}

#[test]
fn a_cut_event_is_a_truncation() {
    let bytes = v3_file(Arch::I386);
    let mut r = RawReader::new(&bytes[..bytes.len() - 30]).unwrap();
    assert!(matches!(
        r.next_record().unwrap(),
        Some(Record::AllocTable(_))
    ));
    assert!(r.next_record().unwrap().is_none());
    assert!(r.truncation().is_some());
}

#[test]
fn version_2_skips_kind_5_and_newer_versions_are_refused_by_number() {
    // In a version-2 file, kind 5 is a reserved kind: skipped as unknown.
    let h = header(Arch::I386);
    let mut v2 = Vec::new();
    h.encode_version(VERSION_2, &mut v2);
    event(&FRAMES).encode(4, &mut v2);
    let mut r = RawReader::new(&v2[..]).unwrap();
    assert!(matches!(
        r.next_record().unwrap(),
        Some(Record::Unknown { kind: 5, .. })
    ));
    // A version this build does not know is refused, naming it (as version-2 readers refuse
    // version 3).
    let mut next = Vec::new();
    h.encode_version(MAX_VERSION + 1, &mut next);
    let e = RawReader::new(&next[..]).err().unwrap().to_string();
    assert_eq!(
        e,
        "unsupported raw format version 5 (this build reads versions 1 to 4: a newer kern-profile wrote it)"
    );
}

fn corrupt_message(bytes: &[u8]) -> String {
    let mut r = RawReader::new(bytes).unwrap();
    loop {
        match r.next_record() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("no error"),
            Err(e) => return e.to_string(),
        }
    }
}

#[test]
fn corrupt_records_name_their_offset() {
    let h = header(Arch::I386);
    let mut base = Vec::new();
    h.encode_version(VERSION_3, &mut base);
    let at = base.len();

    let mut bad_op = base.clone();
    event(&FRAMES).encode(4, &mut bad_op);
    bad_op[at + 5 + 4] = 7;
    let e = corrupt_message(&bad_op);
    assert_eq!(
        e,
        format!("corrupt record at byte offset {at}: allocation event has op 7")
    );

    let mut bad_len = base.clone();
    event(&FRAMES).encode(4, &mut bad_len);
    bad_len[at + 5 + 12] = 9; // claims 9 frames
    assert!(corrupt_message(&bad_len).contains("allocation event with 9 frames should be"));

    let mut bad_table = base.clone();
    let mut t = table();
    t.functions[0].allocator = 5;
    t.encode(4, &mut bad_table);
    assert!(corrupt_message(&bad_table).contains("hooked function 0 names allocator 5, of 2"));

    let mut short_table = base.clone();
    short_table.extend_from_slice(&[kind::ALLOC_TABLE, 3, 0, 0, 0, 1, 0, 9]);
    assert!(corrupt_message(&short_table).contains("allocator table ends inside an allocator name"));
}

#[test]
fn random_bytes_never_panic_in_v3() {
    let good = v3_file(Arch::X86_64);
    let cut_little = |len: usize, r: u64| len - r as usize % 16;
    for b in damaged_copies(&good, 0x9E37_79B9_7F4A_7C15, 3000, cut_little) {
        if let Ok(mut r) = RawReader::new(&b[..]) {
            while let Ok(Some(_)) = r.next_record() {}
        }
    }
}
