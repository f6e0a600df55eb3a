//! Maestro's memtrace: `MemtraceReader` over any bytes, strict and lenient.

use std::hint::black_box;

use crate::{bounded, Trickle};
use kern_profile_format::memtrace::MemtraceReader;

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || {
        read_all(data, false);
        read_all(data, true);
    });
}

fn read_all(data: &[u8], lenient: bool) {
    let mut r = MemtraceReader::new(Trickle::new(data), lenient);
    let end = data.len() as u64;
    loop {
        let rec = match r.next_record() {
            Ok(Some(rec)) => rec,
            Ok(None) => break,
            Err(e) => {
                assert!(!lenient, "the lenient reader failed: {e}");
                black_box(e.to_string());
                break;
            }
        };
        black_box((rec.allocator_name(), rec.op, rec.ptr, rec.size));
        black_box(rec.frames().fold(0, u64::wrapping_add));
        assert!(rec.offset < end);
    }
    assert!(r.offset() <= end);
    for s in r.skips() {
        assert!(s.bytes > 0 && s.offset + s.bytes <= end);
    }
    if let Some(t) = r.truncation() {
        black_box(t.to_string());
    }
}
