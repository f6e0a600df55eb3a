//! The command line's tokens and values, shared by the example kernels (the keys and what
//! they set: crate::config).
//!
//! QEMU passes "<kernel path> <-append text>" as the command line; every whitespace-separated
//! `key=value` token is looked at and anything else is ignored. A malformed value is a panic,
//! not a silent default.

/// `crash=panic` / `crash=fault`: fail on purpose, to test the failure exits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    No,
    Panic,
    Fault,
}

/// The NUL-terminated command line at `p` (the multiboot information's `cmdline` field).
#[inline(always)]
pub fn read(p: *const u8) -> &'static [u8] {
    let mut len = 0;
    // Bounded: a missing terminator must not walk through all of memory.
    while len < 4096 && unsafe { p.add(len).read_volatile() } != 0 {
        len += 1;
    }
    unsafe { core::slice::from_raw_parts(p, len) }
}

/// The whitespace-separated tokens of `cmdline`.
#[inline(always)]
pub fn tokens(cmdline: &[u8]) -> impl Iterator<Item = &[u8]> {
    cmdline.split(|&b| b == b' ' || b == b'\t')
}

/// A `key=value` token as `(key, value)`; `None` for anything else.
#[inline(always)]
pub fn key_value(tok: &[u8]) -> Option<(&[u8], &[u8])> {
    let eq = tok.iter().position(|&b| b == b'=')?;
    Some((&tok[..eq], &tok[eq + 1..]))
}

/// The value of `crash=`.
#[inline(always)]
pub fn crash(val: &[u8]) -> Crash {
    match val {
        b"panic" => Crash::Panic,
        b"fault" => Crash::Fault,
        _ => panic!("bad value for `crash=`: expected `panic` or `fault`"),
    }
}

/// An `on`/`off` value. Not `#[inline]`: compiled into the kernel, LLVM kept it out of line.
pub fn on_off(key: &[u8], val: &[u8]) -> bool {
    match val {
        b"on" => true,
        b"off" => false,
        _ => panic!("bad value for `{}=`: expected `on` or `off`", core::str::from_utf8(key).unwrap_or("?")),
    }
}

/// A decimal u32 value.
#[inline]
pub fn number(key: &[u8], val: &[u8]) -> u32 {
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

#[inline]
fn bad(key: &[u8]) -> ! {
    panic!("bad value for `{}=`: expected a decimal u32", core::str::from_utf8(key).unwrap_or("?"))
}
