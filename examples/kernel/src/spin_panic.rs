//! `spin_panic=SECS`: after the run, spin for SECS seconds, then panic: the hang before a
//! panic that kern-profile's flight recorder (`record --flight`) is for. The seconds are the
//! CMOS clock's, which follows the host's time under QEMU as the recorder's window does.

use kernel_common::console::Console;
use kernel_common::serial::{inb, outb};

/// The CMOS clock's seconds register (BCD or binary: only its changes are counted).
fn rtc_seconds() -> u8 {
    outb(0x70, 0x00);
    inb(0x71)
}

/// Spins until the clock's seconds changed `secs + 1` times (between `secs` and `secs + 1`
/// seconds), then panics with a dump of words, as real kernels' panics print their
/// registers and stack: the panic path takes a few milliseconds, as theirs do.
pub fn run<C: Console>(secs: u32, out: &mut C) -> ! {
    out.str("phase spin: start\n");
    let turns = spin_before_panic(secs);
    panic!("spin_panic={}: spun {} turns, panicking on purpose\n{}", secs, turns, Dump(turns))
}

/// 32 lines of 8 words derived from `turns`, in hex.
struct Dump(u32);

impl core::fmt::Display for Dump {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        let mut w = self.0;
        for line in 0..32u32 {
            write!(f, "{:08x}:", line * 32)?;
            for _ in 0..8 {
                w = w.rotate_left(5) ^ 0x9e37_79b9;
                write!(f, " {:08x}", w)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[inline(never)]
fn spin_before_panic(secs: u32) -> u32 {
    let mut last = rtc_seconds();
    let mut changes = 0;
    let mut turns: u32 = 0;
    while changes <= secs {
        // Work between reads: each read of the clock's port leaves the translated code.
        for i in 0..1000u32 {
            turns = core::hint::black_box(turns.wrapping_add(i));
        }
        let now = rtc_seconds();
        if now != last {
            last = now;
            changes += 1;
        }
    }
    turns
}
