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
