//! Whether system calls' stacks are rooted at the program that made them: the share of
//! samples in a kernel's system-call code whose stack starts at `[user] PROG`, goes through
//! the program's own frames only and then `[syscall]`; and how many frames of the user part
//! of any stack carry a kernel symbol's name (a user address named from the kernel).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The code-symbol names of an ELF, demangled without Rust's hashes (as the aggregator
/// names frames), from binutils' `nm -C`.
pub fn elf_names(elf: &Path) -> BTreeSet<String> {
    let out = Command::new("nm")
        .arg("-C")
        .arg(elf)
        .output()
        .unwrap_or_else(|e| panic!("nm -C {}: {e} (binutils: scripts/setup.sh)", elf.display()));
    assert!(out.status.success(), "nm -C {}", elf.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.splitn(3, ' ').nth(2))
        .map(|n| strip_hash(n).to_string())
        .collect()
}

/// The CR3 the example kernel printed for `program` on COM1 in `mode`'s line
/// (`procs: user-b.elf at 0x4000000, cr3 0x111000` → `0x111000`).
pub fn cr3_on_com1(com1: &str, mode: &str, program: &str) -> String {
    let line = com1
        .lines()
        .find(|l| l.starts_with(&format!("{mode}: {program} at ")))
        .unwrap_or_else(|| panic!("no {mode} line of {program} on COM1:\n{com1}"));
    line.rsplit("cr3 ").next().unwrap().trim().to_string()
}

/// `kernel::user::run::h0123456789abcdef` → `kernel::user::run`.
fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, h)) if h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()) => head,
        _ => name,
    }
}

/// The frames the aggregator names kernel entries and stack switches.
pub const BOUNDARIES: &[&str] = &[
    "[syscall]",
    "[interrupt]",
    "[exception]",
    "[kernel entry]",
    "[stack switch]",
];

/// Where the user part of a stack rooted at `[user]…` ends: at its first boundary frame, or
/// at the sampled function (a kernel-mode sample in entry code before its frame record,
/// whose walk began in the user's frames).
pub fn user_part_end_of(s: &[String]) -> usize {
    s.iter()
        .position(|f| BOUNDARIES.contains(&f.as_str()))
        .unwrap_or(s.len().saturating_sub(1))
        .max(1)
}

/// The system-call samples of a profile and how they are rooted.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyscallRoots {
    /// Samples whose stack holds one of the system-call code's frames.
    pub syscalls: u64,
    /// Those rooted at a named program: `[user] PROG;` its own frames `;[syscall];…`.
    pub rooted: u64,
    /// Frames (times samples) of the user part of any stack rooted at `[user]…`
    /// ([`user_part_end_of`]) that carry a kernel-only name.
    pub kernel_named: u64,
}

impl SyscallRoots {
    /// `rooted / syscalls`.
    pub fn share(&self) -> f64 {
        self.rooted as f64 / self.syscalls.max(1) as f64
    }

    /// Prints the figures of `what` (`riscv64: ... rooted at [user] x.elf`) and asserts the
    /// issue's: over 1,000 system-call samples, >= 95% of them rooted at the program, no user
    /// frame named with a kernel symbol (`stacks` shown when not).
    pub fn assert_rooted(&self, what: &str, stacks: &[(Vec<String>, u64)]) {
        println!(
            "{what}: {} of {} ({:.2}%); user frames named with kernel symbols: {}",
            self.rooted,
            self.syscalls,
            100.0 * self.share(),
            self.kernel_named
        );
        assert!(self.syscalls > 1000, "{self:?}");
        assert!(self.share() >= 0.95, "{self:?}\n{stacks:?}");
        assert_eq!(self.kernel_named, 0, "{stacks:?}");
    }
}

/// A kernel-mode sample walked within the kernel, under a `--per-process` root (the kernel
/// ran in the program's address space, outside any entry from it): no boundary, a
/// kernel-only leaf, and no program frame right above it. Such a stack has no user part.
fn kernel_only_below_root(s: &[String], user: &BTreeSet<String>) -> bool {
    let crossed = s.iter().any(|f| BOUNDARIES.contains(&f.as_str()));
    let above_leaf = s.len().checked_sub(2).filter(|&i| i >= 1).map(|i| &s[i]);
    !crossed
        && s.last().is_some_and(|leaf| !user.contains(leaf))
        && above_leaf.is_none_or(|f| !user.contains(f))
}

/// Judges `stacks` (folded, root first): system-call samples are those with a frame in
/// `syscall_code`; a program's root is one of `roots`; `user` and `kernel` are the programs'
/// and the kernel's names.
pub fn syscall_roots(
    stacks: &[(Vec<String>, u64)],
    syscall_code: &[&str],
    roots: &[&str],
    user: &BTreeSet<String>,
    kernel: &BTreeSet<String>,
) -> SyscallRoots {
    let mut r = SyscallRoots::default();
    for (s, n) in stacks {
        let user_part_end = s.iter().position(|f| f == "[syscall]");
        if s.first().is_some_and(|f| f.starts_with("[user]")) && !kernel_only_below_root(s, user) {
            let part = &s[1..user_part_end_of(s)];
            let bad = part
                .iter()
                .filter(|f| kernel.contains(*f) && !user.contains(*f))
                .count();
            r.kernel_named += bad as u64 * n;
        }
        if !s.iter().any(|f| syscall_code.contains(&f.as_str())) {
            continue;
        }
        r.syscalls += n;
        let rooted = match (s.first(), user_part_end) {
            (Some(root), Some(end)) if roots.contains(&root.as_str()) && end > 1 => {
                s[1..end].iter().all(|f| user.contains(f))
            }
            _ => false,
        };
        if rooted {
            r.rooted += n;
        }
    }
    r
}
