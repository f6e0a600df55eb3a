//! The raw format: `RawReader` over any bytes, every record read and looked into.

use std::hint::black_box;

use crate::{bounded, Trickle};
use kern_profile_format::{RawReader, Record};

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || read_all(data));
}

fn read_all(data: &[u8]) {
    let Ok(mut r) = RawReader::new(Trickle::new(data)) else {
        return;
    };
    black_box(r.header().ptr_width());
    let end = data.len() as u64;
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
