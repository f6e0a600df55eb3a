//! Frame-pointer stack walkers for i386, x86_64, riscv64 and aarch64 guests, for the plugin
//! and the aggregator alike, over the architecture facts of kern-profile-arch (register names
//! and privilege levels, [`registers`]; x86 returns and calls, [`x86`]): riscv64 and aarch64
//! functions as they make and take down frame records ([`code`]), and where a function
//! stands in that at an instruction ([`frame_state`]). The x86 walk is this file's (with
//! [`walk_across`] and the frameless-entry classification [`EntryState`]); riscv64's and
//! aarch64's record layouts have their own modules; [`walk_guest`] picks.
//!
//! With frame pointers, every function starts with `push ebp; mov ebp, esp` (or the `rbp`
//! equivalent), so the frame pointer (FP) points at a *frame record*:
//!
//! ```text
//! FP + 0      saved FP of the caller
//! FP + W      return address into the caller      (W = pointer width, 4 or 8)
//! ```
//!
//! [`walk`] follows that chain through a caller-supplied memory reader, so it runs the same
//! over a guest's memory (the QEMU plugin) and over a fake stack in a `Vec<u8>` (the tests).
//! It never panics, whatever the reader returns, and a garbage frame pointer only costs a
//! short stack: every step must move strictly upwards, so a walk ends after at most
//! `max_depth` reads.

use kern_profile_format::{Arch, StopReason, WalkEnd, Walker};

pub mod aarch64;
pub mod code;
mod cross;
mod entry;
pub mod frame_state;
mod records;
pub mod riscv64;
pub mod stubs;
pub mod tables;

/// The architecture facts the walkers use, re-exported where they were before they moved to
/// kern-profile-arch.
pub use kern_profile_arch::registers;
pub use kern_profile_arch::x86::insn as x86;

use cross::Frames;
pub use cross::{walk_across, Crossings, KernelOs};
pub use entry::{sampled_index, EntryState};
use records::walk_records;
pub use tables::walk::{walk_tables, walk_tables_at_sample, StartRegs};
pub use tables::{Limits, TableError, UnwindTables};

/// Width of a guest pointer, which fixes the frame-record layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PtrWidth {
    /// 4-byte pointers (i386).
    W4,
    /// 8-byte pointers (x86_64).
    W8,
}

/// A pointer width other than 4 or 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("pointer width must be 4 or 8 bytes, not {0}")]
pub struct BadWidth(pub usize);

impl PtrWidth {
    /// The width in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            PtrWidth::W4 => 4,
            PtrWidth::W8 => 8,
        }
    }

    /// The width for `n` bytes.
    pub fn from_bytes(n: usize) -> Result<Self, BadWidth> {
        match n {
            4 => Ok(PtrWidth::W4),
            8 => Ok(PtrWidth::W8),
            other => Err(BadWidth(other)),
        }
    }

    /// The highest address of the guest's address space.
    pub const fn max_addr(self) -> u64 {
        match self {
            PtrWidth::W4 => u32::MAX as u64,
            PtrWidth::W8 => u64::MAX,
        }
    }

    /// Whether the frame record at `fp`, `[fp, fp + 2 * width)`, fits in the address space.
    #[inline]
    pub(crate) fn record_fits(self, fp: u64) -> bool {
        let w = self.bytes() as u64;
        fp.checked_add(2 * w - 1)
            .is_some_and(|last| last <= self.max_addr())
    }

    /// The frame record `{saved fp, return address}` at `fp`, `None` when it cannot be read.
    #[inline]
    pub(crate) fn read_record<R>(self, fp: u64, read: &mut R) -> Option<(u64, u64)>
    where
        R: FnMut(u64, &mut [u8]) -> bool,
    {
        let w = self.bytes();
        let mut record = [0u8; 16];
        let record = &mut record[..2 * w];
        read(fp, record).then(|| (self.word(&record[..w]), self.word(&record[w..])))
    }

    /// Decodes one little-endian pointer from the start of `b` (missing bytes read as 0).
    #[inline]
    pub fn word(self, b: &[u8]) -> u64 {
        // Fixed-size copies (no memcpy call): this runs twice per frame.
        match (self, b) {
            (PtrWidth::W4, [b0, b1, b2, b3, ..]) => u32::from_le_bytes([*b0, *b1, *b2, *b3]) as u64,
            (PtrWidth::W8, [b0, b1, b2, b3, b4, b5, b6, b7, ..]) => {
                u64::from_le_bytes([*b0, *b1, *b2, *b3, *b4, *b5, *b6, *b7])
            }
            _ => {
                let mut w = [0u8; 8];
                let n = self.bytes().min(b.len());
                w[..n].copy_from_slice(&b[..n]);
                u64::from_le_bytes(w)
            }
        }
    }
}

/// The outcome of a walk: how many return addresses were stored, why it stopped, which
/// walker stopped it, and whether it had crossed an entry from user space into the program
/// that entered the kernel (the kernel's part of such a stack is whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    pub frames: usize,
    pub stop: StopReason,
    pub walker: Walker,
    pub from_user: bool,
}

impl Walk {
    /// A frame-pointer walk's outcome.
    pub(crate) fn by_frame_pointers(frames: usize, stop: StopReason, from_user: bool) -> Self {
        Walk {
            frames,
            stop,
            walker: Walker::FramePointers,
            from_user,
        }
    }

    /// How it ended, as a sample's stop byte keeps it.
    pub fn end(&self) -> WalkEnd {
        WalkEnd::new(self.stop, self.walker, self.from_user)
    }
}

/// Walks a guest's frame-pointer chain from `fp`, with `sp` the stack pointer, the way
/// `arch` lays out frame records, with `crossings` (kernel entries, stack switches, the stack
/// span): x86 with [`walk_across`], riscv64 and aarch64 as [`riscv64`] and [`aarch64`] lay
/// records out (both down across a trap entry's record into the interrupted context, within
/// each stack's span; aarch64 also from Linux's final record in `pt_regs` into the user
/// context it saved, and with return addresses stripped of their signatures).
pub fn walk_guest<R>(
    arch: Arch,
    sp: u64,
    fp: u64,
    max_depth: usize,
    crossings: Crossings,
    read: R,
    out: &mut [u64],
) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    match arch {
        Arch::I386 => walk_across(sp, fp, PtrWidth::W4, max_depth, crossings, read, out),
        Arch::X86_64 => walk_across(sp, fp, PtrWidth::W8, max_depth, crossings, read, out),
        Arch::Riscv64 => walk_records(&riscv64::LAYOUT, sp, fp, max_depth, crossings, read, out),
        Arch::Aarch64 => walk_records(&aarch64::LAYOUT, sp, fp, max_depth, crossings, read, out),
    }
}

/// Walks the frame-pointer chain starting at `fp`.
///
/// Stores return addresses, innermost first, into `out` and returns how many, with the
/// reason the walk stopped. At most `min(max_depth, out.len())` frames are stored.
///
/// `read(addr, buf)` must fill `buf` with the guest bytes at `addr` and return `true`, or
/// return `false` when that memory cannot be read. It is called once per frame record
/// (`2 * width` bytes), never across the end of the address space.
///
/// The walk stops at, in this order of checks for each frame pointer:
/// a null FP ([`StopReason::NullFramePointer`], the normal end), an FP not above the
/// previous one ([`StopReason::NotIncreasing`], which guards against loops), the depth cap
/// ([`StopReason::DepthLimit`]), a record that cannot be read or would wrap past the end of
/// the address space ([`StopReason::Unreadable`]), or a null return address
/// ([`StopReason::NullReturnAddress`]).
///
/// A frame pointer needs no alignment: x86 requires none of a stack, and a record is followed
/// on its own evidence (readable, above the last, a return address). A FreePascal kernel
/// starts each thread's stack at `top - 1`, so every frame pointer of its chains is odd (8n+7
/// on x86_64), and those chains are whole. [`StopReason::Misaligned`] stays in the format
/// for riscv64's and aarch64's records, which their ABIs align, and for older recordings.
pub fn walk<R>(fp: u64, width: PtrWidth, max_depth: usize, read: R, out: &mut [u64]) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    walk_from(fp, None, width, max_depth, read, out)
}

/// Like [`walk`], but the first frame pointer must also be at or above `floor`, the stack
/// pointer: a live frame record always lies above the stack pointer, so an FP below it is
/// garbage (a function that uses its frame pointer register for something else), reported
/// as [`StopReason::NotIncreasing`].
pub fn walk_above<R>(
    floor: u64,
    fp: u64,
    width: PtrWidth,
    max_depth: usize,
    read: R,
    out: &mut [u64],
) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    walk_from(fp, Some(floor), width, max_depth, read, out)
}

fn walk_from<R>(
    mut fp: u64,
    floor: Option<u64>,
    width: PtrWidth,
    max_depth: usize,
    mut read: R,
    out: &mut [u64],
) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let mut frames = Frames::new(out, max_depth);
    // The lowest acceptable value of the next frame pointer.
    let mut lowest = floor.unwrap_or(0);
    let stop = loop {
        if fp == 0 {
            break StopReason::NullFramePointer;
        }
        if fp < lowest {
            break StopReason::NotIncreasing;
        }
        if frames.full() {
            break StopReason::DepthLimit;
        }
        if !width.record_fits(fp) {
            break StopReason::Unreadable;
        }
        let Some((saved_fp, ret)) = width.read_record(fp, &mut read) else {
            break StopReason::Unreadable;
        };
        if ret == 0 {
            break StopReason::NullReturnAddress;
        }
        frames.push(ret);
        // Strictly upwards: `fp + 1` cannot overflow since the record fitted above.
        lowest = fp + 1;
        fp = saved_fp;
    };
    Walk::by_frame_pointers(frames.n, stop, false)
}

#[cfg(test)]
mod tests;
