//! Multiboot v1 information: the command line (`-append`) and the memory size.
//!
//! QEMU passes "<kernel path> <-append text>" as the command line; every whitespace-separated
//! `key=value` token is looked at and anything else is ignored.

/// Defaults (see README.md and expected.toml, which are measured for exactly these values).
pub const DEFAULT_ROUNDS: u32 = 10_000;
pub const DEFAULT_ALLOC_ROUNDS: u32 = 32;
/// `rounds` when `smp=on` (rounds of each CPU's own workload, src/smp.rs) and when `user=on`
/// (rounds of the user program, user/main.rs), unless `rounds=` is given.
pub const DEFAULT_SMP_ROUNDS: u32 = 5_000;
pub const DEFAULT_USER_ROUNDS: u32 = 5_000;

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
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    No,
    Panic,
    Fault,
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
        let p = unsafe { info.add(4).read_volatile() } as *const u8;
        let mut len = 0;
        // Bounded: a missing terminator must not walk through all of memory.
        while len < 4096 && unsafe { p.add(len).read_volatile() } != 0 {
            len += 1;
        }
        unsafe { core::slice::from_raw_parts(p, len) }
    } else {
        &[]
    };

    let mut cfg = Config {
        rounds: DEFAULT_ROUNDS,
        alloc_rounds: DEFAULT_ALLOC_ROUNDS,
        crash: Crash::No,
        mode: Mode::Kernel,
        mem_end,
        cmdline,
    };
    let mut rounds = None;
    let (mut smp, mut user) = (false, false);
    for tok in cmdline.split(|&b| b == b' ' || b == b'\t') {
        let Some(eq) = tok.iter().position(|&b| b == b'=') else { continue };
        let (key, val) = (&tok[..eq], &tok[eq + 1..]);
        match key {
            b"rounds" => rounds = Some(number(key, val)),
            b"alloc_rounds" => cfg.alloc_rounds = number(key, val),
            b"crash" => {
                cfg.crash = match val {
                    b"panic" => Crash::Panic,
                    b"fault" => Crash::Fault,
                    _ => panic!("bad value for `crash=`: expected `panic` or `fault`"),
                }
            }
            b"smp" => smp = on_off(key, val),
            b"user" => user = on_off(key, val),
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

fn on_off(key: &[u8], val: &[u8]) -> bool {
    match val {
        b"on" => true,
        b"off" => false,
        _ => panic!("bad value for `{}=`: expected `on` or `off`", core::str::from_utf8(key).unwrap_or("?")),
    }
}

fn number(key: &[u8], val: &[u8]) -> u32 {
    let mut n: u32 = 0;
    if val.is_empty() {
        bad(key);
    }
    for &b in val {
        if !b.is_ascii_digit() {
            bad(key);
        }
        n = match n.checked_mul(10).and_then(|n| n.checked_add((b - b'0') as u32)) {
            Some(n) => n,
            None => bad(key),
        };
    }
    n
}

fn bad(key: &[u8]) -> ! {
    panic!("bad value for `{}=`: expected a decimal u32", core::str::from_utf8(key).unwrap_or("?"))
}
