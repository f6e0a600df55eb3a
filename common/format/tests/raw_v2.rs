//! Format version 2: its samples' extra fields round trip, and version 1 files still read.

use kern_profile_format::*;
use kern_profile_test_support::damage::damaged_copies;
use kern_profile_test_support::raw_file::raw_header;

fn header(arch: Arch) -> Header {
    Header {
        start_unix_ns: 1_700_000_000_000_000_000,
        ..raw_header(arch, SamplingMode::DelayMicros(10), 4)
    }
}

fn sample(frames: &[u64]) -> SampleRecord<'_> {
    SampleRecord {
        vcpu: 2,
        user: false,
        stop: StopReason::NullFramePointer.into(),
        time_ns: 5_000,
        icount: 77,
        pc: 0x8020_1000,
        sp: 0x8040_0000,
        sp_word: Some(0x8020_0004),
        frames,
        entry_resolved: false,
    }
}

const FRAMES: [u64; 3] = [0x8020_2000, 0x0000_1234, 0x0000_1000];

fn extras() -> SampleExtras {
    SampleExtras {
        mode: CpuMode::Paging,
        privilege: Privilege::Kernel,
        return_register: Some(0x8020_2000),
        page_table_base: Some(0x8000_0000_0008_1234),
    }
}

fn v2_file(arch: Arch, x: &SampleExtras) -> Vec<u8> {
    let h = header(arch);
    let mut out = Vec::new();
    h.encode_version(VERSION_2, &mut out);
    encode_sample_v2(&mut out, h.ptr_width(), &sample(&FRAMES), x);
    out
}

fn only_sample(bytes: &[u8], check: impl FnOnce(&SampleRef<'_>)) {
    let mut r = RawReader::new(bytes).unwrap();
    match r.next_record().unwrap() {
        Some(Record::Sample(s)) => check(&s),
        other => panic!("expected a sample, got {other:?}"),
    }
    assert!(r.next_record().unwrap().is_none());
    assert_eq!(r.truncation(), None);
}

#[test]
fn headers_of_every_architecture() {
    for arch in [Arch::I386, Arch::X86_64, Arch::Riscv64, Arch::Aarch64] {
        let mut out = Vec::new();
        header(arch).encode_version(VERSION_2, &mut out);
        let r = RawReader::new(&out[..]).unwrap();
        assert_eq!(r.header(), &header(arch));
        assert_eq!(r.version(), 2);
        assert_eq!(Arch::from_code(arch.code()), Some(arch));
    }
    assert_eq!(Arch::Riscv64.name(), "riscv64");
    assert_eq!(Arch::Aarch64.ptr_width(), 8);
    let mut v1 = Vec::new();
    header(Arch::I386).encode(&mut v1);
    assert_eq!(RawReader::new(&v1[..]).unwrap().version(), VERSION);
    // Versions 3 (allocation hooks) and 4 (the stack table) are read since; the next one
    // is refused.
    v1[8] = 5;
    let e = RawReader::new(&v1[..]).err().unwrap();
    assert!(matches!(e, FormatError::UnsupportedVersion(5)));
    assert!(e.to_string().contains("versions 1 to 4"), "{e}");
}

#[test]
fn v2_samples_round_trip_in_both_widths() {
    for arch in [Arch::I386, Arch::Riscv64] {
        let x = extras();
        only_sample(&v2_file(arch, &x), |s| {
            assert_eq!(
                (s.vcpu, s.pc, s.sp, s.sp_word()),
                (2, 0x8020_1000, 0x8040_0000, Some(0x8020_0004))
            );
            assert_eq!((s.time_ns, s.icount), (5_000, 77));
            assert_eq!(s.frames().collect::<Vec<_>>(), FRAMES);
            assert_eq!(s.mode(), CpuMode::Paging);
            assert_eq!(s.privilege(), Privilege::Kernel);
            assert!(!s.user());
            assert_eq!(s.return_register(), Some(0x8020_2000));
            assert_eq!(s.page_table_base(), Some(0x8000_0000_0008_1234));
            assert_eq!(s.stop_reason(), Some(StopReason::NullFramePointer));
        });
    }
}

#[test]
fn v2_without_optional_fields_is_compact() {
    let x = SampleExtras {
        privilege: Privilege::User,
        ..SampleExtras::default()
    };
    let bytes = v2_file(Arch::X86_64, &x);
    // 5 bytes of record head + 36 fixed + (4 words + 3 frames) * 8.
    assert_eq!(bytes.len() - (HEADER_FIXED_LEN + 6), 5 + 36 + 7 * 8);
    only_sample(&bytes, |s| {
        assert!(s.user(), "privilege user sets the user flag");
        assert_eq!(s.privilege(), Privilege::User);
        assert_eq!(s.mode(), CpuMode::Unknown);
        assert_eq!((s.return_register(), s.page_table_base()), (None, None));
    });
}

#[test]
fn v1_samples_answer_the_v2_questions() {
    let h = header(Arch::I386);
    let mut out = Vec::new();
    h.encode(&mut out);
    encode_sample(
        &mut out,
        4,
        &SampleRecord {
            user: true,
            ..sample(&FRAMES)
        },
    );
    encode_sample(&mut out, 4, &sample(&FRAMES));
    let mut r = RawReader::new(&out[..]).unwrap();
    let mut privileges = Vec::new();
    while let Some(Record::Sample(s)) = r.next_record().unwrap() {
        privileges.push(s.privilege());
        assert_eq!(s.mode(), CpuMode::Unknown);
        assert_eq!((s.return_register(), s.page_table_base()), (None, None));
    }
    assert_eq!(privileges, [Privilege::User, Privilege::Kernel]);
}

#[test]
fn damaged_v2_records() {
    let good = v2_file(Arch::X86_64, &extras());
    let start = HEADER_FIXED_LEN + 6;
    // Claim 4 frames: the length no longer fits, and the error says where.
    let mut bad = good.clone();
    bad[start + 5 + 6] = 4;
    let mut r = RawReader::new(&bad[..]).unwrap();
    match r.next_record() {
        Err(FormatError::Corrupt { offset, what }) => {
            assert_eq!(offset as usize, start);
            assert!(what.contains("4 frames"), "{what}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // Cut anywhere inside the record: a truncation, nothing else.
    for cut in 1..good.len() - start {
        let mut r = RawReader::new(&good[..good.len() - cut]).unwrap();
        assert!(r.next_record().unwrap().is_none());
        assert_eq!(r.truncation().map(|t| t.offset as usize), Some(start));
    }
}

#[test]
fn reserved_kinds_are_skipped_and_summaries_count_v2() {
    let mut out = v2_file(Arch::Aarch64, &extras());
    // Kind 6 (code bytes) has its layout now; kind 5 is still reserved.
    for k in [kind::ALLOC_EVENT, 77] {
        out.extend_from_slice(&[k, 2, 0, 0, 0, 0xaa, 0xbb]);
    }
    encode_sample_v2(&mut out, 8, &sample(&[]), &SampleExtras::default());
    let mut r = RawReader::new(&out[..]).unwrap();
    let s = RawSummary::read(&mut r).unwrap();
    assert_eq!((s.samples, s.unknown_records), (2, 2));
    assert_eq!(s.per_vcpu.get(2), 2);
}

#[test]
fn random_bytes_never_panic_in_v2() {
    let mut good = Vec::new();
    header(Arch::I386).encode_version(VERSION_2, &mut good);
    for _ in 0..20 {
        encode_sample_v2(&mut good, 4, &sample(&FRAMES), &extras());
    }
    let cut_anywhere = |len: usize, r: u64| r as usize % (len + 1);
    for b in damaged_copies(&good, 0x2545_F491_4F6C_DD1D, 2000, cut_anywhere) {
        if let Ok(mut r) = RawReader::new(&b[..]) {
            while let Ok(Some(rec)) = r.next_record() {
                if let Record::Sample(s) = rec {
                    let _ = (s.frames().count(), s.privilege(), s.mode());
                }
            }
        }
    }
}

#[test]
fn code_bytes_round_trip_in_both_widths() {
    for arch in [Arch::I386, Arch::X86_64] {
        let h = header(arch);
        let mut out = Vec::new();
        h.encode_version(VERSION_2, &mut out);
        let code = [0x55, 0x89, 0xe5, 0x83, 0xec, 0x08];
        let rec = CodeBytes {
            vcpu: 1,
            page_table_base: 0x0011_0000,
            vaddr: 0x0400_0210,
            bytes: &code,
        };
        rec.encode(&mut out, h.ptr_width());
        encode_sample_v2(&mut out, h.ptr_width(), &sample(&FRAMES), &extras());
        let mut r = RawReader::new(&out[..]).unwrap();
        match r.next_record().unwrap() {
            Some(Record::CodeBytes(c)) => assert_eq!(c, rec),
            other => panic!("expected code bytes, got {other:?}"),
        }
        assert!(matches!(r.next_record().unwrap(), Some(Record::Sample(_))));
        let sum = RawSummary::read(&mut RawReader::new(&out[..]).unwrap()).unwrap();
        assert_eq!(
            (sum.code_bytes, sum.samples, sum.unknown_records),
            (1, 1, 0)
        );
    }
}

#[test]
fn bad_code_bytes_records_are_named() {
    let h = header(Arch::I386);
    let mut out = Vec::new();
    h.encode_version(VERSION_2, &mut out);
    let at = out.len() as u64;
    let code = CodeBytes {
        vcpu: 0,
        page_table_base: 1,
        vaddr: 2,
        bytes: &[1, 2, 3],
    };
    code.encode(&mut out, 4);
    // n says 4 bytes follow, the record holds 3.
    let n_at = out.len() - 3 - 2;
    out[n_at] = 4;
    match RawReader::new(&out[..]).unwrap().next_record() {
        Err(FormatError::Corrupt { offset, what }) => {
            assert_eq!(offset, at);
            assert!(what.contains("code-bytes"), "{what}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // Cut inside the record: everything before it, and where it was cut.
    let mut cut = Vec::new();
    h.encode_version(VERSION_2, &mut cut);
    let keep = cut.len();
    code.encode(&mut cut, 4);
    cut.truncate(keep + 9);
    let mut r = RawReader::new(&cut[..]).unwrap();
    assert!(r.next_record().unwrap().is_none());
    assert!(r.truncation().is_some());
}
