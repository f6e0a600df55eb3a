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
mod mem;
mod hostile;
mod irq;
mod multiboot;
mod procs;
mod smp;
mod user;
mod workload;

use core::panic::PanicInfo;
use kernel_common::{alloc_phase, kalloc, serial};
use serial::Com1;

/// Version of the workload's shape: bump it whenever expected.toml has to be re-measured.
const WORKLOAD_VERSION: u32 = 1;

/// Rust entry point, called by `_start` (src/boot.rs) with the multiboot registers, on the
/// boot stack, with EBP = 0 so that every frame-pointer walk ends here.
#[no_mangle]
pub extern "C" fn kmain(magic: u32, info: u32) -> ! {
    boot::init_idt(); // first: from here on a fault is reported, not a silent triple fault
    boot::mask_pic();
    serial::init(serial::COM1);
    serial::init(serial::COM2);

    let mut out = Com1;
    out.str("kern-profile example kernel v");
    out.dec(WORKLOAD_VERSION as u64);
    out.str("\n");

    let cfg = multiboot::parse(magic, info);
    out.str("cmdline: ");
    out.bytes(cfg.cmdline);
    out.str("\nrounds=");
    out.dec(cfg.rounds as u64);
    out.str(" alloc_rounds=");
    out.dec(cfg.alloc_rounds as u64);
    match cfg.mode {
        multiboot::Mode::Kernel => {}
        multiboot::Mode::Smp => out.str(" smp=on"),
        multiboot::Mode::User => out.str(" user=on"),
        multiboot::Mode::Hostile => out.str(" hostile=on"),
        multiboot::Mode::Procs => out.str(" procs=on"),
    }
    if cfg.irq {
        out.str(" irq=on");
    }
    out.str("\n");

    match cfg.crash {
        multiboot::Crash::No => {}
        multiboot::Crash::Panic => panic!("crash=panic on the command line"),
        multiboot::Crash::Fault => unsafe { core::arch::asm!("ud2", options(noreturn)) },
    }

    // The two phases run one after the other, never interleaved, so that the CPU profile
    // and the allocation trace each have a clean, known shape.
    // The CPU phase runs one of three workloads (README.md): the kernel's own (default),
    // one per CPU (smp=on), or a user program with system calls (user=on).
    match cfg.mode {
        multiboot::Mode::Kernel => {
            out.str("phase cpu: start\n");
            let checksum = match cfg.irq {
                false => workload::run_workload(cfg.rounds),
                true => irq::run(cfg.rounds, &mut out),
            };
            out.str("phase cpu: done, checksum ");
            out.hex(checksum as u64);
            out.str("\n");
        }
        multiboot::Mode::Smp => {
            out.str("phase cpu: start (smp)\n");
            let checksum = smp::run(cfg.rounds, &mut out);
            out.str("phase cpu: done, checksum ");
            out.hex(checksum as u64);
            out.str("\n");
        }
        multiboot::Mode::User => {
            out.str("phase user: start\n");
            let code = user::run(cfg.rounds, cfg.mem_end, &mut out);
            out.str("phase user: done, exit code ");
            out.dec(code as u64);
            out.str("\n");
        }
        multiboot::Mode::Procs => {
            out.str("phase procs: start\n");
            let code = procs::run(cfg.rounds, cfg.mem_end, &mut out);
            out.str("phase procs: done, exit code ");
            out.dec(code as u64);
            out.str("\n");
        }
        multiboot::Mode::Hostile => {
            out.str("phase hostile: start\n");
            let checksum = hostile::run(cfg.rounds, cfg.mem_end, &mut out);
            out.str("phase hostile: done, checksum ");
            out.hex(checksum as u64);
            out.str("\n");
        }
    }

    out.str("phase alloc: start\n");
    alloc_phase::run(cfg.alloc_rounds);
    alloc_phase::report(&mut out);
    out.str("phase alloc: done\n");

    out.str("done\n");
    if cfg.halt {
        out.str("halted\n");
        boot::halt()
    }
    boot::exit(boot::EXIT_SUCCESS)
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    use core::fmt::Write;
    let mut out = Com1;
    // core::fmt only here: Debian's precompiled `core` has no frame pointers, which does not
    // matter on this path.
    let _ = write!(out, "\nPANIC: {}", info.message());
    if let Some(loc) = info.location() {
        let _ = write!(out, " at {}:{}", loc.file(), loc.line());
    }
    out.str("\n");
    boot::exit(boot::EXIT_PANIC)
}
