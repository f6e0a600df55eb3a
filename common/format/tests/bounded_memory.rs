//! The heap a reader uses is bounded by the bytes really there, whatever a length field
//! claims (the limits of FORMAT.md): a few bytes never become a 64 MiB buffer.

use std::sync::Mutex;

use kern_profile_format::memtrace::MemtraceReader;
use kern_profile_format::*;
use kern_profile_test_support::raw_file;
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// Tests run on threads of one process and the meter is global: one test at a time, whole
/// (another test's allocations would count in a measurement).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held for a whole test.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of heap `f` used at its peak, above what was live when it started.
fn peak_heap(f: impl FnOnce()) -> usize {
    let base = HEAP.current_usage();
    HEAP.reset_peak_usage();
    f();
    HEAP.peak_usage().saturating_sub(base)
}

/// The reader's own 1 MiB buffer plus room for small tables.
const FIXED: usize = 3 << 20;

fn raw_header() -> Vec<u8> {
    let mut out = Vec::new();
    raw_file::raw_header(Arch::I386, SamplingMode::PeriodInstructions(10_000), 1).encode(&mut out);
    out
}

#[test]
fn a_record_length_is_checked_against_the_bytes_there_before_any_buffer_grows() {
    let _serial = serial();
    // A sample record whose length field claims 60 MiB, in a file of a few dozen bytes.
    let mut bytes = raw_header();
    bytes.push(kind::SAMPLE);
    bytes.extend_from_slice(&(60u32 << 20).to_le_bytes());
    bytes.extend_from_slice(&[0xaa; 16]);
    let peak = peak_heap(|| {
        let mut r = RawReader::new(&bytes[..]).unwrap();
        assert!(r.next_record().unwrap().is_none());
        let t = r.truncation().expect("a torn record");
        assert_eq!((t.available, t.needed), (21, 5 + (60 << 20)));
    });
    assert!(
        peak < FIXED,
        "{peak} bytes of heap for a {}-byte file",
        bytes.len()
    );
}

#[test]
fn a_long_record_that_is_there_is_still_read() {
    let _serial = serial();
    // Exact counts of 200k one-instruction blocks in one 2.8 MB record, past the first
    // buffer (the plugin writes 4096 blocks a record; the format allows more).
    const BLOCKS: u32 = 200_000;
    let mut body = BLOCKS.to_le_bytes().to_vec();
    for i in 0..BLOCKS {
        body.extend_from_slice(&u64::from(i).to_le_bytes());
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&(0x1000 + i).to_le_bytes());
    }
    let mut bytes = raw_header();
    bytes.push(kind::EXACT_BLOCKS);
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&body);
    let mut r = RawReader::new(&bytes[..]).unwrap();
    match r.next_record().unwrap() {
        Some(Record::ExactBlocks(b)) => assert_eq!(b.len(), BLOCKS as usize),
        other => panic!("expected exact counts, got {other:?}"),
    }
    assert!(r.next_record().unwrap().is_none() && r.truncation().is_none());
}

#[test]
fn legacy_and_memtrace_lengths_stay_small() {
    let _serial = serial();
    // Both formats' length fields are one byte: a record is at most a few kilobytes.
    let ff = [0xffu8; 64];
    let peak = peak_heap(|| {
        let mut r = LegacyReader::new(&ff[..]);
        assert!(r.next_sample().unwrap().is_none());
        let mut m = MemtraceReader::new(&ff[..], true);
        while m.next_record().unwrap().is_some() {}
    });
    assert!(peak < FIXED, "{peak} bytes of heap for 64 bytes");
}
