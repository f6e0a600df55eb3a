//! Multiboot v1 information: the command line (`-append`) and the memory size.
//!
//! QEMU passes "<kernel path> <-append text>" as the command line; every whitespace-separated
//! `key=value` token is looked at and anything else is ignored.

/// Defaults (see README.md and expected.toml, which are measured for exactly these values).
pub const DEFAULT_ROUNDS: u32 = 10_000;
pub const DEFAULT_ALLOC_ROUNDS: u32 = 32;

const MULTIBOOT_MAGIC: u32 = 0x2BAD_B002;
const FLAG_MEM: u32 = 1 << 0;
const FLAG_CMDLINE: u32 = 1 << 2;

pub struct Config {
    pub rounds: u32,
    pub alloc_rounds: u32,
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
    let info = info as *const u32;
    let flags = unsafe { info.read_volatile() };
    if flags & FLAG_MEM != 0 {
        // mem_upper: KiB above 1 MiB. The heaps end at crate::kalloc::HEAP_END.
        let upper_kib = unsafe { info.add(2).read_volatile() };
        let end = 0x10_0000 + upper_kib as usize * 1024;
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

    let mut cfg =
        Config { rounds: DEFAULT_ROUNDS, alloc_rounds: DEFAULT_ALLOC_ROUNDS, crash: Crash::No, cmdline };
    for tok in cmdline.split(|&b| b == b' ' || b == b'\t') {
        let Some(eq) = tok.iter().position(|&b| b == b'=') else { continue };
        let (key, val) = (&tok[..eq], &tok[eq + 1..]);
        match key {
            b"rounds" => cfg.rounds = number(key, val),
            b"alloc_rounds" => cfg.alloc_rounds = number(key, val),
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
