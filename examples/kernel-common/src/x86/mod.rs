//! What the two x86 example kernels (i386, x86_64) share besides the workloads: the exit
//! through QEMU's `isa-debug-exit`, the IDT with its exception stubs, the 8259 PICs and the
//! PIT's timer interrupt (`irq=on`), the multiboot information. Each kernel keeps its own boot
//! code (`_start`; x86_64's long-mode bootstrap).

mod asm;
pub mod exit;
pub mod idt;
pub mod multiboot;
pub mod pic;
pub mod timer;

use crate::serial::{self, Com1};

/// kmain's first steps: the IDT first (from there on a fault is reported, not a silent
/// triple fault), the PICs masked, the UARTs set up; COM1 for the progress lines.
#[inline]
pub fn init() -> Com1 {
    idt::init();
    pic::mask();
    serial::init(serial::COM1);
    serial::init(serial::COM2);
    Com1
}
