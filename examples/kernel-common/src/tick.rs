//! `irq=on`'s interrupt handler, `timer_tick`, called by each kernel's entry stub
//! `isr_timer` (x86: crate::x86::timer; virt: the board's arch module), and the run's tick
//! count. Integer work only (the stubs save the integer registers, no FP/SIMD ones).
//!
//! The statics are in `.data` (but on i386, where they always were in `.bss`): `_start`
//! zeroes `.bss` one instruction a word, and the default run's counts stay as measured.

use crate::console::Console;
use core::sync::atomic::Ordering;

/// Iterations of the handler's loop: enough work for samples to land there.
const TICK_WORK: u32 = 5000;

// The hash's word: the kernel's register width on x86_64, 32 bits elsewhere (as each kernel
// had it).
#[cfg(target_arch = "x86_64")]
type Word = u64;
#[cfg(target_arch = "x86_64")]
type AtomicWord = core::sync::atomic::AtomicU64;
#[cfg(target_arch = "x86_64")]
const MUL: Word = 0x9E37_79B9_7F4A_7C15;
#[cfg(not(target_arch = "x86_64"))]
type Word = u32;
#[cfg(not(target_arch = "x86_64"))]
type AtomicWord = core::sync::atomic::AtomicU32;
#[cfg(not(target_arch = "x86_64"))]
const MUL: Word = 0x9E37_79B9;

#[cfg_attr(not(target_arch = "x86"), link_section = ".data")]
static TICKS: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
#[cfg_attr(not(target_arch = "x86"), link_section = ".data")]
static TICK_HASH: AtomicWord = AtomicWord::new(0);

/// The timer interrupt's work, called by `isr_timer`.
#[no_mangle]
#[inline(never)]
pub extern "C" fn timer_tick() {
    let mut h = TICK_HASH.load(Ordering::Relaxed);
    let mut i: Word = 0;
    while i < TICK_WORK as Word {
        h = h.rotate_left(5) ^ i.wrapping_mul(MUL);
        i += 1;
    }
    TICK_HASH.store(h, Ordering::Relaxed);
    // Only this handler writes it, one CPU: no read-modify-write atomics needed (nor wanted:
    // the virt kernels run with the MMU off, where exclusives may not work).
    TICKS.store(TICKS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// "irq: N timer interrupts" once the timer is off; passes the workload's checksum on.
#[inline]
pub fn report<C: Console, T>(out: &mut C, checksum: T) -> T {
    out.str("irq: ");
    out.dec(TICKS.load(Ordering::Relaxed) as u64);
    out.str(" timer interrupts\n");
    checksum
}
