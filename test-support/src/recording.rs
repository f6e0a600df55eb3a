//! Whole i386 recordings (the plugin's raw files) built sample by sample: a header, samples
//! on a clock, then the records that end a run.

use kern_profile_format::{encode_exact_blocks, encode_sample, encode_stats, Header, SampleRecord};

use crate::raw::sample;

/// The width of an address in bytes: the recordings are i386 ones.
const PTR_WIDTH: usize = 4;

/// A recording under construction. Its clock starts at 0 and moves 1 µs on for each sample
/// [`Recording::sample`] and [`Recording::user_sample`] add, so that samples come in order.
pub struct Recording {
    pub bytes: Vec<u8>,
    t: u64,
}

impl Recording {
    /// A recording that starts with `header`.
    pub fn new(header: &Header) -> Self {
        let mut bytes = Vec::new();
        header.encode(&mut bytes);
        Self { bytes, t: 0 }
    }

    /// Moves the clock 1 µs on: the time of the next sample.
    pub fn tick(&mut self) -> u64 {
        self.t += 1000;
        self.t
    }

    /// The clock: the time of the last sample on it.
    pub fn time(&self) -> u64 {
        self.t
    }

    /// Appends `s` as it is, whatever its time.
    pub fn record(&mut self, s: &SampleRecord<'_>) -> &mut Self {
        encode_sample(&mut self.bytes, PTR_WIDTH, s);
        self
    }

    /// A kernel-mode sample of vCPU `vcpu` at `pc`, its walk `frames`, at the next tick.
    pub fn sample(&mut self, vcpu: u32, pc: u64, frames: &[u64]) -> &mut Self {
        let t = self.tick();
        self.record(&sample(vcpu, t, pc, frames))
    }

    /// A user-mode sample of vCPU `vcpu` at `pc`, its walk `frames`, at the next tick.
    pub fn user_sample(&mut self, vcpu: u32, pc: u64, frames: &[u64]) -> &mut Self {
        let t = self.tick();
        self.record(&SampleRecord {
            user: true,
            ..sample(vcpu, t, pc, frames)
        })
    }

    /// Exact counts: each block's executions and its instructions' addresses.
    pub fn exact_blocks(&mut self, blocks: &[(u64, Vec<u64>)]) -> &mut Self {
        let blocks = blocks.iter().map(|(n, pcs)| (*n, pcs.as_slice()));
        encode_exact_blocks(&mut self.bytes, PTR_WIDTH, blocks);
        self
    }

    /// The statistics record: `samples` written, `dropped`, the unwind `stops` by reason and
    /// each vCPU's instructions.
    pub fn stats(&mut self, samples: u64, dropped: u64, stops: &[u64], vcpu_insns: &[u64]) {
        encode_stats(&mut self.bytes, samples, dropped, stops, vcpu_insns);
    }
}
