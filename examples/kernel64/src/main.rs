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
mod odd_stack;
mod user;
mod workload;

use core::panic::PanicInfo;
use kernel_common::cmdline;
use kernel_common::config::{self, Keys, Mode};
use kernel_common::console::{self, Console};
use kernel_common::serial::Com1;
use kernel_common::x86::{self, exit, multiboot};
use kernel_common::{alloc_phase, phases};

/// Besides the default run's keys (`rounds`, `alloc_rounds`, `crash`, `irq`), `odd_stack=on`:
/// the CPU workload in a thread whose stack top is odd (src/odd_stack.rs), and `user=on`: the
/// user program with system calls instead (src/user.rs; `syscall=on` with it: by the
/// `SYSCALL` instruction rather than `int 0x80`), and `sched=on`: named tasks under a
/// scheduler (kernel_common::sched); none with `irq`.
const KEYS: Keys = Keys { modes: &[Mode::OddStack, Mode::User, Mode::Sched], irq_alone: true, halt: false, memtrace: false, spin_panic: false };

/// Rust entry point, called by `_start` (src/boot.rs) with the multiboot registers, on the
/// kernel stack in the higher half, with RBP = 0 so that every frame-pointer walk ends here.
#[no_mangle]
pub extern "C" fn kmain(magic: u32, info: u32) -> ! {
    let mut out = x86::init();
    phases::banner(&mut out, "kernel64", None);
    let info = multiboot::read(magic, info);
    let cfg = config::parse(info.cmdline, &KEYS);
    phases::config(&mut out, &cfg);
    phases::crash(cfg.crash, exit::fault);

    if cfg.mode == Mode::Sched {
        out.str("phase sched: start\n");
        let checksum = kernel_common::sched::run(cfg.rounds);
        phases::checksum(&mut out, "sched", checksum as u64);
    } else if cfg.mode == Mode::User {
        // The user program in ring 3 instead of the kernel's CPU workload.
        out.str("phase user: start\n");
        let code = user::run(cfg.rounds, syscall_instr(cfg.cmdline), info.mem_end, &mut out);
        phases::exit_code(&mut out, "user", code);
    } else {
        out.str("phase cpu: start\n");
        let checksum = match (cfg.mode, cfg.irq) {
            (Mode::OddStack, _) => odd_stack::run(cfg.rounds, &mut out),
            (_, false) => workload::run_workload(cfg.rounds),
            (_, true) => irq::run(cfg.rounds, &mut out),
        };
        phases::checksum(&mut out, "cpu", checksum);
    }

    // After the CPU phase, never interleaved with it, as on i386.
    out.str("phase alloc: start\n");
    alloc_phase::run(cfg.alloc_rounds);
    alloc_phase::report(&mut out);
    out.str("phase alloc: done\ndone\n");
    exit::exit(exit::EXIT_SUCCESS)
}

/// `syscall=on` (with `user=on`): the program's system calls by the `SYSCALL` instruction.
fn syscall_instr(cmdline: &[u8]) -> bool {
    cmdline::tokens(cmdline)
        .filter_map(cmdline::key_value)
        .filter(|&(key, _)| key == b"syscall")
        .fold(false, |_, (key, val)| cmdline::on_off(key, val))
}

#[panic_handler]
fn panic(info: &PanicInfo) -> ! {
    // core::fmt only here (rustup's precompiled x86_64 `core` is built with frame pointers,
    // so even its frames show in stacks).
    console::panic_message(&mut Com1, info);
    exit::exit(exit::EXIT_PANIC)
}
