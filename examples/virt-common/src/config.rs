//! The command line (`-append`, from the device tree's `/chosen/bootargs`), parsed by
//! kernel_common::cmdline with the i386 kernel's keys and defaults (examples/kernel/src/multiboot.rs).

use kernel_common::cmdline;
pub use cmdline::Crash;

pub const DEFAULT_ROUNDS: u32 = 10_000;
pub const DEFAULT_ALLOC_ROUNDS: u32 = 32;
pub const DEFAULT_SMP_ROUNDS: u32 = 5_000;
pub const DEFAULT_USER_ROUNDS: u32 = 5_000;

pub struct Config {
    pub rounds: u32,
    pub alloc_rounds: u32,
    pub crash: Crash,
    pub mode: Mode,
    /// `memtrace=FILE`: the host file (relative to QEMU's working directory) the allocation
    /// phase's records go to through semihosting; none without it.
    pub memtrace: Option<&'static [u8]>,
    /// `irq=on`: the default workload with a 1 kHz timer interrupt (irq.rs).
    pub irq: bool,
    pub cmdline: &'static [u8],
}

/// The CPU phase's workload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// workload.rs on the boot CPU (the default).
    Kernel,
    /// `smp=on`: every CPU of the device tree (up to 4) runs its own workload (smp.rs).
    Smp,
    /// `user=on`: the user program (user/main.rs), with system calls (user.rs).
    User,
}

pub fn parse(cmdline: &'static [u8]) -> Config {
    let mut cfg = Config {
        rounds: DEFAULT_ROUNDS,
        alloc_rounds: DEFAULT_ALLOC_ROUNDS,
        crash: Crash::No,
        mode: Mode::Kernel,
        memtrace: None,
        irq: false,
        cmdline,
    };
    let mut rounds = None;
    let (mut smp, mut user) = (false, false);
    for tok in cmdline::tokens(cmdline) {
        let Some((key, val)) = cmdline::key_value(tok) else { continue };
        match key {
            b"rounds" => rounds = Some(cmdline::number(key, val)),
            b"alloc_rounds" => cfg.alloc_rounds = cmdline::number(key, val),
            b"crash" => cfg.crash = cmdline::crash(val),
            b"smp" => smp = cmdline::on_off(key, val),
            b"user" => user = cmdline::on_off(key, val),
            b"irq" => cfg.irq = cmdline::on_off(key, val),
            b"memtrace" if !val.is_empty() => cfg.memtrace = Some(val),
            _ => {}
        }
    }
    cfg.mode = match (smp, user) {
        (false, false) => Mode::Kernel,
        (true, false) => Mode::Smp,
        (false, true) => Mode::User,
        (true, true) => panic!("`smp=on` and `user=on` do not combine: pick one"),
    };
    cfg.rounds = rounds.unwrap_or(match cfg.mode {
        Mode::Kernel => DEFAULT_ROUNDS,
        Mode::Smp => DEFAULT_SMP_ROUNDS,
        Mode::User => DEFAULT_USER_ROUNDS,
    });
    cfg
}
