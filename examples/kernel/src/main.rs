//! kern-profile's example guest kernel: an i386 multiboot v1 kernel with a CPU workload of
//! known shape and a deterministic allocation pattern traced in Maestro's `memtrace` format.
//! It is the fixture of kern-profile's end-to-end tests; see README.md for what it does and
//! expected.toml for the numbers the tests check.
//!
//! Built by scripts/guests/build-kernel.sh with plain rustc (no Cargo; `core` and
//! examples/kernel-common only).

#![no_std]
#![no_main]

mod acpi;
mod apic;
mod boot;
mod hostile;
mod irq;
mod procs;
mod smp;
mod spin_panic;
mod user;
mod workload;

use core::panic::PanicInfo;
use kernel_common::config::{self, Keys, Mode};
use kernel_common::console::{self, Console};
use kernel_common::serial::Com1;
use kernel_common::x86::{self, exit, multiboot};
use kernel_common::{alloc_phase, kalloc, phases};

/// The command line's keys beyond the default run's (README.md, "Command line").
const KEYS: Keys =
    Keys { modes: &[Mode::Smp, Mode::User, Mode::Hostile, Mode::Procs, Mode::Exec, Mode::Sched], irq_alone: true, halt: true, memtrace: false, spin_panic: true };

/// Rust entry point, called by `_start` (src/boot.rs) with the multiboot registers, on the
/// boot stack, with EBP = 0 so that every frame-pointer walk ends here.
#[no_mangle]
pub extern "C" fn kmain(magic: u32, info: u32) -> ! {
    let mut out = x86::init();
    phases::banner(&mut out, "kernel", None);
    let info = multiboot::read(magic, info);
    if let Some(end) = info.mem_end.filter(|&end| end < kalloc::HEAP_END) {
        let upper_kib = (end - 0x10_0000) / 1024;
        panic!("{} KiB of upper memory: the heaps need {:#x} bytes of RAM", upper_kib, kalloc::HEAP_END);
    }
    let cfg = config::parse(info.cmdline, &KEYS);
    phases::config(&mut out, &cfg);
    phases::crash(cfg.crash, exit::fault);

    // The two phases run one after the other, never interleaved, so that the CPU profile
    // and the allocation trace each have a clean, known shape.
    // The CPU phase runs one of the workloads of README.md: the kernel's own (default), one
    // per CPU (smp=on), a user program with system calls (user=on), two of them (procs=on,
    // side by side; exec=on, one after another in one address space),
    // frame chains no compiler makes (hostile=on), named tasks under a scheduler (sched=on).
    match cfg.mode {
        Mode::Kernel => {
            out.str("phase cpu: start\n");
            let checksum = match cfg.irq {
                false => workload::run_workload(cfg.rounds),
                true => irq::run(cfg.rounds, &mut out),
            };
            phases::checksum(&mut out, "cpu", checksum as u64);
        }
        Mode::Smp => {
            out.str("phase cpu: start (smp)\n");
            let checksum = smp::run(cfg.rounds, &mut out);
            phases::checksum(&mut out, "cpu", checksum as u64);
        }
        Mode::User => {
            out.str("phase user: start\n");
            let code = user::run(cfg.rounds, info.mem_end, &mut out);
            phases::exit_code(&mut out, "user", code);
        }
        Mode::Procs => {
            out.str("phase procs: start\n");
            let code = procs::run(cfg.rounds, info.mem_end, &mut out);
            phases::exit_code(&mut out, "procs", code);
        }
        Mode::Exec => {
            out.str("phase exec: start\n");
            let code = procs::run_exec(cfg.rounds, &mut out);
            phases::exit_code(&mut out, "exec", code);
        }
        Mode::Hostile => {
            out.str("phase hostile: start\n");
            let checksum = hostile::run(cfg.rounds, info.mem_end, &mut out);
            phases::checksum(&mut out, "hostile", checksum as u64);
        }
        Mode::Sched => {
            out.str("phase sched: start\n");
            let checksum = kernel_common::sched::run(cfg.rounds);
            phases::checksum(&mut out, "sched", checksum as u64);
        }
        // Not among KEYS' modes (x86_64's).
        Mode::OddStack => unreachable!(),
    }

    out.str("phase alloc: start\n");
    alloc_phase::run(cfg.alloc_rounds);
    alloc_phase::report(&mut out);
    out.str("phase alloc: done\ndone\n");
    if cfg.spin_panic > 0 {
        spin_panic::run(cfg.spin_panic, &mut out)
    }
    if cfg.halt {
        out.str("halted\n");
        exit::halt()
    }
    exit::exit(exit::EXIT_SUCCESS)
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    console::panic_message(&mut Com1, info);
    exit::exit(exit::EXIT_PANIC)
}
