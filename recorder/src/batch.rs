//! A vCPU's buffer of encoded samples, handed to the writer when it is full or old enough.

use kern_profile_format::{encode_sample, SampleRecord};

use crate::writer::Batch;

/// Hand the batch over when it holds this many bytes.
pub const BATCH_BYTES: usize = 60 << 10;
/// ... or when its first sample is this old (host ns),
pub const MAX_AGE_NS: u64 = 100_000_000;
/// ... or when samples come slower than this (host ns apart): no point in waiting then.
pub const SLOW_NS: u64 = 50_000_000;

/// Encoded samples of one vCPU.
#[derive(Debug, Default)]
pub struct SampleBuffer {
    batch: Batch,
    first_ns: u64,
    last_ns: Option<u64>,
}

impl SampleBuffer {
    pub fn new(buf: Vec<u8>) -> Self {
        SampleBuffer {
            batch: Batch {
                bytes: buf,
                samples: 0,
            },
            first_ns: 0,
            last_ns: None,
        }
    }

    /// Encodes a sample; returns whether the batch should be handed over now.
    pub fn push(&mut self, ptr_width: usize, s: &SampleRecord<'_>) -> bool {
        let now = s.time_ns;
        if self.batch.samples == 0 {
            self.first_ns = now;
        }
        encode_sample(&mut self.batch.bytes, ptr_width, s);
        self.batch.samples += 1;
        let slow = self
            .last_ns
            .is_some_and(|last| now.saturating_sub(last) >= SLOW_NS);
        self.last_ns = Some(now);
        self.batch.bytes.len() >= BATCH_BYTES
            || now.saturating_sub(self.first_ns) >= MAX_AGE_NS
            || slow
    }

    pub fn is_empty(&self) -> bool {
        self.batch.samples == 0
    }

    pub fn samples(&self) -> u64 {
        self.batch.samples
    }

    /// Takes the batch out, leaving `fresh` (an empty buffer) in its place.
    pub fn take(&mut self, fresh: Vec<u8>) -> Batch {
        std::mem::replace(
            &mut self.batch,
            Batch {
                bytes: fresh,
                samples: 0,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{Arch, Header, RawReader, Record, SamplingMode, StopReason};

    fn rec(t: u64, frames: &[u64]) -> SampleRecord<'_> {
        SampleRecord {
            vcpu: 1,
            user: false,
            stop: StopReason::NullFramePointer,
            time_ns: t,
            icount: t * 3,
            pc: 0xc000_1000,
            sp: 0x9000,
            sp_word: Some(0xc000_2000),
            frames,
            entry_resolved: true,
        }
    }

    #[test]
    fn hands_over_when_full() {
        let mut b = SampleBuffer::new(Vec::new());
        let frames = [0xc000_0000u64; 64];
        let mut n = 0;
        while !b.push(4, &rec(n, &frames)) {
            n += 1;
        }
        assert!(b.batch.bytes.len() >= BATCH_BYTES);
        let batch = b.take(Vec::new());
        assert_eq!(batch.samples, n + 1);
        assert!(b.is_empty());
        // The bytes are valid records.
        let mut file = Vec::new();
        Header {
            arch: Arch::I386,
            sampling: SamplingMode::PeriodInstructions(1),
            exact: false,
            markers: false,
            vcpus: 1,
            max_depth: 64,
            start_unix_ns: 0,
            qemu_version: "10.0.2".into(),
        }
        .encode(&mut file);
        file.extend_from_slice(&batch.bytes);
        let mut r = RawReader::new(&file[..]).unwrap();
        let mut count = 0;
        while let Some(Record::Sample(s)) = r.next_record().unwrap() {
            assert_eq!(s.frame_count(), 64);
            assert_eq!(s.icount, s.time_ns * 3);
            count += 1;
        }
        assert_eq!(count, n + 1);
    }

    #[test]
    fn hands_over_when_old_or_slow() {
        let mut b = SampleBuffer::new(Vec::new());
        assert!(!b.push(8, &rec(1_000, &[])));
        assert!(!b.push(8, &rec(2_000, &[])));
        assert!(b.push(8, &rec(1_000 + MAX_AGE_NS, &[])));
        b.take(Vec::new());
        // Slow sampling: every sample goes out at once.
        let mut b = SampleBuffer::new(Vec::new());
        assert!(!b.push(8, &rec(0, &[])));
        assert!(b.push(8, &rec(SLOW_NS, &[])));
        assert_eq!(b.samples(), 2);
        b.take(Vec::new());
        assert!(b.push(8, &rec(2 * SLOW_NS, &[])));
    }
}
