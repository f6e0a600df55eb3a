//! `irq=on`: the default CPU workload with a timer interrupt of about 1 kHz, so that samples
//! land in an interrupt handler of kernel code, as in the i386 kernel
//! (examples/kernel/src/irq.rs). The board's part is in `arch` (`irq_start`, `irq_stop` and
//! the entry stub `isr_timer`): riscv64 the S-mode timer of the Sstc extension
//! (`stimecmp`), aarch64 the virtual generic timer (PPI 27) through the GICv2.
//!
//! `isr_timer` saves the caller-saved registers, moves to an interrupt stack of its own
//! (16 KiB at the top of the stacks' area, above the boot stack, as Linux's
//! `CONFIG_IRQ_STACKS` handlers run on a per-CPU stack), makes a frame record there that
//! holds the interrupted frame pointer and pc, `{fp, pc}` as Linux arm64's `pt_regs` stack
//! frame does, calls `timer_tick` and re-arms the timer (one period from the handler's
//! end). A frame-pointer walk from `timer_tick` finds that record, whose saved frame
//! pointer leads down, off the interrupt stack, into the interrupted stack: kern-profile
//! marks the kernel entry there (`[interrupt]`) and goes on at the interrupted pc. The
//! handler preserves every register `timer_tick` (kernel_common::tick, as on x86) may change
//! (it is integer code: no FP/SIMD registers), so the workload's checksum is the default
//! run's.

use crate::console::Console;
use crate::{arch, workload};

/// Interrupts a second.
pub const HZ: u32 = 1000;

/// Runs the CPU workload with the timer interrupt on; returns its checksum.
#[inline(never)]
pub fn run(rounds: u32, out: &mut Console) -> u32 {
    arch::irq_start(HZ);
    let checksum = workload::run_workload(rounds);
    arch::irq_stop();
    kernel_common::tick::report(out, checksum)
}
