//! The end of a run: QEMU's `isa-debug-exit` (iobase 0xf4), after which QEMU exits with
//! `(value << 1) | 1`; without that device, a message on COM1 and a triple fault
//! (`-no-reboot` turns it into an exit).

use crate::console::Console;
use crate::serial::Com1;
use crate::x86::idt::DescriptorPtr;
use core::arch::asm;

/// Values written to `isa-debug-exit`.
pub const EXIT_SUCCESS: u32 = 0x10; // QEMU exit status 33
pub const EXIT_PANIC: u32 = 0x11; // 35
pub const EXIT_EXCEPTION: u32 = 0x12; // 37

/// Halts for good, interrupts off: QEMU keeps running until it is stopped (`halt=on`).
pub fn halt() -> ! {
    unsafe { asm!("cli", "2:", "hlt", "jmp 2b", options(noreturn)) }
}

/// Ends the run through `isa-debug-exit`.
pub fn exit(code: u32) -> ! {
    // isa-debug-exit has no read side: a read gives 0 when it is there and all ones (an
    // unassigned port) when it is not.
    let probe: u32;
    unsafe { asm!("in eax, dx", out("eax") probe, in("dx") 0xf4u16, options(nomem, nostack)) };
    if probe != 0xFFFF_FFFF {
        unsafe {
            asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code, options(nomem, nostack));
            // QEMU stops the vCPU a little after the write, not at once: halt with
            // interrupts off so that no further instruction runs (exact counts stay exact).
            asm!("cli", "2:", "hlt", "jmp 2b", options(noreturn));
        }
    }
    Com1.str("no isa-debug-exit device at 0xf4: triple-faulting (QEMU -no-reboot exits with 0)\n");
    unsafe {
        let null = DescriptorPtr { limit: 0, base: 0 };
        asm!("lidt [{}]", "int3", in(reg) &null, options(noreturn));
    }
}

/// `crash=fault`: an invalid opcode.
pub fn fault() -> ! {
    unsafe { asm!("ud2", options(noreturn)) }
}
