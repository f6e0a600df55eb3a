//! Multiboot v1 information: the command line (`-append`).
//!
//! QEMU passes "<kernel path> <-append text>" as the command line; every whitespace-separated
//! `key=value` token is looked at and anything else is ignored. The information structure
//! and the command line lie in low physical memory, which the boot page tables keep
//! identity-mapped.

/// Default (see README.md and expected.toml, which are measured for exactly this value).
pub const DEFAULT_ROUNDS: u32 = 10_000;

const MULTIBOOT_MAGIC: u32 = 0x2BAD_B002;
const FLAG_CMDLINE: u32 = 1 << 2;

pub struct Config {
    pub rounds: u32,
    /// `crash=panic` / `crash=fault`: fail on purpose, to test the failure exits.
    pub crash: Crash,
    pub cmdline: &'static [u8],
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
    let info = info as u64 as *const u32;
    let flags = unsafe { info.read_volatile() };
    let cmdline: &'static [u8] = if flags & FLAG_CMDLINE != 0 {
        let p = unsafe { info.add(4).read_volatile() } as u64 as *const u8;
        let mut len = 0;
        // Bounded: a missing terminator must not walk through all of memory.
        while len < 4096 && unsafe { p.add(len).read_volatile() } != 0 {
            len += 1;
        }
        unsafe { core::slice::from_raw_parts(p, len) }
    } else {
        &[]
    };

    let mut cfg = Config { rounds: DEFAULT_ROUNDS, crash: Crash::No, cmdline };
    for tok in cmdline.split(|&b| b == b' ' || b == b'\t') {
        let Some(eq) = tok.iter().position(|&b| b == b'=') else { continue };
        let (key, val) = (&tok[..eq], &tok[eq + 1..]);
        match key {
            b"rounds" => cfg.rounds = number(key, val),
            b"crash" => {
                cfg.crash = match val {
                    b"panic" => Crash::Panic,
                    b"fault" => Crash::Fault,
                    _ => panic!("bad value for `crash=`: expected `panic` or `fault`"),
                }
            }
            _ => {}
        }
    }
    cfg
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
