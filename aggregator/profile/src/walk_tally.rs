//! How the kept samples' stacks were walked, by where each was taken: the report's `stacks of`
//! lines (whole against cut, for kernel and user stacks apart; boot code is no kernel stack),
//! and the warning that a kernel built without frame pointers was walked by them (most of its
//! stacks then stop at the sampled function or its caller, with a "normal" null frame
//! pointer, and nothing else says so).

use kern_profile_format::{CpuMode, StopCounts, WalkEnd, Walker};

use crate::input::Sample;

/// The kept samples' walk ends: kernel stacks, user stacks, and boot or firmware samples
/// (real mode, firmware, or code outside the kernel: a decompressor, early boot), with
/// the kernel stacks' depths by frame pointers.
#[derive(Debug, Default, Clone)]
pub struct WalkTally {
    /// Kernel samples with a recorded walk.
    pub samples: u64,
    /// Of those, walked by frame pointers (or by a recorder that did not say).
    pub by_frame_pointers: u64,
    /// Addresses (the pc and return addresses) the frame-pointer walks found.
    pub addresses: u64,
    pub kernel_ends: StopCounts,
    pub user_ends: StopCounts,
    /// Boot and firmware samples: their walks say nothing of the kernel's stacks.
    pub boot: u64,
}

/// Fewer kernel samples than this say nothing about the kernel's build.
const ENOUGH: u64 = 50;

impl WalkTally {
    /// Counts `s` (its [`Sample::weight`] samples); `outside_kernel` when its pc is no kernel
    /// code: below all of it (a decompressor with paging on), or with paging off where the
    /// kernel's symbols do not reach (early boot at physical addresses; a kernel that never
    /// turns paging on, as the example kernels, runs its own code there).
    pub fn add(&mut self, s: &Sample<'_>, outside_kernel: bool) {
        let Some(stop) = s.stop else {
            return;
        };
        let n = s.weight;
        if s.user {
            self.user_ends.add_n(stop, n);
            return;
        }
        let boot = s.cpu.firmware || s.cpu.mode == CpuMode::Real || outside_kernel;
        if boot {
            self.boot += n;
            return;
        }
        self.kernel_ends.add_n(stop, n);
        self.samples += n;
        if matches!(
            WalkEnd::of_byte(stop).walker(),
            None | Some(Walker::FramePointers)
        ) {
            self.by_frame_pointers += n;
            let addrs = (s.addrs.len() as u64).saturating_mul(n);
            self.addresses = self.addresses.saturating_add(addrs);
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
