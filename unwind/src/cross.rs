//! Walks that go on where a plain frame-pointer walk stops: across a kernel entry (Linux's
//! encoded `pt_regs` frame pointers) and onto another stack (an IRQ stack, or from a kernel
//! stack into the user stack that a system-call stub left in the frame pointer).
//!
//! Linux's x86 entry code, with `CONFIG_FRAME_POINTER`, stores an *encoded* pointer to the
//! saved registers in the frame pointer before it calls C code (arch/x86/include/asm/frame.h,
//! `ENCODE_FRAME_POINTER`): on x86_64 the pointer with its low bit set, on i386 with its top
//! bit cleared. The walk decodes it, checks the saved `cs`, and goes on at the interrupted
//! `ip` and `bp`, kernel or user, after a [`frame_marker::KERNEL_ENTRY`] marker.
//!
//! Elsewhere a frame pointer must move strictly upwards, which guards against loops; a jump
//! downwards is taken as a switch to another stack at most `stack_switches` times, after a
//! [`frame_marker::STACK_SWITCH`] marker, and each stack gets its own upward guard. The
//! reader (with symbols) decides whether what follows a switch is code.

use kern_profile_format::{frame_marker, StopReason};

use crate::{PtrWidth, Walk};

/// What a walk may cross besides plain frame records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Crossings {
    /// Decode Linux's encoded `pt_regs` frame pointers.
    pub linux_pt_regs: bool,
    /// Downward jumps to another stack allowed per walk.
    pub stack_switches: u8,
}

impl Crossings {
    /// Everything: what the plugin uses on x86 guests.
    pub const ALL: Crossings = Crossings {
        linux_pt_regs: true,
        stack_switches: 2,
    };
}

/// At most this many kernel entries per walk (an exception inside an interrupt inside a
/// system call is three).
const MAX_ENTRIES: u8 = 4;

/// The bit i386 Linux clears to encode a pt_regs pointer.
const I386_TOP: u64 = 0x8000_0000;

/// Where Linux's `struct pt_regs` keeps the interrupted context.
struct PtRegs {
    bp: u64,
    ip: u64,
    cs: u64,
}

/// The registers an encoded frame pointer `fp` points to, if it is one and they look right:
/// they lie on the stack being walked (at or above `lowest`) and hold a code selector.
fn decode_pt_regs<R>(fp: u64, lowest: u64, width: PtrWidth, read: &mut R) -> Option<PtRegs>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    // (pt_regs address, offsets of bp, ip, cs) for each width's struct pt_regs.
    // i386 Linux runs in the upper half (PAGE_OFFSET 0xC0000000, or 0x80000000): a walk of
    // a lower-half stack is not Linux's, and its every frame pointer has the top bit clear.
    let (regs, bp_at, ip_at, cs_at) = match width {
        PtrWidth::W8 if fp & 1 == 1 => (fp & !1, 32, 128, 136),
        PtrWidth::W4 if fp & I386_TOP == 0 && lowest > I386_TOP => (fp | I386_TOP, 20, 48, 52),
        _ => return None,
    };
    if regs < lowest {
        return None;
    }
    let w = width.bytes();
    let mut word = |at: u64| {
        let mut b = [0u8; 8];
        let addr = regs.checked_add(at)?;
        read(addr, &mut b[..w]).then(|| width.word(&b))
    };
    let r = PtRegs {
        bp: word(bp_at)?,
        ip: word(ip_at)?,
        cs: word(cs_at)? & 0xffff,
    };
    // A code selector: not null, ring 0 or 3.
    let plausible = r.cs & !3 != 0 && matches!(r.cs & 3, 0 | 3) && r.ip != 0;
    plausible.then_some(r)
}

/// Like [`crate::walk_above`], crossing kernel entries and stack switches as `crossings`
/// allows. Markers ([`frame_marker`]) take a frame slot each; after
/// [`frame_marker::KERNEL_ENTRY`] comes the interrupted instruction's own address (not a
/// return address), then the interrupted context's return addresses.
pub fn walk_across<R>(
    floor: u64,
    fp: u64,
    width: PtrWidth,
    max_depth: usize,
    crossings: Crossings,
    mut read: R,
    out: &mut [u64],
) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let w = width.bytes();
    let cap = max_depth.min(out.len());
    let mut record = [0u8; 16];
    let record = &mut record[..2 * w];
    let mut fp = fp;
    let mut lowest = floor;
    let mut switches = 0u8;
    let mut entries = 0u8;
    let mut n = 0usize;
    let mut push = |n: &mut usize, v: u64| -> bool {
        if *n >= cap {
            return false;
        }
        out[*n] = v;
        *n += 1;
        true
    };
    let stop = loop {
        if fp == 0 {
            break StopReason::NullFramePointer;
        }
        // Even the first: a sample in entry code, after the encoding, before the call.
        if crossings.linux_pt_regs && entries < MAX_ENTRIES {
            if let Some(r) = decode_pt_regs(fp, lowest, width, &mut read) {
                entries += 1;
                if !push(&mut n, frame_marker::KERNEL_ENTRY) || !push(&mut n, r.ip) {
                    break StopReason::DepthLimit;
                }
                // The interrupted context's stack: a guard of its own.
                fp = r.bp;
                lowest = 0;
                continue;
            }
        }
        if fp & (w as u64 - 1) != 0 {
            break StopReason::Misaligned;
        }
        if fp < lowest {
            if n == 0 || switches >= crossings.stack_switches {
                break StopReason::NotIncreasing;
            }
            switches += 1;
            // The other stack's guard starts at this frame (set below).
            if !push(&mut n, frame_marker::STACK_SWITCH) {
                break StopReason::DepthLimit;
            }
        }
        if n >= cap {
            break StopReason::DepthLimit;
        }
        match fp.checked_add(2 * w as u64 - 1) {
            Some(last) if last <= width.max_addr() => {}
            _ => break StopReason::Unreadable,
        }
        if !read(fp, record) {
            break StopReason::Unreadable;
        }
        let saved_fp = width.word(&record[..w]);
        let ret = width.word(&record[w..]);
        if ret == 0 {
            break StopReason::NullReturnAddress;
        }
        push(&mut n, ret);
        lowest = fp + 1;
        fp = saved_fp;
    };
    Walk { frames: n, stop }
}

#[cfg(test)]
mod tests;
