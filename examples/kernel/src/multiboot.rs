//! Multiboot v1 information: the command line (`-append`, parsed by kernel_common::cmdline)
//! and the memory size.

use kernel_common::cmdline;
pub use cmdline::Crash;

/// Defaults (see README.md and expected.toml, which are measured for exactly these values).
pub const DEFAULT_ROUNDS: u32 = 10_000;
pub const DEFAULT_ALLOC_ROUNDS: u32 = 32;
/// `rounds` when `smp=on` (rounds of each CPU's own workload, src/smp.rs) and when `user=on`
/// (rounds of the user program, user/main.rs), unless `rounds=` is given.
pub const DEFAULT_SMP_ROUNDS: u32 = 5_000;
pub const DEFAULT_USER_ROUNDS: u32 = 5_000;
/// `rounds` when `procs=on`: rounds of each of the two programs, over all their turns
/// (src/procs.rs).
pub const DEFAULT_PROCS_ROUNDS: u32 = 2_000;
/// `rounds` when `hostile=on`: thousands of spin iterations per case (src/hostile.rs).
pub const DEFAULT_HOSTILE_ROUNDS: u32 = 2_000;

const MULTIBOOT_MAGIC: u32 = 0x2BAD_B002;
const FLAG_MEM: u32 = 1 << 0;
const FLAG_CMDLINE: u32 = 1 << 2;

pub struct Config {
    /// Rounds of the CPU phase, whichever workload it runs (see [`Mode`]).
    pub rounds: u32,
    pub alloc_rounds: u32,
    /// `crash=panic` / `crash=fault`: fail on purpose, to test the failure exits.
    pub crash: Crash,
    /// What the CPU phase runs: `smp=on` and `user=on` select the SMP and user-mode workloads.
    pub mode: Mode,
    /// `irq=on`: the default workload with the timer interrupt on (src/irq.rs).
    pub irq: bool,
    /// `halt=on`: at the end, halt for good instead of exiting QEMU (for tests that stop
    /// QEMU themselves, as one stops a real kernel that halted).
    pub halt: bool,
    /// Upper memory end (bytes), when the loader said.
    pub mem_end: Option<usize>,
    pub cmdline: &'static [u8],
}

/// The CPU phase's workload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The kernel workload of src/workload.rs on the boot CPU (the default).
    Kernel,
    /// `smp=on`: every CPU the ACPI MADT lists (up to 4) runs its own workload (src/smp.rs).
    Smp,
    /// `user=on`: the ring-3 program of user/main.rs, with system calls (src/user.rs).
    User,
    /// `hostile=on`: spin loops over frame chains no compiler makes (src/hostile.rs).
    Hostile,
    /// `procs=on`: two user programs linked at the same addresses, each in its own address
    /// space, in turns (src/procs.rs).
    Procs,
}

pub fn parse(magic: u32, info: u32) -> Config {
    if magic != MULTIBOOT_MAGIC {
        panic!("not booted by a multiboot v1 loader (EAX = {:#x})", magic);
    }
    let info = info as *const u32;
    let mut mem_end = None;
    let flags = unsafe { info.read_volatile() };
    if flags & FLAG_MEM != 0 {
        // mem_upper: KiB above 1 MiB. The heaps end at crate::kalloc::HEAP_END.
        let upper_kib = unsafe { info.add(2).read_volatile() };
        let end = 0x10_0000 + upper_kib as usize * 1024;
        mem_end = Some(end);
        if end < crate::kalloc::HEAP_END {
            panic!("{} KiB of upper memory: the heaps need {:#x} bytes of RAM", upper_kib, crate::kalloc::HEAP_END);
        }
    }
    let cmdline: &'static [u8] = if flags & FLAG_CMDLINE != 0 {
        cmdline::read(unsafe { info.add(4).read_volatile() } as *const u8)
    } else {
        &[]
    };

    let mut cfg = Config {
        rounds: DEFAULT_ROUNDS,
        alloc_rounds: DEFAULT_ALLOC_ROUNDS,
        crash: Crash::No,
        mode: Mode::Kernel,
        irq: false,
        halt: false,
        mem_end,
        cmdline,
    };
    let mut rounds = None;
    let (mut smp, mut user, mut hostile, mut procs) = (false, false, false, false);
    for tok in cmdline::tokens(cmdline) {
        let Some((key, val)) = cmdline::key_value(tok) else { continue };
        match key {
            b"rounds" => rounds = Some(cmdline::number(key, val)),
            b"alloc_rounds" => cfg.alloc_rounds = cmdline::number(key, val),
            b"crash" => cfg.crash = cmdline::crash(val),
            b"smp" => smp = cmdline::on_off(key, val),
            b"user" => user = cmdline::on_off(key, val),
            b"hostile" => hostile = cmdline::on_off(key, val),
            b"procs" => procs = cmdline::on_off(key, val),
            b"irq" => cfg.irq = cmdline::on_off(key, val),
            b"halt" => cfg.halt = cmdline::on_off(key, val),
            _ => {}
        }
    }
    cfg.mode = match (smp, user, hostile, procs) {
        (false, false, false, false) => Mode::Kernel,
        (true, false, false, false) => Mode::Smp,
        (false, true, false, false) => Mode::User,
        (false, false, true, false) => Mode::Hostile,
        (false, false, false, true) => Mode::Procs,
        _ => panic!("`smp=on`, `user=on`, `hostile=on` and `procs=on` do not combine: pick one"),
    };
    if cfg.irq && cfg.mode != Mode::Kernel {
        panic!("`irq=on` runs the default workload: it does not combine with the other modes");
    }
    cfg.rounds = rounds.unwrap_or(match cfg.mode {
        Mode::Kernel => DEFAULT_ROUNDS,
        Mode::Smp => DEFAULT_SMP_ROUNDS,
        Mode::User => DEFAULT_USER_ROUNDS,
        Mode::Hostile => DEFAULT_HOSTILE_ROUNDS,
        Mode::Procs => DEFAULT_PROCS_ROUNDS,
    });
    cfg
}
