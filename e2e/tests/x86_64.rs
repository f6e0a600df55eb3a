//! The x86_64 example kernel (examples/kernel64: higher half at 0xffffffff80000000, booted
//! through a 32-bit multiboot bootstrap) in a real qemu-system-x86_64 with the real plugin
//! (`period=N`, `exact=on`), aggregated by the real `kern-profile`: shares, callers,
//! symbolization of higher-half addresses and exact counts against
//! examples/kernel64/expected.toml.
//!
//! The kernel is built (or found up to date) by scripts/guests/build-kernel.sh --arch x86_64;
//! `KP_KERNEL64` overrides it.

use std::sync::OnceLock;

use kern_profile_e2e::*;
use kern_profile_format::{Arch, RawReader, Record};

const PERIOD: u64 = 10_000;
/// Rounds of the workload in these runs: ~240 M instructions, 24,000 samples, well under a
/// second of QEMU on the build machine. Expected counts and shares follow from
/// expected.toml's `per_round` and `fixed` (counts are exactly linear in rounds).
const ROUNDS: u64 = 2_000;

fn doc() -> &'static toml::Table {
    static DOC: OnceLock<toml::Table> = OnceLock::new();
    DOC.get_or_init(expected64)
}

fn doc_int(section: &str, key: &str) -> u64 {
    doc()[section][key].as_integer().unwrap() as u64
}

/// Kernel instructions (PCs in kernel64.elf's code) of a run at ROUNDS rounds.
fn kernel_insns() -> u64 {
    doc_int("cpu", "kernel_insns_per_round") * ROUNDS + doc_int("cpu", "kernel_insns_fixed")
}

/// One period=N, exact=on run, shared by the tests of this file.
fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        boot64(
            "x86_64-period-exact",
            &format!("period={PERIOD},exact=on"),
            &format!("rounds={ROUNDS}"),
        )
    })
}

fn folded(raw: &std::path::Path, extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    folded_of(raw, &kernel64(), extra)
}

fn higher_half_base() -> u64 {
    let s = doc()["kernel"]["higher_half_base"].as_str().unwrap();
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn kernel_ran_and_every_sample_is_in_the_file() {
    if skip_x86_64() {
        return;
    }
    let run = run();
    assert!(
        run.com1.contains(&format!("rounds={ROUNDS}")),
        "{}",
        run.com1
    );
    assert!(run.com1.trim_end().ends_with("done"), "{}", run.com1);

    let c = census(&run.raw);
    assert_eq!(c.header.arch, Arch::X86_64);
    let insns = whole_run_instructions(&c, PERIOD);
    // All the guest ran: the kernel's documented instructions plus the firmware's.
    let firmware = doc_int("cpu", "firmware_insns_approx");
    assert!(
        insns > kernel_insns() && insns < kernel_insns() + 2 * firmware,
        "{insns} instructions; kernel {} + firmware ~{firmware}",
        kernel_insns()
    );
}

#[test]
fn self_shares_match_documentation() {
    if skip_x86_64() {
        return;
    }
    let total = kernel_insns() as f64;
    // Inline view (mix_inlined apart from blend), and the symbol view (--no-inline).
    let inline = kernel_self_counts(&folded(&run().raw, &[]));
    let outer = kernel_self_counts(&folded(&run().raw, &["--no-inline"]));
    assert!(inline.values().sum::<u64>() > 20_000, "{inline:?}");
    for f in expected_functions_of(doc()) {
        let want_inline = (f.per_round_inline * ROUNDS + f.fixed_inline) as f64 / total;
        let want_outer = (f.per_round * ROUNDS + f.fixed) as f64 / total;
        let (got_inline, got_outer) = (share(&inline, &f.symbol), share(&outer, &f.symbol));
        assert!(
            (got_inline - want_inline).abs() < 0.02,
            "{}: {got_inline:.4} sampled, {want_inline:.4} documented (inline view)",
            f.symbol
        );
        assert!(
            (got_outer - want_outer).abs() < 0.02,
            "{}: {got_outer:.4} sampled, {want_outer:.4} documented (--no-inline)",
            f.symbol
        );
    }
    let hot = doc()["kernel"]["hottest"].as_str().unwrap();
    let top = inline.iter().max_by_key(|(_, n)| **n).unwrap().0;
    assert_eq!(top, hot, "the hot leaf is the hottest function");
}

#[test]
fn stacks_have_the_documented_callers() {
    if skip_x86_64() {
        return;
    }
    let edges = call_tree_of(doc());
    let root: Vec<&str> = doc()["kernel"]["stack_root"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let rec = &doc()["kernel"]["recursion"];
    let (rec_fn, levels) = (
        rec["function"].as_str().unwrap(),
        rec["levels"].as_integer().unwrap() as usize,
    );
    let inl = &doc()["kernel"]["inlined"];
    let (inl_fn, inl_into) = (
        inl["function"].as_str().unwrap(),
        inl["into"].as_str().unwrap(),
    );
    let (mut checked, mut deepest, mut inlined_seen) = (0u64, 0usize, 0u64);
    for (stack, n) in &folded(&run().raw, &[]) {
        let names: Vec<&str> = stack.iter().map(|s| s.trim_end_matches("_[i]")).collect();
        if !names.iter().any(|f| f.starts_with("kernel64::workload::")) {
            continue;
        }
        assert_eq!(&names[..2], &root[..], "{}", names.join(";"));
        assert!(
            !names.iter().any(|f| is_unnamed(f)),
            "unsymbolized frame: {}",
            names.join(";")
        );
        checked += check_callers(&names, &edges, *n);
        let run_len = names
            .iter()
            .fold((0usize, 0usize), |(cur, best), f| {
                let cur = if *f == rec_fn { cur + 1 } else { 0 };
                (cur, best.max(cur))
            })
            .1;
        deepest = deepest.max(run_len);
        if names.ends_with(&[inl_into, inl_fn]) && stack.last().unwrap().ends_with("_[i]") {
            inlined_seen += n;
        }
    }
    assert!(checked > 80_000, "only {checked} frames checked");
    assert_eq!(deepest, levels, "deepest run of {rec_fn} frames");
    assert!(inlined_seen > 0, "no stack ends in {inl_into};{inl_fn}_[i]");
}

#[test]
fn higher_half_addresses_are_symbolized() {
    if skip_x86_64() {
        return;
    }
    let base = higher_half_base();
    let mut r = RawReader::new(std::fs::File::open(&run().raw).unwrap()).unwrap();
    let (mut high, mut high_frames) = (0u64, 0u64);
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Sample(s) = rec {
            if s.pc >= base {
                high += 1;
                // The whole walk stays in the higher half, down to kmain's return into _start.
                assert!(s.frames().all(|f| f >= base), "pc {:#x}", s.pc);
                high_frames += s.frames().count() as u64;
            }
        }
    }
    assert!(high > 20_000, "{high} samples in the higher half");
    assert!(
        high_frames > 4 * high,
        "{high_frames} frames in {high} samples"
    );
    let stacks = folded(&run().raw, &[]);
    // Unnamed frames (`[firmware]`: SeaBIOS, the multiboot option ROM) are never frames of
    // a sample taken in the kernel. (The firmware's own stacks are not checked: its EBP
    // chains walked as 8-byte records give garbage return addresses.)
    for (stack, n) in &stacks {
        if !is_unnamed(stack.last().unwrap()) {
            assert!(
                !stack.iter().any(|f| is_unnamed(f)),
                "{n}: {}",
                stack.join(";")
            );
        }
    }
    // Every higher-half sample is named; the only other named samples are the 32-bit
    // bootstrap's (a few thousand instructions: at most one sample per PERIOD).
    let named: u64 = kernel_self_counts(&stacks).values().sum();
    assert!(
        named >= high && named - high <= 2,
        "{named} named samples, {high} in the higher half"
    );
}

#[test]
fn exact_counts_match_documentation() {
    if skip_x86_64() {
        return;
    }
    let inline = self_counts(&folded(&run().raw, &["--exact"]));
    let outer = self_counts(&folded(&run().raw, &["--exact", "--no-inline"]));
    for f in expected_functions_of(doc()) {
        assert_eq!(
            inline.get(&f.symbol).copied().unwrap_or(0),
            f.per_round_inline * ROUNDS + f.fixed_inline,
            "{} (inline)",
            f.symbol
        );
        assert_eq!(
            outer.get(&f.symbol).copied().unwrap_or(0),
            f.per_round * ROUNDS + f.fixed,
            "{} (--no-inline)",
            f.symbol
        );
    }
    // The kernel's total, boot and exit included. Not to the instruction: COM1 echoes the
    // command line (the ELF's path, the digits of rounds=), a few dozen instructions a byte.
    let kernel: u64 = kernel_self_counts(&folded(&run().raw, &["--exact"]))
        .values()
        .sum();
    assert!(
        kernel.abs_diff(kernel_insns()) < 5_000,
        "{kernel} kernel instructions counted, {} documented",
        kernel_insns()
    );
}

/// The plugin walks x86_64 guests with 8-byte frame records throughout, also while the vCPU
/// runs the 32-bit bootstrap: there the loader left EBP = 0, so the walk ends at once and a
/// sample is the bootstrap function alone, named from the ELF's symbols at its physical
/// address.
#[test]
fn bootstrap_samples_are_named_and_have_no_callers() {
    if skip_x86_64() {
        return;
    }
    let run = boot64("x86_64-boot", "period=97", "rounds=0");
    let boot: Vec<String> = doc()["kernel"]["boot_code"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut in_boot = 0;
    for (stack, n) in &folded(&run.raw, &[]) {
        // Leaf in the bootstrap (a firmware sample's garbage frames may name anything).
        if boot.contains(stack.last().unwrap()) {
            assert_eq!(stack.len(), 1, "{n}: {}", stack.join(";"));
            in_boot += n;
        }
    }
    // boot32 runs ~2,600 instructions (the page-directory loop), boot64 9.
    assert!(in_boot >= 10, "{in_boot} samples in {boot:?}");
}
