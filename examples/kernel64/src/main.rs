//! kern-profile's x86_64 example guest kernel: a higher-half kernel (code at
//! 0xffffffff80000000 and up) booted by QEMU's multiboot v1 loader through a 32-bit
//! bootstrap, running a CPU workload of known shape, then the i386 kernel's allocation
//! pattern (examples/kernel-common: its allocators and Maestro memtrace records on COM2). It
//! is the fixture of kern-profile's x86_64 end-to-end tests; see README.md for what it does
//! and expected.toml for the numbers the tests check.
//!
//! Built by scripts/guests/build-kernel-x86_64.sh with plain rustc (no Cargo; `core` and
//! examples/kernel-common only).

#![no_std]
#![no_main]

mod boot;
mod irq;
mod mem;
mod multiboot;
mod workload;

use core::panic::PanicInfo;
use kernel_common::{alloc_phase, serial};
use serial::Com1;

/// Version of the workload's shape: bump it whenever expected.toml has to be re-measured.
const WORKLOAD_VERSION: u32 = 1;

/// Rust entry point, called by `_start` (src/boot.rs) with the multiboot registers, on the
/// kernel stack in the higher half, with RBP = 0 so that every frame-pointer walk ends here.
#[no_mangle]
pub extern "C" fn kmain(magic: u32, info: u32) -> ! {
    boot::init_idt(); // first: from here on a fault is reported, not a silent triple fault
    boot::mask_pic();
    serial::init(serial::COM1);
    serial::init(serial::COM2);

    let mut out = Com1;
    out.str("kern-profile example kernel64 v");
    out.dec(WORKLOAD_VERSION as u64);
    out.str("\n");

    let cfg = multiboot::parse(magic, info);
    out.str("cmdline: ");
    out.bytes(cfg.cmdline);
    out.str("\nrounds=");
    out.dec(cfg.rounds as u64);
    out.str(" alloc_rounds=");
    out.dec(cfg.alloc_rounds as u64);
    if cfg.irq {
        out.str(" irq=on");
    }
    out.str("\n");

    match cfg.crash {
        multiboot::Crash::No => {}
        multiboot::Crash::Panic => panic!("crash=panic on the command line"),
        multiboot::Crash::Fault => unsafe { core::arch::asm!("ud2", options(noreturn)) },
    }

    out.str("phase cpu: start\n");
    let checksum = match cfg.irq {
        false => workload::run_workload(cfg.rounds),
        true => irq::run(cfg.rounds, &mut out),
    };
    out.str("phase cpu: done, checksum ");
    out.hex(checksum);
    out.str("\n");

    // After the CPU phase, never interleaved with it, as on i386.
    out.str("phase alloc: start\n");
    alloc_phase::run(cfg.alloc_rounds);
    alloc_phase::report(&mut out);
    out.str("phase alloc: done\n");

    out.str("done\n");
    boot::exit(boot::EXIT_SUCCESS)
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    use core::fmt::Write;
    let mut out = Com1;
    // core::fmt only here (rustup's precompiled x86_64 `core` is built with frame pointers,
    // so even its frames show in stacks).
    let _ = write!(out, "\nPANIC: {}", info.message());
    if let Some(loc) = info.location() {
        let _ = write!(out, " at {}:{}", loc.file(), loc.line());
    }
    out.str("\n");
    boot::exit(boot::EXIT_PANIC)
}
