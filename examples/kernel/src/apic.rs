//! The local APIC (xAPIC, memory-mapped; paging is off, so physical addresses are used as
//! they are): enabling it, interprocessor interrupts, end of interrupt, its timer.
//! Only `smp=on` uses it; the default run never touches the APIC.

use core::arch::asm;
use core::sync::atomic::{AtomicU32, Ordering};

const IA32_APIC_BASE: u32 = 0x1B;

const ID: usize = 0x20;
const EOI: usize = 0xB0;
const SVR: usize = 0xF0;
const ICR_LO: usize = 0x300;
const ICR_HI: usize = 0x310;
const LVT_TIMER: usize = 0x320;
const TIMER_INIT: usize = 0x380;
const TIMER_DIV: usize = 0x3E0;

/// ICR delivery modes and flags.
pub const ICR_FIXED: u32 = 0 << 8;
pub const ICR_INIT: u32 = 5 << 8;
pub const ICR_STARTUP: u32 = 6 << 8;
pub const ICR_ASSERT: u32 = 1 << 14;
pub const ICR_LEVEL: u32 = 1 << 15;
const ICR_PENDING: u32 = 1 << 12;

/// The vector of spurious interrupts (an `iret` stub, src/smp.rs).
pub const SPURIOUS_VECTOR: u8 = 0xFF;

/// The APIC's physical base, from IA32_APIC_BASE (0xFEE00000 unless firmware moved it).
static BASE: AtomicU32 = AtomicU32::new(0xFEE0_0000);

fn reg(off: usize) -> *mut u32 {
    (BASE.load(Ordering::Relaxed) as usize + off) as *mut u32
}

fn read(off: usize) -> u32 {
    unsafe { reg(off).read_volatile() }
}

fn write(off: usize, v: u32) {
    unsafe { reg(off).write_volatile(v) }
}

/// Reads the APIC's base from its MSR (boot CPU, before anything else here).
pub fn init_base() {
    let (lo, _hi): (u32, u32);
    unsafe {
        asm!("rdmsr", in("ecx") IA32_APIC_BASE, out("eax") lo, out("edx") _hi,
             options(nomem, nostack, preserves_flags))
    };
    BASE.store(lo & 0xFFFF_F000, Ordering::Relaxed);
}

/// The address of the EOI register, for the assembly interrupt stubs.
pub fn eoi_register() -> u32 {
    BASE.load(Ordering::Relaxed) + EOI as u32
}

/// Software-enables this CPU's APIC (spurious vector register), so that it accepts fixed
/// interrupts (the BSP's wake-up IPIs).
pub fn enable() {
    write(SVR, 0x100 | SPURIOUS_VECTOR as u32);
}

/// This CPU's APIC ID.
pub fn id() -> u32 {
    read(ID) >> 24
}

/// Sends an IPI (`low` = vector | delivery mode | flags) to the APIC `dest` and waits until
/// the APIC has sent it.
pub fn send_ipi(dest: u32, low: u32) {
    write(ICR_HI, dest << 24);
    write(ICR_LO, low);
    let mut spins = 0u32;
    while read(ICR_LO) & ICR_PENDING != 0 && spins < 1_000_000 {
        spins += 1;
        unsafe { asm!("pause", options(nomem, nostack, preserves_flags)) };
    }
}

/// A periodic timer interrupt on `vector`, every `count` ticks of the APIC clock divided
/// by 128. QEMU's APIC clock runs at 1 GHz of virtual time: 781,250 is every 100 ms.
pub fn start_timer(vector: u8, count: u32) {
    write(TIMER_DIV, 0b1010); // divide by 128
    write(LVT_TIMER, (1 << 17) | vector as u32); // periodic, unmasked
    write(TIMER_INIT, count);
}

pub fn stop_timer() {
    write(LVT_TIMER, 1 << 16); // masked
    write(TIMER_INIT, 0);
}
