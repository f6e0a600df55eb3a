//! `smp=on`: every CPU of the device tree (up to MAX_CPUS) runs its own workload,
//! examples/kernel-common/src/workload.rs's `smp_workload!` (the i386 kernel's too):
//!
//! ```text
//! CPU 0: _start → kmain → kernel::smp::run ─┐
//! CPU n: ap_start → kernel::smp::ap_main ───┴→ smp_run      loop over `rounds`
//!                                               └─ smp_round(n)  ROUND_ITERS leaf iterations
//!                                                  ├─ cpu_work_n   OWN_ITERS[n] iterations
//!                                                  └─ smp_shared   the rest
//! ```
//!
//! The boot CPU starts the others (arch::start_cpu), runs CPU 0's rounds, then waits
//! (arch::wait_event, no busy loop) until each has stored its checksum.

use crate::console::Console;
use kernel_common::console::Console as _;
use core::sync::atomic::{AtomicU32, Ordering};

kernel_common::smp_workload!(4);

static ROUNDS: AtomicU32 = AtomicU32::new(0);
static DONE: AtomicU32 = AtomicU32::new(0);
static CHECKSUMS: [AtomicU32; MAX_CPUS as usize] =
    [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];

#[inline(never)]
pub fn run(rounds: u32, cpus: u32, out: &mut Console) -> u32 {
    out.dec(cpus as u64);
    out.str(" CPU(s) in the device tree\n");
    ROUNDS.store(rounds, Ordering::Release);
    let mut started = 0;
    let mut id = 1;
    while id < cpus.min(MAX_CPUS) {
        if crate::arch::start_cpu(id) {
            started += 1;
        } else {
            out.str("smp: cpu ");
            out.dec(id as u64);
            out.str(" did not start\n");
        }
        id += 1;
    }
    if cpus > MAX_CPUS {
        out.str("smp: CPUs above 3 stay parked\n");
    }
    out.str("smp: started ");
    out.dec(started as u64);
    out.str(" secondary CPU(s)\n");
    let sum = smp_run(0, rounds);
    CHECKSUMS[0].store(sum, Ordering::Relaxed);
    while DONE.load(Ordering::Acquire) < started {
        crate::arch::wait_event();
    }
    let mut k = 0;
    while k <= started {
        out.str("smp: cpu ");
        out.dec(k as u64);
        out.str(" checksum ");
        out.hex(CHECKSUMS[k as usize].load(Ordering::Relaxed) as u64);
        out.str("\n");
        k += 1;
    }
    sum
}

/// A secondary CPU's Rust entry (from the arch's `ap_start`, frame pointer 0).
pub extern "C" fn ap_main(id: usize) -> ! {
    let sum = smp_run(id as u32, ROUNDS.load(Ordering::Acquire));
    CHECKSUMS[id].store(sum, Ordering::Relaxed);
    DONE.fetch_add(1, Ordering::Release);
    crate::arch::signal_event();
    crate::arch::park()
}
