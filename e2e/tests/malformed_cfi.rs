//! A kernel whose `.debug_frame` is laid out as FreePascal's (issue 39, points 2 and 8): the
//! x86_64 example kernel without frame pointers, its `.eh_frame` rewritten as the
//! `.debug_frame` FreePascal 3.2 writes (scripts/guests/build-kernel-freepascal-cfi.sh: FDEs
//! in the 32-bit format with 8-byte CIE pointers, and FDEs of discarded routines that, read
//! as DWARF says, cover the whole kernel). Recorded with `elf=` naming it, against the same
//! kernel with its own `.eh_frame`: the FDEs are read as FreePascal meant them, the discarded
//! routines' refused and counted (at start, in the exit line, in the report's warnings), no
//! frame is invented (a FreePascal unikernel got `[boot]` frames between its own in 99% of
//! its stacks), and as many stacks reach `_start` as with the good tables.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kern_profile_e2e::*;

/// Prime, far from any divisor of a round.
const PERIOD: u64 = 7_919;
/// About 240 M instructions a run: 30,000 samples, about a second of QEMU.
const ROUNDS: u64 = 2_000;
/// What freepascal_cfi.py adds for routines the linker discarded: all refused.
const DISCARDED: u64 = 3;
/// How far below the good tables' rooted share the FreePascal layout's may be (points).
const ROOTED_SLACK: f64 = 2.0;

fn freepascal_kernel() -> PathBuf {
    built_kernel("scripts/guests/build-kernel-freepascal-cfi.sh", &[])
        .unwrap_or_else(|e| panic!("{e}"))
}

type Stacks = Vec<(Vec<String>, u64)>;

/// The run of `kernel` with `elf=` naming it, and its collapsed stacks.
fn profile(kernel: &Path, name: &str) -> (Run, Stacks) {
    let args = format!("period={PERIOD},elf={}", kernel.display());
    let run = boot_kernel("x86_64", kernel, name, &args, &format!("rounds={ROUNDS}"));
    let stacks = folded_of(&run.raw, kernel, &[]);
    (run, stacks)
}

/// What the stacks show: samples in named kernel code, those rooted at `_start`, and those
/// with an unnamed frame (`[boot]`…) between two named ones.
#[derive(Debug)]
struct Shape {
    named: u64,
    rooted: u64,
    invented: u64,
}

impl Shape {
    fn of(stacks: &Stacks) -> Shape {
        let mut s = Shape {
            named: 0,
            rooted: 0,
            invented: 0,
        };
        for (stack, n) in stacks {
            if is_unnamed(stack.last().unwrap()) {
                continue;
            }
            s.named += n;
            if stack[0] == "_start" {
                s.rooted += n;
            }
            let named: Vec<bool> = stack.iter().map(|f| !is_unnamed(f)).collect();
            let first = named.iter().position(|&b| b);
            let between = first.is_some_and(|i| named[i..].iter().any(|&b| !b));
            if between {
                s.invented += n;
            }
        }
        s
    }

    fn rooted_pct(&self) -> f64 {
        100.0 * self.rooted as f64 / self.named.max(1) as f64
    }

    fn invented_pct(&self) -> f64 {
        100.0 * self.invented as f64 / self.named.max(1) as f64
    }
}

/// The share of `stacks`' samples (percent) whose stack is none of `known`'s.
fn strange_pct(stacks: &Stacks, known: &Stacks) -> f64 {
    let known: HashSet<&Vec<String>> = known.iter().map(|(s, _)| s).collect();
    let all: u64 = stacks.iter().map(|(_, n)| n).sum();
    let strange: u64 = stacks
        .iter()
        .filter(|(s, _)| !known.contains(s))
        .map(|(_, n)| n)
        .sum();
    100.0 * strange as f64 / all.max(1) as f64
}

#[test]
fn a_freepascal_debug_frame_is_read_as_it_means() {
    if skip_unless(&[
        Need::Qemu("x86_64"),
        Need::Plugin,
        Need::Bin,
        Need::NoFpKernel("x86_64"),
        Need::Program("python3"),
        Need::Program("objcopy"),
    ]) {
        return;
    }
    let (good, fpc) = (nofp_kernel("x86_64"), freepascal_kernel());
    let (_, good_stacks) = profile(&good, "good-cfi");
    let (run, fpc_stacks) = profile(&fpc, "freepascal-cfi");
    let (g, f) = (Shape::of(&good_stacks), Shape::of(&fpc_stacks));
    let strange = strange_pct(&fpc_stacks, &good_stacks);
    println!(
        "x86_64 without frame pointers, elf=: samples in named code rooted at _start, and \
         with an unnamed frame between named ones\n  .eh_frame:                {:6.2}% rooted, \
         {:6.2}% invented ({} samples)\n  FreePascal's .debug_frame: {:6.2}% rooted, {:6.2}% \
         invented ({} samples); {strange:.2}% of its samples with a stack .eh_frame's never gave",
        g.rooted_pct(),
        g.invented_pct(),
        g.named,
        f.rooted_pct(),
        f.invented_pct(),
        f.named
    );
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("CFI entries"))
        .collect();
    println!("{}", lines.join("\n"));

    // At start: the discarded routines refused, the rest read with their 8-byte pointers.
    let start = format!("kern-profile: elf={}: {DISCARDED} of ", fpc.display());
    let note = run
        .stderr
        .lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no start note {start:?} in:\n{}", run.stderr));
    assert!(
        note.contains(&format!(
            " CFI entries refused (outside the kernel's text {DISCARDED}); the rest are used; "
        )) && note.contains("CFI entries have 8-byte CIE pointers in 32-bit DWARF"),
        "{note}"
    );
    // At exit: the refusals, in the summary line.
    let exit = run
        .stderr
        .lines()
        .find(|l| l.contains(" samples written, "))
        .unwrap_or_else(|| panic!("no exit line in:\n{}", run.stderr));
    assert!(
        exit.contains(&format!("; unwind tables: {DISCARDED} of "))
            && exit.contains(&format!(
                " CFI entries refused (outside the kernel's text {DISCARDED}); output "
            )),
        "{exit}"
    );
    // The report's warnings.
    let out = Command::new(bin())
        .arg(&run.raw)
        .arg(&fpc)
        .args(["-f", "text", "-o", "-"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: unwind tables of kernel64-freepascal-cfi.elf: CFI ")
            && stderr.contains(&format!(
                " refused (outside the kernel's text {DISCARDED}), "
            )),
        "{stderr}"
    );

    // No frame invented, and as many stacks whole as with the kernel's own tables.
    assert_eq!(
        f.invented,
        0,
        "{} samples with an unnamed frame between named ones: {:?}",
        f.invented,
        fpc_stacks
            .iter()
            .filter(|(s, _)| s.iter().any(|f| is_unnamed(f)))
            .take(5)
            .collect::<Vec<_>>()
    );
    // The same rows as .eh_frame's: the same walks (the runs sample the same instructions;
    // a point for what a run's timing may move).
    assert!(
        strange <= 1.0,
        "{strange:.2}% of the samples have a stack the kernel's own tables never gave"
    );
    assert!(
        f.rooted_pct() >= g.rooted_pct() - ROOTED_SLACK,
        "{:.2}% rooted at _start with FreePascal's layout, {:.2}% with .eh_frame",
        f.rooted_pct(),
        g.rooted_pct()
    );
}
