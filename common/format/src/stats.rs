//! The statistics record the plugin writes at exit.

use crate::error::FormatError;
use crate::raw_reader::corrupt;
use crate::raw_writer::encode_stats;
use crate::source::{u32_at, u64_at};
use crate::stop_reason::StopCounts;

/// The statistics the plugin writes at exit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stats {
    pub samples: u64,
    pub dropped: u64,
    /// Unwind stops of every sample taken, written or dropped.
    pub stops: StopCounts,
    /// Instructions executed, per vCPU.
    pub vcpu_instructions: Vec<u64>,
}

impl Stats {
    /// Appends the statistics record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_stats(
            out,
            self.samples,
            self.dropped,
            &self.stops,
            &self.vcpu_instructions,
        );
    }

    /// Decodes a statistics record's payload; `offset` is the record's, for errors.
    pub(crate) fn decode(b: &[u8], offset: u64) -> Result<Stats, FormatError> {
        let short = || corrupt(offset, "statistics record too short".into());
        if b.len() < 17 {
            return Err(short());
        }
        let r = b[16] as usize;
        let after_stops = 17 + 8 * r;
        if b.len() < after_stops + 4 {
            return Err(short());
        }
        let v = u32_at(b, after_stops) as usize;
        if b.len() != after_stops + 4 + 8 * v {
            return Err(corrupt(
                offset,
                "statistics record has the wrong length".into(),
            ));
        }
        Ok(Stats {
            samples: u64_at(b, 0),
            dropped: u64_at(b, 8),
            stops: StopCounts::from_counts((0..r).map(|i| u64_at(b, 17 + 8 * i)).collect()),
            vcpu_instructions: (0..v).map(|i| u64_at(b, after_stops + 4 + 8 * i)).collect(),
        })
    }
}
