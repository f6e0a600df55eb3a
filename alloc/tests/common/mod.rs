//! Builds memtrace traces from real bytes with the format crate's encoder.

#![allow(dead_code)]

use std::collections::HashMap;

use kern_profile_alloc::{analyze, AllocatorProfile, Analysis, Options, View};
use kern_profile_format::memtrace::{encode_record, Op};

/// A trace under construction; remembers where each record starts.
#[derive(Default)]
pub struct Trace {
    pub bytes: Vec<u8>,
    pub offsets: Vec<u64>,
}

impl Trace {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn op(
        &mut self,
        allocator: &str,
        op: Op,
        ptr: u64,
        size: u64,
        frames: &[u64],
    ) -> &mut Self {
        self.offsets.push(self.bytes.len() as u64);
        encode_record(&mut self.bytes, allocator.as_bytes(), op, ptr, size, frames);
        self
    }

    pub fn alloc(&mut self, a: &str, ptr: u64, size: u64, frames: &[u64]) -> &mut Self {
        self.op(a, Op::Alloc, ptr, size, frames)
    }

    pub fn realloc(&mut self, a: &str, ptr: u64, size: u64, frames: &[u64]) -> &mut Self {
        self.op(a, Op::Realloc, ptr, size, frames)
    }

    pub fn free(&mut self, a: &str, ptr: u64, size: u64) -> &mut Self {
        self.op(a, Op::Free, ptr, size, &[0xdead])
    }

    pub fn analyze(&self, view: View) -> Analysis {
        let opts = Options {
            view,
            ..Options::default()
        };
        analyze(&self.bytes[..], &opts).expect("analysis")
    }
}

/// The profile of the only allocator.
pub fn only(a: &Analysis) -> &AllocatorProfile {
    assert_eq!(a.allocators.len(), 1, "allocators: {:?}", names(a));
    &a.allocators[0]
}

pub fn names(a: &Analysis) -> Vec<&str> {
    a.allocators.iter().map(|p| p.name.as_str()).collect()
}

/// A stack map from literal pairs.
pub fn map(pairs: &[(&[u64], u64)]) -> HashMap<Vec<u64>, u64> {
    pairs.iter().map(|(k, v)| (k.to_vec(), *v)).collect()
}

/// The sum of a stack map equals the live total: checked on every analysis that keeps blocks
/// consistent.
pub fn check_live_sum(p: &AllocatorProfile) {
    let sum: u64 = p.live_stacks.values().sum();
    assert_eq!(sum, p.stats.live_at_end, "live stacks of {}", p.name);
}
