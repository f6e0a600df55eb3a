//! Version 4's stack table (`stacks=on`): a recording compacted by the writer reads as the
//! same samples, record by record; cut anywhere it keeps the samples before the cut; a
//! reference past the table, a stack defined out of order and a run that lies about its
//! length are errors naming the record's offset, after everything before them was read.

use kern_profile_format::stack_table::Compactor;
use kern_profile_format::*;
use kern_profile_test_support::raw_file::raw_header;

/// What a sample is to a reader, but SP (which references do not carry) and its stack id.
type Seen = (
    u32,
    u8,
    u8,
    u64,
    u64,
    u64,
    Option<u64>,
    Option<u64>,
    Vec<u64>,
    u8,
    u8,
    Option<u64>,
);

fn seen(s: &SampleRef<'_>) -> Seen {
    // Where the recorder resolved entries, readers ignore the word at [SP]: so does the
    // table, which drops it.
    let unused = match s.entry_resolved() {
        true => sample_flags::SP_WORD_VALID,
        false => 0,
    };
    (
        s.vcpu,
        s.flags & !unused,
        s.stop,
        s.time_ns,
        s.icount,
        s.pc,
        s.sp_word().filter(|_| !s.entry_resolved()),
        s.return_register(),
        s.frames().collect(),
        s.mode() as u8,
        s.privilege() as u8,
        s.page_table_base(),
    )
}

/// The first sample that differs, if any (the lists are long).
fn same(got: &[Seen], want: &[Seen], what: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!("{what}: sample {i}: {:?}, want {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}");
}

/// Records of a recording: samples of two vCPUs over a few stacks, entries resolved and
/// not, words at [SP] that vary, a task record and a statistics record among them.
fn records(arch: Arch, n: u64) -> (Header, Vec<u8>) {
    let h = raw_header(arch, SamplingMode::PeriodInstructions(1000), 2);
    let w = h.ptr_width();
    let mut out = Vec::new();
    for i in 0..n {
        let frames = [0x8100_2000 + i % 5, 0x8100_3000, 0x8100_4000 + (i % 3) * 16];
        let s = SampleRecord {
            vcpu: (i / 7 % 2) as u32,
            user: i % 11 == 0,
            stop: StopReason::NullFramePointer.into(),
            time_ns: 1_000 * i + (i % 3) * 7,
            icount: 1000 * (i / 2),
            pc: 0x8100_1000 + i % 13,
            sp: 0x9000 - i,
            sp_word: (i % 4 != 0).then_some(0x1234_0000 + i),
            frames: &frames[..1 + (i % 3) as usize],
            entry_resolved: i % 5 == 0,
        };
        let x = SampleExtras {
            mode: CpuMode::Paging,
            privilege: if s.user {
                Privilege::User
            } else {
                Privilege::Kernel
            },
            return_register: (i % 6 == 0).then_some(0x8100_5000),
            page_table_base: Some(0x1000 * (i % 2)),
        };
        encode_sample_v2(&mut out, w, &s, &x);
        if i == n / 2 {
            Stats::default().encode(&mut out);
        }
    }
    (h, out)
}

fn file(h: &Header, version: u16, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    h.encode_version(version, &mut out);
    out.extend_from_slice(body);
    out
}

/// Compacted as the writer does, in batches of `batch` records' bytes cut at records.
fn compacted(h: &Header, body: &[u8], batch: usize) -> Vec<u8> {
    let mut c = Compactor::new(h.ptr_width());
    let mut out = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < body.len() {
        let len = u32::from_le_bytes(body[at + 1..at + 5].try_into().unwrap()) as usize;
        at += 5 + len;
        if at - start >= batch || at == body.len() {
            c.compact(&body[start..at], &mut out);
            start = at;
        }
    }
    file(h, VERSION_4, &out)
}

/// Every sample read, and whether the reader met a statistics record, a torn record, or an
/// error (with its offset).
fn read_all(bytes: &[u8]) -> (Vec<Seen>, bool, Option<Truncation>, Option<FormatError>) {
    let mut r = RawReader::new(bytes).unwrap();
    let (mut samples, mut stats) = (Vec::new(), false);
    loop {
        match r.next_record() {
            Ok(Some(Record::Sample(s))) => samples.push(seen(&s)),
            Ok(Some(Record::Stats(_))) => stats = true,
            Ok(Some(_)) => {}
            Ok(None) => return (samples, stats, r.truncation(), None),
            Err(e) => return (samples, stats, r.truncation(), Some(e)),
        }
    }
}

#[test]
fn a_compacted_file_reads_as_the_plain_one() {
    for arch in [Arch::I386, Arch::X86_64] {
        let (h, body) = records(arch, 5000);
        let plain = read_all(&file(&h, VERSION_2, &body));
        for batch in [1, 700, 60 << 10] {
            let small = compacted(&h, &body, batch);
            let got = read_all(&small);
            same(&got.0, &plain.0, &format!("{arch:?}, batches of {batch}"));
            assert!(got.1 && got.2.is_none() && got.3.is_none());
            if batch > 1 {
                assert!(
                    small.len() * 2 < body.len(),
                    "{} of {}",
                    small.len(),
                    body.len()
                );
            }
        }
        // Stacks are told apart by all but the sample's own fields.
        let whole = compacted(&h, &body, 1 << 20);
        let r = &mut RawReader::new(&whole[..]).unwrap();
        let mut ids = std::collections::HashMap::new();
        while let Some(rec) = r.next_record().unwrap() {
            if let Record::Sample(s) = rec {
                let mut k = seen(&s);
                (k.0, k.3, k.4, k.6) = (0, 0, 0, None);
                let prev = ids.insert(s.stack.unwrap(), k.clone());
                assert!(prev.is_none_or(|p| p == k));
            }
        }
        // ... and each is defined once.
        let distinct: std::collections::HashSet<_> = ids.values().collect();
        assert_eq!(r.stacks().len(), distinct.len());
        assert!(distinct.len() < 1000, "{} stacks", distinct.len());
    }
}

#[test]
fn a_cut_file_keeps_the_samples_before_the_cut() {
    let (h, body) = records(Arch::X86_64, 600);
    let plain = read_all(&file(&h, VERSION_2, &body)).0;
    let whole = compacted(&h, &body, 900);
    let mut longest = 0;
    for cut in (60..whole.len()).step_by(97) {
        let (got, _, _, err) = read_all(&whole[..cut]);
        assert!(err.is_none(), "cut at {cut}: {err:?}");
        same(&got, &plain[..got.len()], &format!("cut at {cut}"));
        assert!(
            got.len() >= longest,
            "cut at {cut}: fewer samples than a shorter cut"
        );
        longest = got.len();
    }
    assert!(longest > 500, "{longest}");
}

/// A record's bytes at `at` with `f` applied to its payload, its length fixed.
fn edit(bytes: &[u8], at: usize, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    let mut payload = bytes[at + 5..at + 5 + len].to_vec();
    f(&mut payload);
    let mut out = bytes[..at + 1].to_vec();
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&payload);
    out.extend_from_slice(&bytes[at + 5 + len..]);
    out
}

/// Offsets of the records of `kind` in a file whose header is `header_len` bytes.
fn offsets(bytes: &[u8], header_len: usize, kind: u8) -> Vec<usize> {
    let mut at = header_len;
    let mut found = Vec::new();
    while at + 5 <= bytes.len() {
        if bytes[at] == kind {
            found.push(at);
        }
        at += 5 + u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
    }
    found
}

#[test]
fn lies_are_errors_naming_the_offset() {
    let (h, body) = records(Arch::X86_64, 300);
    let good = compacted(&h, &body, 400);
    let header_len = RawReader::new(&good[..]).unwrap().record_offset() as usize;
    let runs = offsets(&good, header_len, kind::SAMPLE_RUN);
    let stacks = offsets(&good, header_len, kind::STACK);
    let before = read_all(&good[..runs[1]]).0.len();
    // The second run names a stack past the table.
    let bad = edit(&good, runs[1], |p| {
        p.truncate(8);
        p[4..8].copy_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&[0xff, 0x7f, 0, 0]);
    });
    let (got, _, _, err) = read_all(&bad);
    assert_eq!(got.len(), before, "the samples before are kept");
    let msg = err.unwrap().to_string();
    assert!(msg.contains(&format!("offset {}", runs[1])), "{msg}");
    assert!(msg.contains("names stack 16383, past the table's"), "{msg}");
    // A run that says it holds more references than it does.
    let bad = edit(&good, runs[1], |p| {
        p[4..8].copy_from_slice(&100_000u32.to_le_bytes())
    });
    let msg = read_all(&bad).3.unwrap().to_string();
    assert!(msg.contains("cannot hold 100000 references"), "{msg}");
    // ... or fewer than it does, or one whose last reference runs past its end: the
    // references before the bad one are read.
    let count = |at: usize| u32::from_le_bytes(good[at + 9..at + 13].try_into().unwrap());
    let long = *runs[1..].iter().max_by_key(|&&at| count(at)).unwrap();
    let (n, before) = (count(long), read_all(&good[..long]).0.len());
    assert!(n > 2, "{n}");
    let bad = edit(&good, long, |p| {
        p[4..8].copy_from_slice(&(n - 1).to_le_bytes())
    });
    let (got, _, _, err) = read_all(&bad);
    let msg = err.unwrap().to_string();
    assert!(msg.contains("bytes after its"), "{msg}");
    // The record is found malformed at what it says is its last reference.
    assert_eq!(got.len(), before + n as usize - 2);
    let bad = edit(&good, long, |p| {
        p.pop();
    });
    let (got, _, _, err) = read_all(&bad);
    let msg = err.unwrap().to_string();
    assert!(msg.contains("runs past the record"), "{msg}");
    assert_eq!(got.len(), before + n as usize - 1);
    // A stack defined out of order.
    let bad = edit(&good, stacks[1], |p| {
        p[0..4].copy_from_slice(&7u32.to_le_bytes())
    });
    let msg = read_all(&bad).3.unwrap().to_string();
    assert!(
        msg.contains("defines stack 7, and the next one is 1"),
        "{msg}"
    );
    assert!(msg.contains(&format!("offset {}", stacks[1])), "{msg}");
}

/// A reader of version 3 is not this crate's question; this one reads versions 1 to 4, and
/// kinds 11 and 12 are only the table's in version 4.
#[test]
fn table_kinds_are_unknown_before_version_4() {
    let (h, body) = records(Arch::I386, 50);
    let v4 = compacted(&h, &body, 1 << 20);
    let header_len = RawReader::new(&v4[..]).unwrap().record_offset() as usize;
    let as_v3 = file(&h, VERSION_3, &v4[header_len..]);
    let mut r = RawReader::new(&as_v3[..]).unwrap();
    let mut unknown = 0;
    while let Some(rec) = r.next_record().unwrap() {
        assert!(!matches!(rec, Record::Sample(_)));
        unknown += matches!(rec, Record::Unknown { .. }) as u32;
    }
    assert!(unknown > 1);
}
