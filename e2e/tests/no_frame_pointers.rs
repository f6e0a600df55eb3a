//! The example kernels built without frame pointers (scripts/guests/build-kernel.sh
//! --no-frame-pointers: `-C force-frame-pointers=no`, `.eh_frame` kept), walked by the plugin
//! with their DWARF call-frame information alone (`elf=` naming the kernel), against the
//! frame-pointer builds running the same workload (`period=`): each documented function's self
//! and total share within 1 point, every documented caller found and no sample skipping one.
//! The same kernel without `elf=` (frame pointers only, which it has none of) must miss: the
//! comparison can fail.
//!
//! And `irq=on` on the x86 kernels: the timer stub, with neither a frame record nor CFI
//! (`bare_entries`), is crossed from its own instructions into the interrupted workload.
//!
//! Each test runs one architecture (`NAME::i386`, `x86_64`, `riscv64`, `aarch64`); the shares
//! are printed side by side.

use std::collections::BTreeMap;
use std::path::Path;

use kern_profile_e2e::*;

/// Prime, far from any divisor of a round.
const PERIOD: u64 = 7_919;
/// About 240 M instructions a run: 30,000 samples, about a second of QEMU.
const ROUNDS: u64 = 2_000;
/// A share may move this much from the frame-pointer build's (the builds' code differs only
/// in the prologues).
const TOLERANCE: f64 = 0.01;

mod shares_and_callers_match_the_frame_pointer_build {
    #[test]
    fn i386() {
        super::shares_and_callers_match_the_frame_pointer_build("i386")
    }
    #[test]
    fn x86_64() {
        super::shares_and_callers_match_the_frame_pointer_build("x86_64")
    }
    #[test]
    fn riscv64() {
        super::shares_and_callers_match_the_frame_pointer_build("riscv64")
    }
    #[test]
    fn aarch64() {
        super::shares_and_callers_match_the_frame_pointer_build("aarch64")
    }
}

type Stacks = Vec<(Vec<String>, u64)>;

/// Whether `arch`'s test should return at once: an input of the no-frame-pointer runs is
/// missing.
fn skip(arch: &'static str) -> bool {
    skip_unless(&[
        Need::Qemu(arch),
        Need::Plugin,
        Need::Bin,
        Need::NoFpKernel(arch),
    ])
}

/// The collapsed stacks of a `period=` run of `kernel`, with `elf=` naming it when `tables`,
/// and the text report's `# stacks:` line and warnings.
fn profile(arch: &str, kernel: &Path, name: &str, tables: bool) -> (Stacks, String) {
    let mut args = format!("period={PERIOD}");
    if tables {
        args += &format!(",elf={}", kernel.display());
    }
    let run = boot_kernel(arch, kernel, name, &args, &format!("rounds={ROUNDS}"));
    let out = std::process::Command::new(bin())
        .arg(&run.raw)
        .arg(kernel)
        .args(["-f", "text", "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: the text report failed");
    let stacks = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("# stacks of "))
        .unwrap_or_default()
        .to_string();
    let said = format!("{stacks}\n{}", String::from_utf8_lossy(&out.stderr));
    (folded_of(&run.raw, kernel, &[]), said)
}

/// The report's warning that a kernel with unwind tables was walked by frame pointers.
const SHALLOW_WARNING: &str = "has unwind tables";

/// A function's self share and total share (samples with it anywhere on the stack) of the
/// samples taken in the kernel's code, inline markers removed.
fn shares(stacks: &Stacks, symbol: &str) -> (f64, f64) {
    let (mut all, mut own, mut under) = (0, 0, 0);
    for (stack, n) in stacks {
        let leaf = stack.last().unwrap().trim_end_matches("_[i]");
        if is_unnamed(leaf) {
            continue;
        }
        all += n;
        own += if leaf == symbol { *n } else { 0 };
        if stack.iter().any(|f| f.trim_end_matches("_[i]") == symbol) {
            under += n;
        }
    }
    let all = all.max(1) as f64;
    (own as f64 / all, under as f64 / all)
}

/// What the stacks of the kernel without frame pointers (`nofp`) miss against the
/// frame-pointer build's (`fp`): shares more than [`TOLERANCE`] apart, samples that skip a
/// documented caller, documented call edges never seen, workload samples not rooted at
/// `_start;kmain`. `row` gets each function's shares.
fn misses(
    e: &toml::Table,
    fp: &Stacks,
    nofp: &Stacks,
    mut row: impl FnMut(&str, (f64, f64), (f64, f64)),
) -> Vec<String> {
    let mut out = Vec::new();
    for f in expected_functions_of(e) {
        let (a, b) = (shares(fp, &f.symbol), shares(nofp, &f.symbol));
        row(&f.symbol, a, b);
        for (what, x, y) in [("self", a.0, b.0), ("total", a.1, b.1)] {
            if (x - y).abs() >= TOLERANCE {
                out.push(format!(
                    "{}: {what} share {y:.4}, {x:.4} with frame pointers",
                    f.symbol
                ));
            }
        }
    }
    let edges = call_tree_of(e);
    let mut skipped = BTreeMap::new();
    let mut seen = vec![0u64; edges.len()];
    let mut unrooted = 0;
    for (stack, n) in nofp {
        let names: Vec<&str> = stack.iter().map(|s| s.trim_end_matches("_[i]")).collect();
        if let Some(pair) = skipped_caller(&names, &edges) {
            *skipped.entry(pair).or_insert(0) += n;
        }
        for w in names.windows(2) {
            if let Some(i) = edges.iter().position(|(p, c)| p == w[0] && c == w[1]) {
                seen[i] += n;
            }
        }
        let in_workload = names.iter().any(|f| f.contains("::workload::"));
        if in_workload && !names.starts_with(&["_start", "kmain"]) {
            unrooted += n;
        }
    }
    for ((caller, callee), n) in skipped {
        out.push(format!("{n} sample(s) with {callee} called from {caller}"));
    }
    for ((p, c), n) in edges.iter().zip(&seen) {
        if *n == 0 {
            out.push(format!("no sample with {p};{c}"));
        }
    }
    if unrooted > 0 {
        out.push(format!(
            "{unrooted} workload sample(s) not under _start;kmain"
        ));
    }
    out
}

fn shares_and_callers_match_the_frame_pointer_build(arch: &'static str) {
    if skip(arch) {
        return;
    }
    let (fp_kernel, nofp) = (example_kernel(arch), nofp_kernel(arch));
    let e = expected_of(arch);
    let (with_fp, said_fp) = profile(arch, &fp_kernel, "fp", false);
    let (by_cfi, said_cfi) = profile(arch, &nofp, "nofp-elf", true);
    let (without_tables, said_none) = profile(arch, &nofp, "nofp-no-elf", false);
    println!("{arch} fp: {said_fp}\n{arch} cfi: {said_cfi}\n{arch} none: {said_none}");
    // The report tells a kernel walked by the wrong rule: the build without frame pointers
    // walked by them gets the warning naming elf=, the same kernel walked by its tables and
    // the frame-pointer build do not; the tables' walks are named CFI.
    assert!(
        said_none.contains(SHALLOW_WARNING) && said_none.contains("elf="),
        "{arch}: no warning for the kernel without frame pointers walked by them:\n{said_none}"
    );
    assert!(!said_cfi.contains(SHALLOW_WARNING), "{arch}: {said_cfi}");
    assert!(!said_fp.contains(SHALLOW_WARNING), "{arch}: {said_fp}");
    let without: BTreeMap<String, (f64, f64)> = expected_functions_of(&e)
        .iter()
        .map(|f| (f.symbol.clone(), shares(&without_tables, &f.symbol)))
        .collect();
    println!(
        "{arch}: shares of the kernel's samples (%). fp: frame pointers; cfi: none, elf=; \
         none: none, no elf=\n{:<36} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8}",
        "function", "self fp", "cfi", "none", "total fp", "cfi", "none"
    );
    let pct = |x: f64| format!("{:8.2}", 100.0 * x);
    let found = misses(&e, &with_fp, &by_cfi, |symbol, a, b| {
        let c = without[symbol];
        println!(
            "{symbol:<36} {} {} {} | {} {} {}",
            pct(a.0),
            pct(b.0),
            pct(c.0),
            pct(a.1),
            pct(b.1),
            pct(c.1)
        );
    });
    assert!(
        found.is_empty(),
        "{arch} without frame pointers, walked by CFI:\n{}",
        found.join("\n")
    );
    // Without its tables the same kernel's stacks are cut: the checks above see it.
    let cut = misses(&e, &with_fp, &without_tables, |_, _, _| {});
    assert!(
        !cut.is_empty(),
        "{arch} without frame pointers matched the frame-pointer build with no elf="
    );
    println!("{arch} without elf= (expected to miss): {}", cut.join("; "));
}

mod interrupted_stacks_are_whole {
    #[test]
    fn i386() {
        super::interrupted_stacks_are_whole("i386")
    }
    #[test]
    fn x86_64() {
        super::interrupted_stacks_are_whole("x86_64")
    }
    #[test]
    fn riscv64() {
        super::interrupted_stacks_are_whole("riscv64")
    }
    #[test]
    fn aarch64() {
        super::interrupted_stacks_are_whole("aarch64")
    }
}

/// `irq=on` on the kernels without frame pointers: the timer stub pushes no frame record
/// and has no CFI (`bare_entries`, as hobby kernels write it); its instructions say where the
/// interrupted context is (x86: the CPU's frame; riscv64 and aarch64: the trap frame the stub
/// saves on the interrupt stack), and the walk goes from the handler into the interrupted
/// workload, as the frame record does in e2e/tests/interrupts.rs (issue 38).
fn interrupted_stacks_are_whole(arch: &'static str) {
    if skip(arch) {
        return;
    }
    let k = nofp_kernel(arch);
    let args = format!("period=10000,elf={}", k.display());
    let run = boot_kernel(arch, &k, "nofp-irq", &args, "irq=on alloc_rounds=0");
    let e = expected_of(arch);
    let prefix = if arch == "x86_64" {
        "kernel64"
    } else {
        "kernel"
    };
    check_handler_stacks(
        &run,
        &k,
        e["kernel"]["checksum"].as_str().unwrap(),
        &[
            "_start",
            "kmain",
            &format!("{prefix}::irq::run"),
            &format!("{prefix}::workload::run_workload"),
        ],
    );
}
