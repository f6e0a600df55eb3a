//! `kmain`'s progress lines, the same on every example kernel's console (README.md, "COM1"),
//! and its failures on purpose.
//! Printing only: the phases themselves are called from each kernel's `kmain`, whose frame
//! the profiles and the memtrace stacks show above them.

use crate::cmdline::Crash;
use crate::config::{Config, Mode};
use crate::console::Console;

/// Version of the workloads' shape: bump it whenever the expected.toml files have to be
/// re-measured.
pub const WORKLOAD_VERSION: u32 = 1;

/// "kern-profile example NAME v1", then " (ARCH)" when given.
#[inline]
pub fn banner<C: Console>(out: &mut C, name: &str, arch: Option<&str>) {
    out.str("kern-profile example ");
    out.str(name);
    out.str(" v");
    out.dec(WORKLOAD_VERSION as u64);
    if let Some(arch) = arch {
        out.str(" (");
        out.str(arch);
        out.str(")");
    }
    out.str("\n");
}

/// The command line and what was made of it.
#[inline]
pub fn config<C: Console>(out: &mut C, cfg: &Config) {
    out.str("cmdline: ");
    out.bytes(cfg.cmdline);
    out.str("\nrounds=");
    out.dec(cfg.rounds as u64);
    out.str(" alloc_rounds=");
    out.dec(cfg.alloc_rounds as u64);
    if cfg.mode != Mode::Kernel {
        out.str(" ");
        out.str(cfg.mode.key());
        out.str("=on");
    }
    if cfg.irq {
        out.str(" irq=on");
    }
    out.str("\n");
}

/// `crash=panic` / `crash=fault`: fails on purpose (the panic's location is the caller's).
#[inline]
#[track_caller]
pub fn crash(crash: Crash, fault: fn() -> !) {
    match crash {
        Crash::No => {}
        Crash::Panic => panic!("crash=panic on the command line"),
        Crash::Fault => fault(),
    }
}

/// "phase NAME: done, checksum 0x…".
#[inline]
pub fn checksum<C: Console>(out: &mut C, phase: &str, checksum: u64) {
    out.str("phase ");
    out.str(phase);
    out.str(": done, checksum ");
    out.hex(checksum);
    out.str("\n");
}

/// "phase NAME: done, exit code N".
#[inline]
pub fn exit_code<C: Console>(out: &mut C, phase: &str, code: u32) {
    out.str("phase ");
    out.str(phase);
    out.str(": done, exit code ");
    out.dec(code as u64);
    out.str("\n");
}
