//! The riscv64 and aarch64 walk: frame records of two words, `{saved fp, return address}`,
//! at a fixed distance below the frame pointer (riscv64 16 bytes, aarch64 0), followed from
//! stack to stack across the kernel's trap entry.
//!
//! A trap entry that keeps the interrupted context's frame pointer in the chain pushes a
//! record `{interrupted fp, interrupted pc}` and points its frame pointer at it (the example
//! kernels' `trap_vector` and `svc_entry` for system calls; Linux arm64's `pt_regs`
//! stack frame for entries from EL1). Where such a record's saved frame pointer leads *below*
//! the stack being walked (a user stack below the kernel's, as in real kernels), the walk
//! takes it as the way into the interrupted context, unless the sample is of user mode: a
//! [`frame_marker::KERNEL_ENTRY`] marker, the record's pc as is (interrupted, not a return
//! address), then the interrupted context's frames, with an upward guard and a stack span of
//! their own. At most `stack_switches` such crossings per walk; anywhere else a frame pointer
//! must move strictly upwards, which guards against loops. The aggregator names the marker
//! from the entry code's frames (`[syscall]`, `[interrupt]`, `[kernel entry]`, …).
//!
//! Linux arm64 ends the chain of an entry from user space with a final record `{0, 0}`
//! inside the task's `pt_regs` instead: where the layout knows those registers
//! ([`Layout::final_regs`]), the walk reads the user context from them and goes on there.
//!
//! A user program's stack is walked up to its first frame and no further, as on x86 (the
//! crate's `cross` module): a fake return address of all ones (what a classic kernel puts
//! in `ra` / `x30` when it starts a program, with the frame pointer left as the kernel had
//! it: the first frame record saves garbage) ends the walk, and once the walk is in user
//! context (a user-mode sample, or past a final record's user registers) it crosses nothing.
//! Past a trap entry's record the interrupted context's privilege is unknown (an interrupt
//! of a system call crosses twice), so only the fake return address ends a walk there.
//!
//! Linux arm64 also runs interrupt handlers on a per-CPU interrupt stack (`call_on_irq_stack`:
//! 16 KiB, aligned to its size, the handler's first record at its very top), whose top record
//! links to the interrupted task's stack wherever that lies. Where the layout knows that
//! size ([`Layout::irq_stack`]), a record at the top of such a block on the stack being
//! walked may lead up beyond the stack's span: a [`frame_marker::STACK_SWITCH`] marker, and
//! the other stack gets a guard and a span of its own.

use kern_profile_format::{frame_marker, StopReason};

use crate::cross::{fake_return, span_end, Cursor, Frames};
use crate::{Crossings, PtrWidth, Walk};

/// Where an architecture keeps its frame records.
pub(crate) struct Layout {
    /// Bytes from the frame pointer down to its record.
    pub below: u64,
    /// Every frame pointer's alignment.
    pub align: u64,
    /// What a saved return address needs to be an address (aarch64's signature stripping).
    pub strip: fn(u64) -> u64,
    /// The first record may be a GCC 12 leaf's `{saved fp}` alone, at `fp - 8` (riscv64).
    pub gcc_leaf: bool,
    /// Where a final record `{0, 0}` may sit inside saved user registers (Linux arm64).
    pub final_regs: Option<FinalRegs>,
    /// The size of the kernel's interrupt stacks, aligned to it, whose top record may lead
    /// up to the interrupted stack (Linux arm64: 16 KiB); 0 where there are none.
    pub irq_stack: u64,
}

/// The handler's first record lies at most this far below its interrupt stack's top.
const IRQ_TOP_RECORD: u64 = 512;

/// Whether the record at `prev_at`, on a stack whose walk began at `seg_start`, is the top
/// record of an interrupt stack of `size` bytes: within [`IRQ_TOP_RECORD`] of the top of
/// the aligned block the walk began in.
fn leaves_irq_stack(size: u64, seg_start: u64, prev_at: u64) -> bool {
    if size == 0 || prev_at < seg_start {
        return false;
    }
    let block = seg_start & !(size - 1);
    let top = block.saturating_add(size);
    prev_at < top && top - prev_at <= IRQ_TOP_RECORD
}

/// Saved user registers around a chain's final record: [`FinalRegs::LEN`] bytes from
/// `below` bytes under the record, and how to read the user context from them.
pub(crate) struct FinalRegs {
    pub below: u64,
    pub decode: fn(&[u8; FinalRegs::LEN]) -> Option<UserContext>,
}

impl FinalRegs {
    pub const LEN: usize = 40;
}

/// The interrupted user context a final record's registers hold.
pub(crate) struct UserContext {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
}

/// A GCC 12 leaf's saved `fp` lies at most this far above its own `fp`.
const LEAF_FRAME_MAX: u64 = 1 << 20;

/// Walks the record chain from `fp` (its record at or above `floor`, the stack pointer) as
/// `layout` lays records out, crossing into interrupted contexts as `crossings` allows (only
/// its `interrupt_frames`, `user_mode`, `stack_switches` and `stack_span` apply). See
/// [`crate::walk`] for `read`, `out` and the stop reasons; a record at or beyond the stack
/// span's end stops the walk with [`StopReason::OffStack`] unread.
pub(crate) fn walk_records<R>(
    layout: &Layout,
    floor: u64,
    fp: u64,
    max_depth: usize,
    crossings: Crossings,
    mut read: R,
    out: &mut [u64],
) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let mut frames = Frames::new(out, max_depth);
    let mut record = [0u8; 16];
    // The record of `cur.fp` must lie at or above `cur.lowest`, and below the span's end,
    // `seg_end(cur.seg_start)`.
    let mut cur = Cursor::new(floor, fp, crossings.user_mode);
    let seg_end = |start: u64| span_end(crossings.stack_span, start);
    let mut crossed = 0u8;
    let mut first = true;
    // The record read last, whose saved frame pointer led here.
    let mut prev_at: Option<u64> = None;
    let stop = loop {
        if cur.fp == 0 {
            break StopReason::NullFramePointer;
        }
        if !cur.fp.is_multiple_of(layout.align) {
            break StopReason::Misaligned;
        }
        let Some(at) = cur.fp.checked_sub(layout.below) else {
            break StopReason::Unreadable;
        };
        if at < cur.lowest {
            break StopReason::NotIncreasing;
        }
        if frames.full() {
            break StopReason::DepthLimit;
        }
        if at.checked_add(15).is_none() {
            break StopReason::Unreadable;
        }
        if at >= seg_end(cur.seg_start)
            && !cur.in_user
            && crossed < crossings.stack_switches
            && prev_at.is_some_and(|p| leaves_irq_stack(layout.irq_stack, cur.seg_start, p))
        {
            // Up off an interrupt stack to the interrupted one.
            crossed += 1;
            if !frames.push(frame_marker::STACK_SWITCH) {
                break StopReason::DepthLimit;
            }
            cur.seg_start = at;
        }
        let end = seg_end(cur.seg_start);
        if at >= end || end - at < 16 {
            break StopReason::OffStack;
        }
        if !read(at, &mut record) {
            break StopReason::Unreadable;
        }
        prev_at = Some(at);
        let saved_fp = u64::from_le_bytes(record[..8].try_into().unwrap_or_default());
        let ret = u64::from_le_bytes(record[8..].try_into().unwrap_or_default());
        if first && layout.gcc_leaf && is_gcc_leaf_record(cur.fp, ret, layout.align) {
            // [fp - 8] is the saved fp: no return address here (the caller is in ra).
            first = false;
            cur.lowest = cur.fp;
            cur.fp = ret;
            continue;
        }
        first = false;
        if fake_return(ret, PtrWidth::W8) {
            // The program's first frame: its saved frame pointer is the kernel's garbage.
            break StopReason::NullReturnAddress;
        }
        if ret == 0 {
            let user = (saved_fp == 0
                && crossings.interrupt_frames
                && !cur.in_user
                && crossed < crossings.stack_switches)
                .then(|| user_context(layout, at, &mut read))
                .flatten();
            let Some(user) = user else {
                break StopReason::NullReturnAddress;
            };
            crossed += 1;
            if !frames.push_entry(user.pc) {
                break StopReason::DepthLimit;
            }
            cur.enter(user.fp, user.sp, true);
            continue;
        }
        let ret = (layout.strip)(ret);
        // Strictly upwards on one stack: the next record at or above this frame's top (and
        // above this record).
        let next_lowest = cur.fp.max(at + 1);
        // Down, off this stack, to a plausible frame pointer: the trap entry's record of the
        // interrupted context.
        let next_at = saved_fp.checked_sub(layout.below);
        let crosses = crossings.interrupt_frames
            && !cur.in_user
            && crossed < crossings.stack_switches
            && saved_fp.is_multiple_of(layout.align)
            && next_at.is_some_and(|a| a < next_lowest);
        match next_at {
            Some(next_at) if crosses && saved_fp != 0 => {
                crossed += 1;
                if !frames.push_entry(ret) {
                    break StopReason::DepthLimit;
                }
                // The interrupted context's stack.
                cur.enter(saved_fp, next_at, false);
            }
            _ => {
                frames.push(ret);
                cur.lowest = next_lowest;
            }
        }
        cur.fp = saved_fp;
    };
    Walk::by_frame_pointers(frames.n, stop, cur.in_user && !crossings.user_mode)
}

/// The user context saved around the final record at `at`, when the layout knows where and
/// the registers there are a user context.
fn user_context<R>(layout: &Layout, at: u64, read: &mut R) -> Option<UserContext>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let regs = layout.final_regs.as_ref()?;
    let mut buf = [0u8; FinalRegs::LEN];
    read(at.checked_sub(regs.below)?, &mut buf).then(|| (regs.decode)(&buf))?
}

/// A GCC 12 leaf record: the word at `fp - 8` is a frame pointer (just above `fp`, aligned),
/// not a return address.
fn is_gcc_leaf_record(fp: u64, word: u64, align: u64) -> bool {
    word > fp && word - fp <= LEAF_FRAME_MAX && word.is_multiple_of(align)
}

#[cfg(test)]
mod tests;
