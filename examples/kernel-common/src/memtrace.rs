//! Maestro's `memtrace` records, byte for byte as Maestro's `memory::trace::sample` writes
//! them (format: /work/shared/notes/formats.md, "Maestro memtrace"):
//!
//! `u8 nlen, name, u8 op, u64 ptr, u64 size, u8 nframe, nframe x u64 return addresses`
//!
//! all little-endian, no header. The frames come from a frame-pointer walk that starts in
//! `record` itself, so frame 0 is the return address into the allocator entry point
//! (`kmalloc`, `pages_free`, ...), frame 1 is in its caller, and the last one is in `_start`.
//!
//! Where the records go:
//! - x86 (i386, x86_64): COM2, in FIFO-sized bursts (the x86_64 kernel has no COM2: QEMU
//!   drops them). The walk follows EBP (RBP) over the boot stack.
//! - riscv64, aarch64: the `virt` boards have one UART, kept for text: the records go to the
//!   host file named by `memtrace=FILE` on the command line, opened (`open`: `SYS_OPEN`,
//!   "wb") and written (one `SYS_WRITE` a record) through semihosting, so QEMU needs
//!   `-semihosting-config enable=on,target=native`. Without `memtrace=`, records are built
//!   and counted all the same, and written nowhere. The walk follows the frame records
//!   (`FP_*` give their layout) inside the kernel's stacks.

use core::arch::asm;
use core::mem::MaybeUninit;

pub const OP_ALLOC: u8 = 0;
pub const OP_REALLOC: u8 = 1;
pub const OP_FREE: u8 = 2;

/// Maestro walks at most 64 frames.
const MAX_FRAMES: usize = 64;

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
extern "C" {
    static __stack_bottom: u8;
    static __stack_top: u8;
}

#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
extern "C" {
    static __stacks_start: u8;
    static __stacks_end: u8;
    /// The semihosting trap (the virt kernels' `arch` module, in assembly): operation,
    /// parameter block; returns the host's result.
    fn semihost_call(op: usize, param: usize) -> isize;
}

/// The walk's frame records, `[fp + FP_RECORD_OFFSET]`: a word, the caller's frame pointer,
/// then the return address. riscv64: s0 points just above the saved pair.
#[cfg(target_arch = "riscv64")]
const FP_RECORD_OFFSET: isize = -16;
/// x86: EBP/RBP points to {saved EBP/RBP, return address}; aarch64: x29 to {saved x29,
/// saved x30}.
#[cfg(not(target_arch = "riscv64"))]
const FP_RECORD_OFFSET: isize = 0;
/// Semihosting operations (the same numbers on both).
#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
const SYS_OPEN: usize = 0x01;
#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
const SYS_WRITE: usize = 0x05;

/// One CPU (the allocation phase runs on the boot CPU alone), no interrupts: plain statics
/// are enough. `static mut` read and written in place, not `Cell`s: `records`, `bytes` and
/// `open` are inlined into the kernel crates, so these are exported, and a `Cell`'s `&self`
/// would then keep the static's address as a debug value, which on riscv64 costs `record` an
/// `addi` per access (the address computed apart from the load; as one crate, LLVM split a
/// private static of three fields into three and the accesses folded).
static mut RECORDS: u64 = 0;
static mut BYTES: u64 = 0;
/// The semihosting handle of `memtrace=FILE`, -1 without one.
#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
static mut HANDLE: isize = -1;

#[inline]
pub fn records() -> u64 {
    unsafe { RECORDS }
}

#[inline]
pub fn bytes() -> u64 {
    unsafe { BYTES }
}

/// This function's own frame pointer.
#[inline(always)]
fn frame_pointer() -> usize {
    let fp: usize;
    #[cfg(target_arch = "x86")]
    unsafe {
        asm!("mov {}, ebp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "x86_64")]
    unsafe {
        asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "riscv64")]
    unsafe {
        asm!("mv {}, s0", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    unsafe {
        asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    fp
}

/// Opens the host file `path` for the records (semihosting `SYS_OPEN`, mode 5 = "wb").
#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
#[inline]
pub fn open(path: &[u8]) {
    let mut name = [0u8; 256];
    if path.len() >= name.len() {
        panic!("memtrace: a file name of {} bytes is too long", path.len());
    }
    name[..path.len()].copy_from_slice(path);
    let args = [name.as_ptr() as usize, 5, path.len()];
    let h = unsafe { semihost_call(SYS_OPEN, args.as_ptr() as usize) };
    if h < 0 {
        panic!("memtrace: semihosting SYS_OPEN failed for {:?}", core::str::from_utf8(path));
    }
    unsafe { HANDLE = h };
}

/// Sends a whole record.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[inline(always)]
fn write(data: &[u8]) {
    crate::serial::write_burst(crate::serial::COM2, data);
}

/// Sends a whole record: one `SYS_WRITE`, if `open` was called.
#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
fn write(data: &[u8]) {
    let h = unsafe { HANDLE };
    if h < 0 {
        return;
    }
    let args = [h as usize, data.as_ptr() as usize, data.len()];
    if unsafe { semihost_call(SYS_WRITE, args.as_ptr() as usize) } != 0 {
        panic!("memtrace: semihosting SYS_WRITE failed");
    }
}

/// Writes one record. Must stay a real call (`inline(never)`): the walk starts from this
/// function's own frame.
#[inline(never)]
pub fn record(allocator: &str, op: u8, ptr: usize, size: usize) {
    let name = allocator.as_bytes();
    let nlen = name.len().min(255);
    let head = 1 + nlen + 1 + 8 + 8 + 1;
    // The record is built whole, then sent (x86: in FIFO-sized bursts, serial::write_burst).
    // Not zero-initialised: `rep stosb` over ~800 bytes would cost ~800 emulated
    // instructions per record.
    let mut buf = MaybeUninit::<[u8; 1 + 255 + 18 + 8 * MAX_FRAMES]>::uninit();
    let b = buf.as_mut_ptr() as *mut u8;

    // Frames go straight after the header. Stop at a zero frame pointer (set by _start), or
    // at anything that does not look like a frame of the kernel's stacks, so a corrupt chain
    // cannot fault or loop.
    let mut n = 0;
    {
        const W: usize = core::mem::size_of::<usize>();
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        let (lo, hi) = unsafe { (&__stack_bottom as *const u8 as usize, &__stack_top as *const u8 as usize) };
        #[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
        let (lo, hi) = unsafe { (&__stacks_start as *const u8 as usize, &__stacks_end as *const u8 as usize) };
        let mut fp = frame_pointer();
        while n < MAX_FRAMES && fp != 0 && fp % W == 0 {
            let rec = fp.wrapping_add_signed(FP_RECORD_OFFSET);
            if rec < lo || rec > hi - 2 * W {
                break;
            }
            let (next, ret) = unsafe { ((rec as *const usize).read(), (rec as *const usize).add(1).read()) };
            if ret == 0 {
                break;
            }
            unsafe { (b.add(head + 8 * n) as *mut u64).write_unaligned(ret as u64) };
            n += 1;
            if next != 0 && next <= fp {
                break;
            }
            fp = next;
        }
    }

    unsafe {
        b.write(nlen as u8);
        for i in 0..nlen {
            b.add(1 + i).write(name[i]);
        }
        b.add(1 + nlen).write(op);
        (b.add(2 + nlen) as *mut u64).write_unaligned(ptr as u64);
        (b.add(10 + nlen) as *mut u64).write_unaligned(size as u64);
        b.add(head - 1).write(n as u8);
    }
    let len = head + 8 * n;
    write(unsafe { core::slice::from_raw_parts(b, len) });
    unsafe {
        RECORDS += 1;
        BYTES += len as u64;
    }
}
