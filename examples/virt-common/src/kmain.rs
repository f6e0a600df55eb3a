//! `kmain`, the run's phases, the panic handler and the trap report: the i386 kernel's
//! (examples/kernel/src/main.rs) over the board's `arch` module.

use crate::console::Console;
use crate::{arch, fdt, irq, smp, user, workload};
use core::panic::PanicInfo;
use kernel_common::config::{self, Keys, Mode};
use kernel_common::console::{self, Console as _};
use kernel_common::{alloc_phase, memtrace, phases};

/// The command line's keys beyond the default run's (../README.md, "Command line"); `irq=on`
/// is ignored in the other modes.
const KEYS: Keys = Keys { modes: &[Mode::Smp, Mode::User, Mode::Sched], irq_alone: false, halt: false, memtrace: true, spin_panic: false };

/// QEMU exit statuses: 0 (success), and the i386 kernel's for a panic and a CPU exception.
pub const EXIT_SUCCESS: u32 = 0;
pub const EXIT_PANIC: u32 = 35;
pub const EXIT_EXCEPTION: u32 = 37;

/// Rust entry point, called by `_start` on the boot stack with the frame pointer and the
/// return-address register 0 (every frame-pointer walk ends here) and the device tree.
#[no_mangle]
pub extern "C" fn kmain(dtb: usize) -> ! {
    arch::init();
    let mut out = Console;
    phases::banner(&mut out, "kernel", Some(arch::NAME));
    let dt = fdt::parse(dtb);
    let cfg = config::parse(dt.bootargs, &KEYS);
    phases::config(&mut out, &cfg);
    phases::crash(cfg.crash, arch::fault);

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
            out.str("phase cpu: start (smp)\nsmp: ");
            let checksum = smp::run(cfg.rounds, dt.cpus, &mut out);
            phases::checksum(&mut out, "cpu", checksum as u64);
        }
        Mode::User => {
            out.str("phase user: start\n");
            let code = user::run(cfg.rounds, &mut out);
            phases::exit_code(&mut out, "user", code);
        }
        Mode::Sched => {
            out.str("phase sched: start\n");
            let checksum = kernel_common::sched::run(cfg.rounds);
            phases::checksum(&mut out, "sched", checksum as u64);
        }
        // Not among KEYS' modes.
        Mode::Hostile | Mode::Procs | Mode::Exec | Mode::OddStack => unreachable!(),
    }

    out.str("phase alloc: start\n");
    if let Some(path) = cfg.memtrace {
        memtrace::open(path);
    }
    alloc_phase::run(cfg.alloc_rounds);
    alloc_phase::report(&mut out);
    out.str("phase alloc: done\ndone\n");
    arch::exit(EXIT_SUCCESS)
}

/// Called by the arch's trap entry for anything but a system call: says what and where.
pub extern "C" fn trap_report(cause: usize, pc: usize, addr: usize) -> ! {
    let mut out = Console;
    out.str("\nEXCEPTION: ");
    out.str(arch::CAUSE_NAME);
    out.str(" ");
    out.hex(cause as u64);
    out.str(" at pc ");
    out.hex(pc as u64);
    out.str(", address ");
    out.hex(addr as u64);
    out.str("\n");
    if arch::in_semihosting(pc) {
        out.str("(a semihosting call: QEMU needs -semihosting-config enable=on,target=native)\n");
        arch::exit_without_semihosting(EXIT_EXCEPTION)
    }
    arch::exit(EXIT_EXCEPTION)
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    console::panic_message(&mut Console, info);
    arch::exit(EXIT_PANIC)
}
