//! Round trips and damage handling of the raw CPU format, on real encoded bytes.

use kern_profile_format::*;
use kern_profile_test_support::damage::damaged_copies;
use kern_profile_test_support::raw_file::raw_header;

fn header(arch: Arch) -> Header {
    Header {
        exact: true,
        start_unix_ns: 1_700_000_000_000_000_000,
        ..raw_header(arch, SamplingMode::PeriodInstructions(10_000), 2)
    }
}

fn sample(frames: &[u64]) -> SampleRecord<'_> {
    SampleRecord {
        vcpu: 1,
        user: false,
        stop: StopReason::NullFramePointer.into(),
        time_ns: 12_345,
        icount: 99_999,
        pc: 0x0010_2030,
        sp: 0x0020_0000,
        sp_word: Some(0x0010_1111),
        frames,
        entry_resolved: true,
    }
}

fn file(arch: Arch, samples: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let h = header(arch);
    h.encode(&mut out);
    for i in 0..samples {
        let frames = [0x0010_0000 + i as u64, 0x0010_0100];
        encode_sample(&mut out, h.ptr_width(), &sample(&frames));
    }
    out
}

#[test]
fn header_round_trips() {
    for arch in [Arch::I386, Arch::X86_64] {
        let bytes = file(arch, 0);
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(bytes.len(), HEADER_FIXED_LEN + "10.0.2".len());
        let r = RawReader::new(&bytes[..]).unwrap();
        assert_eq!(r.header(), &header(arch));
        assert_eq!(detect(&bytes), CpuFormat::Raw);
    }
}

#[test]
fn samples_round_trip_in_both_widths() {
    for arch in [Arch::I386, Arch::X86_64] {
        let bytes = file(arch, 3);
        let mut r = RawReader::new(&bytes[..]).unwrap();
        let mut n = 0;
        while let Some(rec) = r.next_record().unwrap() {
            let Record::Sample(s) = rec else {
                panic!("expected a sample")
            };
            assert_eq!(s.vcpu, 1);
            assert!(!s.user());
            assert!(s.entry_resolved());
            assert_eq!(s.stop_reason(), Some(StopReason::NullFramePointer));
            assert_eq!((s.time_ns, s.icount), (12_345, 99_999));
            assert_eq!(
                (s.pc, s.sp, s.sp_word()),
                (0x0010_2030, 0x0020_0000, Some(0x0010_1111))
            );
            let frames: Vec<u64> = s.frames().collect();
            assert_eq!(frames, vec![0x0010_0000 + n, 0x0010_0100]);
            n += 1;
        }
        assert_eq!(n, 3);
        assert_eq!(r.truncation(), None);
    }
}

#[test]
fn i386_sample_is_compact() {
    // 5 bytes of record head + 24 fixed + (3 + 2 frames) * 4.
    let bytes = file(Arch::I386, 1);
    assert_eq!(bytes.len() - (HEADER_FIXED_LEN + 6), 5 + 24 + 5 * 4);
}

#[test]
fn exact_blocks_and_stats_round_trip() {
    let h = header(Arch::I386);
    let mut out = Vec::new();
    h.encode(&mut out);
    let blocks: Vec<(u64, Vec<u64>)> = (0..5000)
        .map(|i| (i as u64 * 3, vec![0x1000 + i as u64, 0x1002 + i as u64]))
        .collect();
    encode_exact_blocks(&mut out, 4, blocks.iter().map(|(e, v)| (*e, v.as_slice())));
    encode_stats(
        &mut out,
        10,
        2,
        &[7, 0, 1, 0, 2, 0],
        &[1_000_000, 2_000_000],
    );
    let mut r = RawReader::new(&out[..]).unwrap();
    let mut seen = Vec::new();
    let mut records = 0;
    let mut stats = None;
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::ExactBlocks(b) => {
                records += 1;
                for blk in b.iter() {
                    seen.push((blk.executions, blk.instructions().collect::<Vec<_>>()));
                }
            }
            Record::Stats(s) => stats = Some(s),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(records, 2, "5000 blocks split into records of 4096");
    assert_eq!(seen, blocks);
    let s = stats.unwrap();
    assert_eq!((s.samples, s.dropped), (10, 2));
    assert_eq!(s.stops, vec![7, 0, 1, 0, 2, 0]);
    assert_eq!(s.vcpu_instructions, vec![1_000_000, 2_000_000]);
}

#[test]
fn torn_last_record_keeps_everything_before_it() {
    let bytes = file(Arch::I386, 10);
    let record_len = 5 + 24 + 5 * 4;
    for cut in 1..record_len {
        let torn = &bytes[..bytes.len() - cut];
        let mut r = RawReader::new(torn).unwrap();
        let mut n = 0;
        while r.next_record().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 9, "cut {cut}");
        let t = r.truncation().expect("truncation reported");
        assert_eq!(t.offset as usize, bytes.len() - record_len);
        assert_eq!(t.available, record_len - cut);
    }
}

#[test]
fn corrupt_sample_names_its_offset() {
    let mut bytes = file(Arch::I386, 3);
    let second = HEADER_FIXED_LEN + 6 + 49;
    // Claim 9 frames in the second sample: its length no longer fits.
    bytes[second + 5 + 6] = 9;
    let mut r = RawReader::new(&bytes[..]).unwrap();
    assert!(r.next_record().unwrap().is_some());
    match r.next_record() {
        Err(FormatError::Corrupt { offset, what }) => {
            assert_eq!(offset as usize, second);
            assert!(what.contains("9 frames"), "{what}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn unknown_record_kinds_are_skipped() {
    let mut bytes = file(Arch::I386, 1);
    let at = bytes.len() as u64;
    bytes.extend_from_slice(&[77, 3, 0, 0, 0, 1, 2, 3]);
    encode_sample(&mut bytes, 4, &sample(&[]));
    let mut r = RawReader::new(&bytes[..]).unwrap();
    let mut kinds = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        kinds.push(match rec {
            Record::Sample(_) => "sample".to_string(),
            Record::Unknown { kind, offset } => format!("unknown {kind} at {offset}"),
            _ => "other".into(),
        });
    }
    assert_eq!(
        kinds,
        vec![
            "sample".to_string(),
            format!("unknown 77 at {at}"),
            "sample".into()
        ]
    );
}

#[test]
fn bad_headers_are_named() {
    assert!(matches!(
        RawReader::new(&b"KPROF"[..]),
        Err(FormatError::ShortHeader(5))
    ));
    let mut bytes = file(Arch::I386, 0);
    bytes[8] = 9;
    assert!(matches!(
        RawReader::new(&bytes[..]),
        Err(FormatError::UnsupportedVersion(9))
    ));
    let mut bytes = file(Arch::I386, 0);
    bytes[12] = 7;
    let e = RawReader::new(&bytes[..]).err().unwrap().to_string();
    assert!(e.contains("architecture code 7"), "{e}");
    let mut bytes = file(Arch::I386, 0);
    bytes[13] = 8;
    let e = RawReader::new(&bytes[..]).err().unwrap().to_string();
    assert!(e.contains("pointer width 8"), "{e}");
}

#[test]
fn longer_headers_from_later_versions_are_accepted() {
    let mut bytes = file(Arch::I386, 1);
    let len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    bytes.splice(len..len, [0xAA; 7]);
    bytes[10..12].copy_from_slice(&((len + 7) as u16).to_le_bytes());
    let mut r = RawReader::new(&bytes[..]).unwrap();
    assert_eq!(r.header().qemu_version, "10.0.2");
    assert!(matches!(r.next_record().unwrap(), Some(Record::Sample(_))));
}

#[test]
fn random_bytes_never_panic() {
    let good = file(Arch::X86_64, 20);
    let cut_anywhere = |len: usize, r: u64| r as usize % (len + 1);
    for b in damaged_copies(&good, 0x9E37_79B9_7F4A_7C15, 2000, cut_anywhere) {
        if let Ok(mut r) = RawReader::new(&b[..]) {
            while let Ok(Some(_)) = r.next_record() {}
        }
        let mut l = LegacyReader::new(&b[..]);
        while let Ok(Some(_)) = l.next_sample() {}
    }
}

#[test]
fn summary_counts_every_record() {
    let h = header(Arch::X86_64);
    let mut out = Vec::new();
    h.encode(&mut out);
    let frames = [0x1000u64, 0x2000];
    for (vcpu, user, stop) in [
        (0, false, StopReason::NullFramePointer),
        (1, true, StopReason::NullFramePointer),
        (1, false, StopReason::DepthLimit),
        (5000, false, StopReason::Unreadable),
    ] {
        let s = SampleRecord {
            vcpu,
            user,
            stop: stop.into(),
            sp_word: (vcpu == 0).then_some(7),
            ..sample(&frames)
        };
        encode_sample(&mut out, 8, &s);
    }
    let blocks = [(3u64, vec![1u64, 2, 3]), (10, vec![4])];
    encode_exact_blocks(&mut out, 8, blocks.iter().map(|(e, v)| (*e, v.as_slice())));
    out.extend_from_slice(&[77, 0, 0, 0, 0]);
    let stats = Stats {
        samples: 4,
        dropped: 1,
        stops: StopCounts::from_counts(vec![3, 0, 0, 1, 1]),
        vcpu_instructions: vec![10, 20],
    };
    stats.encode(&mut out);
    let whole = out.len();
    encode_sample(&mut out, 8, &sample(&frames));

    let mut r = RawReader::new(&out[..whole]).unwrap();
    let s = RawSummary::read(&mut r).unwrap();
    assert_eq!((s.samples, s.user_samples, s.sp_words), (4, 1, 1));
    assert_eq!(s.entry_resolved, 4);
    assert_eq!(s.stops, [2, 0, 0, 1, 1]);
    assert_eq!(
        s.stops.to_string(),
        "null frame pointer 2, unreadable memory 1, depth limit 1"
    );
    assert_eq!(
        s.per_vcpu.iter().collect::<Vec<_>>(),
        [(0, 1), (1, 2), (5000, 1)]
    );
    assert_eq!((s.per_vcpu.get(1), s.per_vcpu.get(2)), (2, 0));
    assert_eq!(s.per_vcpu.max(), Some(5000));
    assert_eq!(
        (s.exact_records, s.exact_blocks, s.exact_instructions),
        (1, 2, 19)
    );
    assert_eq!(s.unknown_records, 1);
    assert_eq!(s.stats.as_ref(), Some(&stats));
    assert_eq!(s.run_stops(), (&stats.stops, StopsFrom::Statistics));
    assert_eq!(s.truncation, None);

    // Cut inside the last sample: everything before it is counted, the cut is reported.
    let mut r = RawReader::new(&out[..out.len() - 3]).unwrap();
    let cut = RawSummary::read(&mut r).unwrap();
    assert_eq!(cut.samples, 4);
    assert_eq!(cut.truncation.map(|t| t.offset), Some(whole as u64));
    // Without a statistics record, the stops come from the samples.
    let s = RawSummary { stats: None, ..cut };
    assert_eq!(s.run_stops(), (&s.stops, StopsFrom::Samples));
}
