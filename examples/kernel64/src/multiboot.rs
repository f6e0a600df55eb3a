//! Multiboot v1 information: the command line (`-append`), parsed by kernel_common::cmdline.
//! The information structure and the command line lie in low physical memory, which the boot
//! page tables keep identity-mapped.

use kernel_common::cmdline;
pub use cmdline::Crash;

/// Defaults (see README.md and expected.toml, which are measured for exactly these values).
pub const DEFAULT_ROUNDS: u32 = 10_000;
pub const DEFAULT_ALLOC_ROUNDS: u32 = 32;

const MULTIBOOT_MAGIC: u32 = 0x2BAD_B002;
const FLAG_CMDLINE: u32 = 1 << 2;

pub struct Config {
    pub rounds: u32,
    pub alloc_rounds: u32,
    /// `crash=panic` / `crash=fault`: fail on purpose, to test the failure exits.
    pub crash: Crash,
    /// `irq=on`: the CPU workload with the timer interrupt on (src/irq.rs).
    pub irq: bool,
    pub cmdline: &'static [u8],
}

pub fn parse(magic: u32, info: u32) -> Config {
    if magic != MULTIBOOT_MAGIC {
        panic!("not booted by a multiboot v1 loader (EAX = {:#x})", magic);
    }
    let info = info as u64 as *const u32;
    let flags = unsafe { info.read_volatile() };
    let cmdline: &'static [u8] = if flags & FLAG_CMDLINE != 0 {
        cmdline::read(unsafe { info.add(4).read_volatile() } as u64 as *const u8)
    } else {
        &[]
    };

    let mut cfg =
        Config { rounds: DEFAULT_ROUNDS, alloc_rounds: DEFAULT_ALLOC_ROUNDS, crash: Crash::No, irq: false, cmdline };
    for tok in cmdline::tokens(cmdline) {
        let Some((key, val)) = cmdline::key_value(tok) else { continue };
        match key {
            b"rounds" => cfg.rounds = cmdline::number(key, val),
            b"alloc_rounds" => cfg.alloc_rounds = cmdline::number(key, val),
            b"crash" => cfg.crash = cmdline::crash(val),
            b"irq" => cfg.irq = cmdline::on_off(key, val),
            _ => {}
        }
    }
    cfg
}
