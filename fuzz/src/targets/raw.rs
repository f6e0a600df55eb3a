//! The raw format: `RawReader` over any bytes, every record read and looked into; a
//! compressed recording (zstd's magic first) through `RawReader::open`.

use std::hint::black_box;

use crate::{bounded, bounded_by, Trickle, FIXED_BUDGET};
use kern_profile_format::compressed::{WINDOW_LOG_MAX, ZSTD_MAGIC};
use kern_profile_format::{RawReader, Record};

/// The heap a compressed input may take whatever its length: its window, a record of the
/// largest size the reader accepts (64 MiB), and the fixed budget.
const COMPRESSED_BUDGET: usize = FIXED_BUDGET + (1 << WINDOW_LOG_MAX) + (64 << 20) * 2;

/// One input through the target.
pub fn run(data: &[u8]) {
    match data.starts_with(&ZSTD_MAGIC) {
        true => bounded_by(COMPRESSED_BUDGET, data.len(), || read_all(data)),
        false => bounded(data.len(), || read_all(data)),
    }
}

fn read_all(data: &[u8]) {
    let Ok(mut r) = RawReader::open(Trickle::new(data)) else {
        return;
    };
    black_box(r.header().ptr_width());
    // Offsets are the raw bytes', which a compressed input holds more of.
    let end = match data.starts_with(&ZSTD_MAGIC) {
        true => u64::MAX,
        false => data.len() as u64,
    };
    while let Ok(Some(rec)) = r.next_record() {
        match rec {
            Record::Sample(s) => {
                black_box((s.stop_reason(), s.sp_word(), s.user(), s.entry_resolved()));
                assert_eq!(s.frames().count(), s.frame_count());
                black_box(s.frames().fold(s.pc, u64::wrapping_add));
            }
            Record::ExactBlocks(b) => {
                let mut n = 0;
                for block in b.iter() {
                    black_box(
                        block
                            .instructions()
                            .fold(block.executions, u64::wrapping_add),
                    );
                    n += 1;
                }
                assert_eq!(n, b.len());
            }
            other => {
                black_box(format!("{other:?}"));
            }
        }
        assert!(r.record_offset() < r.offset() && r.offset() <= end);
    }
    if let Some(t) = r.truncation() {
        assert!(t.offset <= end && t.available < t.needed);
        black_box(t.to_string());
    }
}
