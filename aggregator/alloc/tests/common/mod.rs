//! Builds memtrace traces from real bytes with the format crate's encoder.

#![allow(dead_code)]

use std::collections::HashMap;

use kern_profile_alloc::{AllocatorProfile, Analysis};

pub use kern_profile_test_support::memtrace::Trace;

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
