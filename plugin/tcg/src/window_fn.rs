//! `window=0xSTART-0xEND`: sample only while the function at `[START, END)` is on the vCPU's
//! stack. The plugin counts, per vCPU, entries into the function (a block starting at START)
//! and returns from it (a return instruction inside the range) and keeps sampling parked
//! while the count is zero ([`WindowDepth`]); parked, a vCPU costs nothing more than without
//! the plugin's sampling (see plugin/tcg/src/window.rs). A recursive function counts each level.
//! Limits: a task switched away from inside the function leaves the window open on that vCPU;
//! an exit that is no return (longjmp, an exception unwinding past it) leaves it open too.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Parses `0xSTART-0xEND` (hexadecimal, START below END).
pub fn parse_window(value: &str) -> Result<Range<u64>, String> {
    let hex = |s: &str| {
        let d = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .ok_or_else(|| format!("'{s}' is not a 0x-prefixed hexadecimal address"))?;
        u64::from_str_radix(d, 16).map_err(|_| format!("'{s}' is not a hexadecimal address"))
    };
    let (a, b) = value
        .split_once('-')
        .ok_or("expected 0xSTART-0xEND (a function's address range)")?;
    let (a, b) = (hex(a)?, hex(b)?);
    if a >= b {
        return Err("the range is empty: START must be below END".into());
    }
    Ok(a..b)
}

/// What an entry or a return did to a vCPU's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The first entry: start sampling.
    Opened,
    /// The last return: stop sampling.
    Closed,
    /// A nested entry or return, or a return never entered (the window began inside it).
    None,
}

/// Per-vCPU nesting depth of the window function.
#[derive(Debug)]
pub struct WindowDepth {
    depth: Box<[AtomicU32]>,
}

impl WindowDepth {
    pub fn new(vcpus: usize) -> Self {
        WindowDepth {
            depth: (0..vcpus).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Whether `vcpu` is inside the function.
    pub fn inside(&self, vcpu: usize) -> bool {
        self.depth.get(vcpu).is_some_and(|d| d.load(Relaxed) > 0)
    }

    /// `vcpu` entered the function (only its own thread calls this).
    pub fn enter(&self, vcpu: usize) -> Change {
        match self.depth.get(vcpu).map(|d| d.fetch_add(1, Relaxed)) {
            Some(0) => Change::Opened,
            _ => Change::None,
        }
    }

    /// `vcpu` is about to return from the function.
    pub fn leave(&self, vcpu: usize) -> Change {
        let Some(d) = self.depth.get(vcpu) else {
            return Change::None;
        };
        match d.load(Relaxed) {
            0 => Change::None,
            1 => {
                d.store(0, Relaxed);
                Change::Closed
            }
            n => {
                d.store(n - 1, Relaxed);
                Change::None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_window("0x1000-0x10a0"), Ok(0x1000..0x10a0));
        assert_eq!(
            parse_window("0xffffffff81000000-0xffffffff81000100"),
            Ok(0xffff_ffff_8100_0000..0xffff_ffff_8100_0100)
        );
        assert!(parse_window("0x10-0x10")
            .unwrap_err()
            .contains("START must be below"));
        assert!(parse_window("1000-2000")
            .unwrap_err()
            .contains("0x-prefixed"));
        assert!(parse_window("0x10").unwrap_err().contains("0xSTART-0xEND"));
        assert!(parse_window("0x1g-0x20")
            .unwrap_err()
            .contains("not a hexadecimal"));
    }

    #[test]
    fn nesting() {
        let w = WindowDepth::new(2);
        assert_eq!(w.leave(0), Change::None, "a return never entered");
        assert_eq!(w.enter(0), Change::Opened);
        assert_eq!(w.enter(0), Change::None);
        assert!(w.inside(0) && !w.inside(1));
        assert_eq!(w.leave(0), Change::None);
        assert_eq!(w.leave(0), Change::Closed);
        assert!(!w.inside(0));
        assert_eq!(w.enter(5), Change::None, "a vCPU beyond the table");
    }
}
