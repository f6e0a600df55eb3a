//! Maestro's `memtrace` records on COM2, byte for byte as Maestro's `memory::trace::sample`
//! writes them (format: /work/shared/notes/formats.md, "Maestro memtrace"):
//!
//! `u8 nlen, name, u8 op, u64 ptr, u64 size, u8 nframe, nframe x u64 return addresses`
//!
//! all little-endian, no header. The frames come from an EBP (RBP) walk that starts in
//! `record` itself, so frame 0 is the return address into the allocator entry point
//! (`kmalloc`, `pages_free`, ...), frame 1 is in its caller, and the last one is in `_start`.

use crate::serial::{write_burst, COM2};
use core::arch::asm;
use core::cell::Cell;
use core::mem::MaybeUninit;

pub const OP_ALLOC: u8 = 0;
pub const OP_REALLOC: u8 = 1;
pub const OP_FREE: u8 = 2;

/// Maestro walks at most 64 frames.
const MAX_FRAMES: usize = 64;

extern "C" {
    static __stack_bottom: u8;
    static __stack_top: u8;
}

/// Single CPU, no interrupts: plain cells in a static are enough.
struct Counters {
    records: Cell<u64>,
    bytes: Cell<u64>,
}
unsafe impl Sync for Counters {}
static COUNTERS: Counters = Counters { records: Cell::new(0), bytes: Cell::new(0) };

pub fn records() -> u64 {
    COUNTERS.records.get()
}

pub fn bytes() -> u64 {
    COUNTERS.bytes.get()
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
    fp
}

/// Writes one record. Must stay a real call (`inline(never)`): the walk starts from this
/// function's own frame.
#[inline(never)]
pub fn record(allocator: &str, op: u8, ptr: usize, size: usize) {
    let name = allocator.as_bytes();
    let nlen = name.len().min(255);
    let head = 1 + nlen + 1 + 8 + 8 + 1;
    // The record is built whole, then sent in FIFO-sized bursts (serial::write_burst).
    // Not zero-initialised: `rep stosb` over ~800 bytes would cost ~800 emulated
    // instructions per record.
    let mut buf = MaybeUninit::<[u8; 1 + 255 + 18 + 8 * MAX_FRAMES]>::uninit();
    let b = buf.as_mut_ptr() as *mut u8;

    // Frames go straight after the header. Stop at a zero frame pointer (set by _start), or
    // at anything that does not look like a frame of the boot stack, so a corrupt chain cannot
    // fault or loop.
    const W: usize = core::mem::size_of::<usize>();
    let mut n = 0;
    let lo = unsafe { &__stack_bottom as *const u8 as usize };
    let hi = unsafe { &__stack_top as *const u8 as usize };
    let mut fp = frame_pointer();
    while n < MAX_FRAMES && fp != 0 && fp % W == 0 && fp >= lo && fp <= hi - 2 * W {
        let (next, ret) = unsafe { ((fp as *const usize).read(), (fp as *const usize).add(1).read()) };
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
    write_burst(COM2, unsafe { core::slice::from_raw_parts(b, len) });
    COUNTERS.records.set(COUNTERS.records.get() + 1);
    COUNTERS.bytes.set(COUNTERS.bytes.get() + len as u64);
}
