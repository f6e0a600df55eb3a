//! `irq=on`: the default CPU workload with the PIT's timer interrupt on (1 kHz, IRQ 0 through
//! the 8259 on vector 0x20), as in the i386 kernel: the entry stub `isr_timer`, its frame
//! record and CFI, and the handler `timer_tick` are kernel_common's (x86::timer, tick); this
//! frame stays the kernel's own (`kernel64::irq::run`).

use crate::workload;
use kernel_common::serial::Com1;
use kernel_common::x86::timer;

/// Runs the CPU workload with the timer interrupt on; returns its checksum.
#[inline(never)]
pub fn run(rounds: u32, out: &mut Com1) -> u64 {
    timer::start();
    timer::stop(out, workload::run_workload(rounds))
}
