//! The run's configuration from the command line (`-append`), the same keys and defaults in
//! every example kernel; each kernel says which of the other modes it has ([`Keys`]), and a
//! key it does not have is ignored like any unknown one. Parsed by crate::cmdline.

use crate::cmdline::{self, Crash};

/// Defaults (see the kernels' README.md and expected.toml, measured for exactly these).
pub const DEFAULT_ROUNDS: u32 = 10_000;
pub const DEFAULT_ALLOC_ROUNDS: u32 = 32;
/// `rounds` when `smp=on` (rounds of each CPU's own workload) and when `user=on` (rounds of
/// the user program), unless `rounds=` is given.
pub const DEFAULT_SMP_ROUNDS: u32 = 5_000;
pub const DEFAULT_USER_ROUNDS: u32 = 5_000;
/// `rounds` when `procs=on` or `exec=on`: rounds of each of the two programs, over all their turns (i386).
pub const DEFAULT_PROCS_ROUNDS: u32 = 2_000;
/// `rounds` when `hostile=on`: thousands of spin iterations per case (i386).
pub const DEFAULT_HOSTILE_ROUNDS: u32 = 2_000;

/// The CPU phase's workload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The kernel's CPU workload on the boot CPU (the default).
    Kernel,
    /// `smp=on`: every CPU (up to 8 on i386, 4 elsewhere) runs its own workload.
    Smp,
    /// `user=on`: the user program, with system calls.
    User,
    /// `hostile=on`: spin loops over frame chains no compiler makes (i386).
    Hostile,
    /// `procs=on`: two user programs linked at the same addresses, each in its own address
    /// space, in turns (i386).
    Procs,
    /// `exec=on`: the same two programs run one after another in one address space, each
    /// turn loading its program over the other's, as an exec that reuses the page
    /// directory (i386).
    Exec,
    /// `odd_stack=on`: the kernel's CPU workload on a thread stack whose top is odd, as a
    /// FreePascal kernel starts its threads' (x86_64).
    OddStack,
    /// `sched=on`: three named tasks under a round-robin scheduler (crate::sched), for the
    /// plugin's `tasks=example` and `switches=example`.
    Sched,
}

impl Mode {
    /// The command-line key that selects it.
    pub fn key(self) -> &'static str {
        match self {
            Mode::Kernel => "",
            Mode::Smp => "smp",
            Mode::User => "user",
            Mode::Hostile => "hostile",
            Mode::Procs => "procs",
            Mode::Exec => "exec",
            Mode::OddStack => "odd_stack",
            Mode::Sched => "sched",
        }
    }

    fn default_rounds(self) -> u32 {
        match self {
            Mode::Kernel => DEFAULT_ROUNDS,
            Mode::Smp => DEFAULT_SMP_ROUNDS,
            Mode::User => DEFAULT_USER_ROUNDS,
            Mode::Hostile => DEFAULT_HOSTILE_ROUNDS,
            Mode::Procs | Mode::Exec => DEFAULT_PROCS_ROUNDS,
            Mode::OddStack => DEFAULT_ROUNDS,
            Mode::Sched => crate::sched::DEFAULT_SCHED_ROUNDS,
        }
    }
}

/// What a kernel has beyond `rounds`, `alloc_rounds`, `crash` and `irq`.
pub struct Keys {
    /// The modes besides the default one (at most one may be on).
    pub modes: &'static [Mode],
    /// `irq=on` with another mode: a panic (i386), or accepted and unused (virt).
    pub irq_alone: bool,
    /// `halt=on` (i386).
    pub halt: bool,
    /// `memtrace=FILE` (virt).
    pub memtrace: bool,
    /// `spin_panic=SECS` (i386).
    pub spin_panic: bool,
}

pub struct Config {
    /// Rounds of the CPU phase, whichever workload it runs (see [`Mode`]).
    pub rounds: u32,
    pub alloc_rounds: u32,
    /// `crash=panic` / `crash=fault`: fail on purpose, to test the failure exits.
    pub crash: Crash,
    pub mode: Mode,
    /// `irq=on`: the default workload with a timer interrupt on.
    pub irq: bool,
    /// `halt=on`: at the end, halt for good instead of exiting QEMU (for tests that stop
    /// QEMU themselves, as one stops a real kernel that halted).
    pub halt: bool,
    /// `memtrace=FILE`: the host file (relative to QEMU's working directory) the allocation
    /// phase's records go to through semihosting; none without it.
    pub memtrace: Option<&'static [u8]>,
    /// `spin_panic=SECS`: at the end, spin SECS seconds, then panic (0: no).
    pub spin_panic: u32,
    pub cmdline: &'static [u8],
}

pub fn parse(cmdline: &'static [u8], keys: &Keys) -> Config {
    let mut cfg = Config {
        rounds: DEFAULT_ROUNDS,
        alloc_rounds: DEFAULT_ALLOC_ROUNDS,
        crash: Crash::No,
        mode: Mode::Kernel,
        irq: false,
        halt: false,
        memtrace: None,
        spin_panic: 0,
        cmdline,
    };
    let mut rounds = None;
    // Bit n: keys.modes[n] is on.
    let mut on = 0u32;
    for tok in cmdline::tokens(cmdline) {
        let Some((key, val)) = cmdline::key_value(tok) else { continue };
        match key {
            b"rounds" => rounds = Some(cmdline::number(key, val)),
            b"alloc_rounds" => cfg.alloc_rounds = cmdline::number(key, val),
            b"crash" => cfg.crash = cmdline::crash(val),
            b"irq" => cfg.irq = cmdline::on_off(key, val),
            b"halt" if keys.halt => cfg.halt = cmdline::on_off(key, val),
            b"memtrace" if keys.memtrace && !val.is_empty() => cfg.memtrace = Some(val),
            b"spin_panic" if keys.spin_panic => cfg.spin_panic = cmdline::number(key, val),
            _ => {
                if let Some(n) = keys.modes.iter().position(|m| m.key().as_bytes() == key) {
                    match cmdline::on_off(key, val) {
                        true => on |= 1 << n,
                        false => on &= !(1 << n),
                    }
                }
            }
        }
    }
    cfg.mode = match on.count_ones() {
        0 => Mode::Kernel,
        1 => keys.modes[on.trailing_zeros() as usize],
        _ => panic!("{} do not combine: pick one", Listed(keys.modes)),
    };
    if keys.irq_alone && cfg.irq && cfg.mode != Mode::Kernel {
        panic!("`irq=on` runs the default workload: it does not combine with the other modes");
    }
    cfg.rounds = rounds.unwrap_or(cfg.mode.default_rounds());
    cfg
}

/// "`smp=on`, `user=on` and `procs=on`": the panic message's list of modes.
struct Listed(&'static [Mode]);

impl core::fmt::Display for Listed {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            let sep = if i == 0 {
                ""
            } else if i + 1 == self.0.len() {
                " and "
            } else {
                ", "
            };
            write!(f, "{sep}`{}=on`", m.key())?;
        }
        Ok(())
    }
}
