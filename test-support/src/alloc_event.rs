//! Allocation events (format version 3) with what tests seldom set left at zero.

use kern_profile_format::memtrace::Op;
use kern_profile_format::{AllocEvent, StopReason};

/// A kernel call of hooked function `function` on `vcpu` at `time_ns`, whose walk from the
/// entry gave `frames`: no flags, allocator 0, no instruction count, size and pointers 0.
pub fn alloc_event(
    vcpu: u32,
    op: Op,
    function: u16,
    time_ns: u64,
    frames: &[u64],
) -> AllocEvent<'_> {
    AllocEvent {
        vcpu,
        op,
        flags: 0,
        function,
        allocator: 0,
        stop: StopReason::NullFramePointer.into(),
        time_ns,
        icount: 0,
        size: 0,
        ptr: 0,
        new_ptr: 0,
        frames,
    }
}
