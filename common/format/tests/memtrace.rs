//! The memtrace reader on traces built with `encode_record`: exact bytes, offsets, strict and
//! lenient handling of a bad op byte, truncation at every possible cut, tiny reads.

use std::io::Read;

use kern_profile_format::memtrace::{encode_record, MemtraceReader, Op, Skip};
use kern_profile_format::{FormatError, Truncation};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    offset: u64,
    allocator: Vec<u8>,
    op: Op,
    ptr: u64,
    size: u64,
    frames: Vec<u64>,
}

fn read_all<R: Read>(r: &mut MemtraceReader<R>) -> Result<Vec<Rec>, FormatError> {
    let mut out = Vec::new();
    while let Some(rec) = r.next_record()? {
        out.push(Rec {
            offset: rec.offset,
            allocator: rec.allocator.to_vec(),
            op: rec.op,
            ptr: rec.ptr,
            size: rec.size,
            frames: rec.frames().collect(),
        });
    }
    Ok(out)
}

/// Three records of two allocators, and the offset each starts at.
fn sample() -> (Vec<u8>, Vec<u64>) {
    let mut b = Vec::new();
    let mut offsets = Vec::new();
    offsets.push(b.len() as u64);
    encode_record(
        &mut b,
        b"malloc",
        Op::Alloc,
        0x1000,
        32,
        &[0xc010_0000, 0xc020_0000],
    );
    offsets.push(b.len() as u64);
    encode_record(&mut b, b"buddy", Op::Realloc, 0x2000, 4, &[]);
    offsets.push(b.len() as u64);
    encode_record(&mut b, b"malloc", Op::Free, 0x1000, 0, &[0xc030_0000]);
    (b, offsets)
}

/// A reader that hands out at most one byte per `read`.
struct OneByte<'a>(&'a [u8]);

impl Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0.is_empty() || buf.is_empty() {
            return Ok(0);
        }
        buf[0] = self.0[0];
        self.0 = &self.0[1..];
        Ok(1)
    }
}

#[test]
fn encode_record_writes_the_documented_layout() {
    let mut b = Vec::new();
    encode_record(&mut b, b"ab", Op::Realloc, 0x0102, 0x0304, &[0x0506]);
    let mut want = vec![2, b'a', b'b', 1];
    want.extend_from_slice(&0x0102u64.to_le_bytes());
    want.extend_from_slice(&0x0304u64.to_le_bytes());
    want.push(1);
    want.extend_from_slice(&0x0506u64.to_le_bytes());
    assert_eq!(b, want);
    assert_eq!(b.len(), 1 + 2 + 1 + 8 + 8 + 1 + 8);
}

#[test]
fn encode_record_caps_both_lengths_at_255() {
    let mut b = Vec::new();
    let name = vec![b'x'; 300];
    let frames: Vec<u64> = (0..300).collect();
    encode_record(&mut b, &name, Op::Alloc, 1, 2, &frames);
    assert_eq!(b.len(), 1 + 255 + 1 + 16 + 1 + 255 * 8);
    let mut r = MemtraceReader::new(&b[..], false);
    let recs = read_all(&mut r).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].allocator.len(), 255);
    assert_eq!(recs[0].frames, (0..255).collect::<Vec<u64>>());
}

#[test]
fn reads_back_every_field_and_offset() {
    let (b, offsets) = sample();
    let mut r = MemtraceReader::new(&b[..], false);
    let recs = read_all(&mut r).unwrap();
    assert_eq!(
        recs,
        vec![
            Rec {
                offset: offsets[0],
                allocator: b"malloc".to_vec(),
                op: Op::Alloc,
                ptr: 0x1000,
                size: 32,
                frames: vec![0xc010_0000, 0xc020_0000],
            },
            Rec {
                offset: offsets[1],
                allocator: b"buddy".to_vec(),
                op: Op::Realloc,
                ptr: 0x2000,
                size: 4,
                frames: vec![],
            },
            Rec {
                offset: offsets[2],
                allocator: b"malloc".to_vec(),
                op: Op::Free,
                ptr: 0x1000,
                size: 0,
                frames: vec![0xc030_0000],
            },
        ]
    );
    assert_eq!(offsets, vec![0, 41, 65]);
    assert_eq!(r.truncation(), None);
    assert!(r.skips().is_empty());
    assert_eq!(r.offset(), b.len() as u64);
}

#[test]
fn one_byte_reads_give_the_same_records() {
    let (b, _) = sample();
    let whole = read_all(&mut MemtraceReader::new(&b[..], false)).unwrap();
    let mut r = MemtraceReader::new(OneByte(&b), false);
    assert_eq!(read_all(&mut r).unwrap(), whole);
    assert_eq!(r.truncation(), None);
}

#[test]
fn empty_input_has_no_record_and_no_truncation() {
    let mut r = MemtraceReader::new(&[][..], false);
    assert!(read_all(&mut r).unwrap().is_empty());
    assert_eq!(r.truncation(), None);
}

#[test]
fn truncation_at_every_cut_keeps_all_complete_records() {
    let (b, offsets) = sample();
    let last = offsets[2] as usize;
    // The last record: 1 + 6 (name) + 18, then 1 frame.
    for cut in last + 1..b.len() {
        let mut r = MemtraceReader::new(&b[..cut], false);
        let recs = read_all(&mut r).unwrap();
        assert_eq!(recs.len(), 2, "cut at {cut}");
        let needed = if cut - last < 1 + 6 + 18 { 25 } else { 33 };
        assert_eq!(
            r.truncation(),
            Some(Truncation {
                offset: last as u64,
                available: cut - last,
                needed,
            }),
            "cut at {cut}"
        );
        // Once truncated, the reader stays at the end.
        assert!(r.next_record().unwrap().is_none());
    }
    // A cut exactly between records is not a truncation.
    let mut r = MemtraceReader::new(&b[..last], false);
    assert_eq!(read_all(&mut r).unwrap().len(), 2);
    assert_eq!(r.truncation(), None);
}

#[test]
fn strict_bad_op_is_an_error_naming_the_offsets() {
    let (mut b, offsets) = sample();
    // The op byte of the second record ("buddy": 1 + 5 bytes before it).
    let op_at = offsets[1] as usize + 6;
    b[op_at] = 7;
    let mut r = MemtraceReader::new(&b[..], false);
    assert!(r.next_record().unwrap().is_some());
    match r.next_record() {
        Err(FormatError::Corrupt { offset, what }) => {
            assert_eq!(offset, offsets[1]);
            assert!(what.contains(&format!("byte offset {op_at}")), "{what}");
            assert!(what.contains("op byte 7"), "{what}");
        }
        other => panic!("expected a corrupt-record error, got {other:?}"),
    }
}

#[test]
fn lenient_bad_op_skips_to_the_next_record() {
    let (mut b, offsets) = sample();
    b[offsets[1] as usize + 6] = 0xff;
    let mut r = MemtraceReader::new(&b[..], true);
    let recs = read_all(&mut r).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].offset, offsets[0]);
    assert_eq!(recs[1].offset, offsets[2]);
    assert_eq!(recs[1].ptr, 0x1000);
    assert_eq!(
        r.skips(),
        &[Skip {
            offset: offsets[1],
            bytes: offsets[2] - offsets[1],
        }]
    );
    assert_eq!(r.truncation(), None);
}

#[test]
fn lenient_garbage_at_the_end_is_one_skip() {
    let (mut b, _) = sample();
    let end = b.len() as u64;
    // nlen 3, "abc", op 9, then too few bytes for anything plausible.
    b.extend_from_slice(&[
        3, b'a', b'b', b'c', 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    b.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let mut r = MemtraceReader::new(&b[..], true);
    assert_eq!(read_all(&mut r).unwrap().len(), 3);
    assert_eq!(
        r.skips(),
        &[Skip {
            offset: end,
            bytes: b.len() as u64 - end,
        }]
    );
}

#[test]
fn records_spanning_the_read_buffer_boundary() {
    // More than the reader's 1 MiB buffer, with records of varying length so that some
    // straddle the refill point.
    let mut b = Vec::new();
    let mut offsets = Vec::new();
    let mut i = 0u64;
    while b.len() < 3 << 20 {
        offsets.push(b.len() as u64);
        let frames: Vec<u64> = (0..i % 13).map(|k| 0xc000_0000 + k).collect();
        encode_record(&mut b, b"malloc", Op::Alloc, i, i * 3, &frames);
        i += 1;
    }
    let mut r = MemtraceReader::new(&b[..], false);
    let mut n = 0usize;
    while let Some(rec) = r.next_record().unwrap() {
        assert_eq!(rec.offset, offsets[n]);
        assert_eq!(rec.ptr, n as u64);
        assert_eq!(rec.size, 3 * n as u64);
        assert_eq!(rec.frames().len() as u64, n as u64 % 13);
        n += 1;
    }
    assert_eq!(n, offsets.len());
    assert_eq!(r.truncation(), None);
}

#[test]
fn zeros_are_no_trace() {
    // /dev/zero or a zeroed file: strict stops at the first byte...
    let zeros = vec![0u8; 4096];
    let mut r = MemtraceReader::new(&zeros[..], false);
    match r.next_record() {
        Err(FormatError::Corrupt { offset, what }) => {
            assert_eq!(offset, 0);
            assert!(what.contains("without an allocator name"), "{what}");
        }
        other => panic!("expected a corrupt-record error, got {other:?}"),
    }
    // ...and lenient skips them all as one region, finding no record.
    let mut r = MemtraceReader::new(&zeros[..], true);
    assert!(read_all(&mut r).unwrap().is_empty());
    assert_eq!(
        r.skips(),
        &[Skip {
            offset: 0,
            bytes: 4096
        }]
    );
}

#[test]
fn nameless_records_are_skipped_by_the_lenient_reader() {
    let (mut b, offsets) = sample();
    let mut nameless = Vec::new();
    encode_record(&mut nameless, b"", Op::Alloc, 0x3000, 8, &[]);
    let at = offsets[1] as usize;
    b.splice(at..at, nameless.iter().copied());
    let mut r = MemtraceReader::new(&b[..], true);
    let recs = read_all(&mut r).unwrap();
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| !r.allocator.is_empty()));
    assert_eq!(
        r.skips(),
        &[Skip {
            offset: offsets[1],
            bytes: nameless.len() as u64
        }]
    );
}
