//! `kmain`, the run's phases, the panic handler and the trap report: the i386 kernel's
//! (examples/kernel/src/main.rs) over the board's `arch` module.

use crate::config::{self, Crash, Mode};
use crate::console::Console;
use crate::{arch, fdt, irq, smp, user, workload};
use core::panic::PanicInfo;
use kernel_common::{alloc_phase, memtrace};

/// Version of the workload's shape: bump it whenever expected.toml has to be re-measured.
const WORKLOAD_VERSION: u32 = 1;

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
    out.str("kern-profile example kernel v");
    out.dec(WORKLOAD_VERSION as u64);
    out.str(" (");
    out.str(arch::NAME);
    out.str(")\n");

    let dt = fdt::parse(dtb);
    let cfg = config::parse(dt.bootargs);
    out.str("cmdline: ");
    out.bytes(cfg.cmdline);
    out.str("\nrounds=");
    out.dec(cfg.rounds as u64);
    out.str(" alloc_rounds=");
    out.dec(cfg.alloc_rounds as u64);
    match cfg.mode {
        Mode::Kernel => {}
        Mode::Smp => out.str(" smp=on"),
        Mode::User => out.str(" user=on"),
    }
    if cfg.irq {
        out.str(" irq=on");
    }
    out.str("\n");

    match cfg.crash {
        Crash::No => {}
        Crash::Panic => panic!("crash=panic on the command line"),
        Crash::Fault => arch::fault(),
    }

    match cfg.mode {
        Mode::Kernel => {
            out.str("phase cpu: start\n");
            let checksum = match cfg.irq {
                false => workload::run_workload(cfg.rounds),
                true => irq::run(cfg.rounds, &mut out),
            };
            out.str("phase cpu: done, checksum ");
            out.hex(checksum as u64);
            out.str("\n");
        }
        Mode::Smp => {
            out.str("phase cpu: start (smp)\nsmp: ");
            let checksum = smp::run(cfg.rounds, dt.cpus, &mut out);
            out.str("phase cpu: done, checksum ");
            out.hex(checksum as u64);
            out.str("\n");
        }
        Mode::User => {
            out.str("phase user: start\n");
            let code = user::run(cfg.rounds, &mut out);
            out.str("phase user: done, exit code ");
            out.dec(code as u64);
            out.str("\n");
        }
    }

    out.str("phase alloc: start\n");
    if let Some(path) = cfg.memtrace {
        memtrace::open(path);
    }
    alloc_phase::run(cfg.alloc_rounds);
    alloc_phase::report(&mut out);
    out.str("phase alloc: done\n");

    out.str("done\n");
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
    use core::fmt::Write;
    let mut out = Console;
    let _ = write!(out, "\nPANIC: {}", info.message());
    if let Some(loc) = info.location() {
        let _ = write!(out, " at {}:{}", loc.file(), loc.line());
    }
    out.str("\n");
    arch::exit(EXIT_PANIC)
}
