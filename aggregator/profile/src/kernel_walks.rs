//! How the kernel samples' stacks were walked, for the warning that a kernel built without
//! frame pointers was walked by them: most of its stacks then stop at the sampled function
//! or its caller, with a "normal" null frame pointer, and nothing else says so.

use kern_profile_format::{WalkEnd, Walker};

use crate::input::Sample;

/// Kernel-mode samples with a recorded walk: how many, how many walked by frame pointers
/// (or by a recorder that did not say), and the addresses (pc and return addresses) those
/// found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelWalks {
    pub samples: u64,
    pub by_frame_pointers: u64,
    pub addresses: u64,
}

/// Fewer kernel samples than this say nothing about the kernel's build.
const ENOUGH: u64 = 50;

impl KernelWalks {
    pub fn add(&mut self, s: &Sample<'_>) {
        let Some(stop) = s.stop else {
            return;
        };
        if s.user {
            return;
        }
        self.samples += 1;
        if matches!(
            WalkEnd::of_byte(stop).walker(),
            None | Some(Walker::FramePointers)
        ) {
            self.by_frame_pointers += 1;
            self.addresses = self.addresses.saturating_add(s.addrs.len() as u64);
        }
    }

    /// The mean depth (addresses per stack, the sampled pc included) of the kernel stacks
    /// walked by frame pointers, when they are most of enough samples and reach on average
    /// less than one caller: a kernel built without frame pointers (a kernel built with them
    /// reaches its entry or thread root, several frames up, from almost every sample).
    pub fn mostly_shallow(&self) -> Option<f64> {
        let mean = self.addresses as f64 / self.by_frame_pointers.max(1) as f64;
        let most = self.by_frame_pointers.saturating_mul(2) > self.samples;
        (self.samples >= ENOUGH && most && mean < 2.0).then_some(mean)
    }
}
