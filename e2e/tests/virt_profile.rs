//! The riscv64 and aarch64 example kernels profiled with the real plugin in a real
//! qemu-system-riscv64 / qemu-system-aarch64 (`virt` board), against their expected.toml:
//! sample counts; self shares against the same run's `exact=on` counts and the documented
//! ones; every documented caller found, leaves without a frame record included (the
//! aggregator's leaf and prologue correction, from call-frame information and, on the same
//! ELF without it, from prologue analysis); `--per-cpu` under `-smp 4` with `smp=on`; the
//! user/kernel split with `--user` (`user=on`); the allocation views of the memtrace the
//! kernels write through semihosting; and bad input: the other architecture's ELF, and guests
//! the plugin does not support.
//!
//! Each test runs on both architectures (`NAME::riscv64`, `NAME::aarch64`) and skips with a
//! message when that architecture's QEMU or kernel is missing (a failure under
//! `KP_E2E=required`, as scripts/test.sh runs them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kern_profile_e2e::*;

/// Prime, and far from any divisor of a round, so that samples fall evenly over a round's
/// instructions.
const PERIOD: u64 = 7_919;
const VCPUS: u32 = 4;
const ARCHES: [&str; 2] = ["riscv64", "aarch64"];
/// Sampled shares must be this close to the exact ones.
const SHARE_TOLERANCE: f64 = 0.02;
/// Instructions per function by which the documented `fixed + per_round * rounds` model may
/// miss (examples/common/shares.py's SLACK).
const MODEL_SLACK: u64 = 8;

/// `mod NAME { riscv64, aarch64 }`: the test function `NAME(arch)` on each architecture.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn riscv64() {
                super::$name("riscv64")
            }
            #[test]
            fn aarch64() {
                super::$name("aarch64")
            }
        }
    )*};
}

on_both!(
    samples_follow_the_instructions,
    self_shares_match_exact_counts,
    documented_callers_are_found,
    prologue_analysis_names_the_same_stacks,
    per_cpu_under_smp,
    user_kernel_split,
    system_calls_are_rooted_at_the_classically_started_program,
    allocation_views_from_the_memtrace,
    an_elf_of_the_other_architecture_is_refused,
    delay_mode_samples_by_host_time,
);

type Runs = [OnceLock<Run>; 2];

fn cached(runs: &'static Runs, arch: &str, boot: impl FnOnce() -> Run) -> &'static Run {
    let i = ARCHES.iter().position(|a| *a == arch).unwrap();
    runs[i].get_or_init(boot)
}

/// The CPU phase at the documented rounds, `exact=on`, with the memtrace: one per
/// architecture, shared by the tests.
fn cpu_run(arch: &str) -> &'static Run {
    static RUNS: Runs = [OnceLock::new(), OnceLock::new()];
    cached(&RUNS, arch, || {
        boot_virt(arch, "cpu", &format!("period={PERIOD},exact=on"), "", &[])
    })
}

/// `smp=on` under `-smp 4`.
fn smp_run(arch: &str) -> &'static Run {
    static RUNS: Runs = [OnceLock::new(), OnceLock::new()];
    let smp = VCPUS.to_string();
    cached(&RUNS, arch, || {
        boot_virt(
            arch,
            "smp",
            &format!("period={PERIOD}"),
            "smp=on",
            &["-smp", &smp, "-accel", "tcg,thread=multi"],
        )
    })
}

/// `user=on`, `exact=on`.
fn user_run(arch: &str) -> &'static Run {
    static RUNS: Runs = [OnceLock::new(), OnceLock::new()];
    cached(&RUNS, arch, || {
        boot_virt(
            arch,
            "user",
            &format!("period={PERIOD},exact=on"),
            "user=on",
            &[],
        )
    })
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn folded(raw: &Path, arch: &str, extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    folded_of(raw, &virt_kernel(arch), extra)
}

fn text(raw: &Path, kernel: &Path, extra: &[&str]) -> String {
    let mut args = vec![path(raw), path(kernel), "-f", "text", "-o", "-"];
    args.extend_from_slice(extra);
    kern_profile(&args)
}

fn int(v: &toml::Value) -> u64 {
    v.as_integer().unwrap() as u64
}

/// Samples whose stack (inline markers removed) is exactly `chain`.
fn with_stack(stacks: &[(Vec<String>, u64)], chain: &[String]) -> u64 {
    stacks
        .iter()
        .filter(|(s, _)| {
            s.iter()
                .map(|f| f.trim_end_matches("_[i]"))
                .eq(chain.iter().map(String::as_str))
        })
        .map(|(_, n)| n)
        .sum()
}

/// The numbers of the text report's correction line, by their labels.
struct Correction {
    inserted: u64,
    leaf: u64,
    by_cfi: u64,
    by_prologue_analysis: u64,
    overwritten: u64,
}

fn correction(report: &str) -> Correction {
    let line = report
        .lines()
        .find(|l| l.starts_with("# leaf and prologue correction: "))
        .unwrap_or_else(|| panic!("no correction line in\n{report}"));
    let after = |label: &str| -> u64 {
        let at = line
            .find(label)
            .unwrap_or_else(|| panic!("no `{label}` in {line}"));
        let digits: String = line[at + label.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().unwrap_or_else(|_| panic!("{line}"))
    };
    Correction {
        inserted: after("correction: "),
        leaf: after("(leaf "),
        by_cfi: after("by call-frame information "),
        by_prologue_analysis: after("by prologue analysis "),
        overwritten: after("callers lost: "),
    }
}

fn samples_follow_the_instructions(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let run = cpu_run(arch);
    let c = census(&run.raw);
    assert_eq!(c.header.arch.name(), arch);
    assert_eq!(c.user, 0, "no user mode in the CPU phase");
    let insns = whole_run_instructions(&c, PERIOD);
    // The kernel's own work is all but the few instructions of QEMU's reset vector.
    let e = expected_virt(arch);
    let kernel_insns = int(&e["cpu"]["kernel_insns"]) as f64;
    assert!(
        insns as f64 > kernel_insns && (insns as f64) < kernel_insns * 1.001,
        "{insns} instructions, {kernel_insns} documented in .text"
    );
    let checksum = e["kernel"]["checksum"].as_str().unwrap();
    assert!(
        run.com1.contains(&format!("checksum {checksum}")),
        "{}",
        run.com1
    );
}

fn self_shares_match_exact_counts(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let raw = &cpu_run(arch).raw;
    let e = expected_virt(arch);
    let rounds = int(&e["cpu"]["rounds"]);
    assert_eq!(rounds, int(&e["kernel"]["default_rounds"]));
    let sampled = kernel_self_counts(&folded(raw, arch, &[]));
    let exact = kernel_self_counts(&folded(raw, arch, &["--exact"]));
    let exact_outer = self_counts(&folded(raw, arch, &["--exact", "--no-inline"]));
    let functions = expected_functions_of(&e);
    assert!(functions.len() >= 8);
    for f in functions {
        // The recording's exact counts are the documented ones, instruction for instruction.
        let count = |m: &BTreeMap<String, u64>| m.get(&f.symbol).copied().unwrap_or(0);
        assert_eq!(
            count(&exact),
            f.per_round_inline * rounds + f.fixed_inline,
            "{} (exact, inline view)",
            f.symbol
        );
        assert_eq!(
            count(&exact_outer),
            f.per_round * rounds + f.fixed,
            "{} (exact, --no-inline)",
            f.symbol
        );
        let (got, x) = (share(&sampled, &f.symbol), share(&exact, &f.symbol));
        assert!(
            (got - x).abs() < SHARE_TOLERANCE,
            "{}: {got:.4} sampled, {x:.4} exact",
            f.symbol
        );
        assert!(
            (got - f.self_share_inline).abs() < SHARE_TOLERANCE,
            "{}: {got:.4} sampled, {:.4} documented",
            f.symbol,
            f.self_share_inline
        );
    }
    let top = sampled.iter().max_by_key(|(_, n)| **n).unwrap().0;
    assert_eq!(top, e["kernel"]["hottest"].as_str().unwrap());
}

/// `delay=` (the host timer) on the `virt` boards: samples by host time, no instruction
/// counts, the workload named. As on i386 (e2e/tests/cpu_delay.rs), host time and
/// instructions weigh code differently, except where the code is the same: hot_leaf and
/// cold_leaf run one loop body, 10 times more often in hot_leaf.
fn delay_mode_samples_by_host_time(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    // 100,000 ticks a second asked for; fewer delivered where wake-ups are costly (the timer
    // keeps under a tenth of a core: about 5,000 a second in a virtual machine) or the host
    // is loaded (the plugin says how many it skipped): 610 kernel samples in the default
    // rounds at load 13.
    let ((run, counts), total) = alone(|| {
        with_enough_samples(2_000, |rounds| {
            let run = boot_virt(
                arch,
                "delay",
                "delay=10",
                &format!("rounds={rounds} alloc_rounds=0"),
                &[],
            );
            let counts = kernel_self_counts(&folded(&run.raw, arch, &[]));
            let total = counts.values().sum();
            ((run, counts), total)
        })
    });
    let c = census(&run.raw);
    assert!(c.truncation.is_none(), "{:?}", c.truncation);
    let stats = c.stats.expect("a statistics record at exit");
    assert!(
        stats.vcpu_instructions.is_empty(),
        "delay= counts no instructions"
    );
    let timer = c.host_timer.expect("a host-timer record with delay=");
    assert_timer_spacing(&timer, 10, &run.stderr);
    let armed = timer.vcpus[0].armed_ticks;
    assert!(
        c.samples <= armed,
        "{} samples for {armed} armed ticks",
        c.samples
    );
    assert!(total > 2_000, "only {total} kernel samples at delay=10");
    let e = expected_virt(arch);
    let doc = expected_functions_of(&e);
    let documented = |n: &str| {
        doc.iter()
            .find(|f| f.symbol == n)
            .unwrap()
            .self_share_inline
    };
    let (hot, cold) = ("kernel::workload::hot_leaf", "kernel::workload::cold_leaf");
    assert_same_body_ratio(&counts, hot, cold, documented(hot) / documented(cold));
    let sampled = |n: &str| counts.get(n).copied().unwrap_or(0) as f64;
    // Host time against instructions. riscv64's TCG runs the same loop at different speeds
    // from run to run: its hot_leaf took 0.435 to 0.668 of the samples in 5 whole runs of the
    // kernel built at the start of 2026-11-26's session, 0.596 to 0.794 in 5 of today's (whose
    // code moved: irq=on, the classic user start), for 0.589 of the instructions; CI runs
    // failed at 15 points. aarch64's held 0.565 to 0.586 for 0.544.
    let bound = if arch == "riscv64" { 0.25 } else { 0.15 };
    for f in doc.iter().filter(|f| f.self_share_inline > 0.01) {
        let got = sampled(&f.symbol) / total as f64;
        assert!(
            (got - f.self_share_inline).abs() < bound,
            "{}: {got:.4} sampled, {:.4} of instructions",
            f.symbol,
            f.self_share_inline
        );
    }
    let top = counts.iter().max_by_key(|(_, n)| **n).unwrap().0;
    assert_eq!(top, e["kernel"]["hottest"].as_str().unwrap());
}

fn documented_callers_are_found(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let raw = &cpu_run(arch).raw;
    let e = expected_virt(arch);
    let edges = call_tree_of(&e);
    let stacks = folded(raw, arch, &[]);
    let samples: u64 = stacks.iter().map(|(_, n)| n).sum();
    let mut checked = 0;
    for (stack, n) in &stacks {
        let names: Vec<&str> = stack.iter().map(|s| s.trim_end_matches("_[i]")).collect();
        checked += check_callers(&names, &edges, *n);
        if names.iter().any(|f| f.starts_with("kernel::workload::")) {
            assert_eq!(
                &names[..3],
                ["_start", "kmain", "kernel::workload::run_workload"],
                "{}",
                names.join(";")
            );
        }
    }
    // Nearly every sample is in the workload, four or more documented frames deep.
    assert!(
        checked > 3 * samples,
        "only {checked} frames checked of {samples} samples"
    );
    // Leaves without a frame record of their own, each under its whole documented chain:
    // their callers came from the return-address register.
    let chain = |names: &[&str]| -> Vec<String> {
        ["_start", "kmain", "run_workload"]
            .iter()
            .chain(names)
            .map(|s| match *s {
                "_start" | "kmain" => s.to_string(),
                s => format!("kernel::workload::{s}"),
            })
            .collect()
    };
    let self_n = self_counts(&stacks);
    let leaves = strings(&e["kernel"]["leaves_without_frame_record"]);
    for (leaf, parents) in [
        ("hot_leaf", &["stage_outer", "stage_middle"][..]),
        ("cold_leaf", &["stage_outer"][..]),
        ("blend", &["stage_outer"][..]),
    ] {
        let name = format!("kernel::workload::{leaf}");
        assert!(
            leaves.contains(&name),
            "{name} is documented without a record"
        );
        let mut names: Vec<&str> = parents.to_vec();
        names.push(leaf);
        let n = with_stack(&stacks, &chain(&names));
        assert!(n > 1000, "{name}: {n} samples");
        assert_eq!(
            n,
            self_n[&name],
            "{name}: samples outside {:?}",
            chain(&names)
        );
    }
    // Recursion as deep as documented; the inlined function under its host.
    let levels = int(&e["kernel"]["recursion"]["levels"]) as usize;
    let deepest = stacks
        .iter()
        .map(|(s, _)| {
            s.iter()
                .filter(|f| *f == "kernel::workload::recurse")
                .count()
        })
        .max()
        .unwrap();
    assert_eq!(deepest, levels);
    let inl = &e["kernel"]["inlined"];
    let (func, into) = (
        inl["function"].as_str().unwrap(),
        inl["into"].as_str().unwrap(),
    );
    assert!(stacks
        .iter()
        .any(|(s, _)| s.ends_with(&[into.to_string(), format!("{func}_[i]")])));
    // The report says what was corrected, and how.
    let c = correction(&text(raw, &virt_kernel(arch), &[]));
    let in_leaves: u64 = leaves
        .iter()
        .map(|l| self_n.get(l).copied().unwrap_or(0))
        .sum();
    assert!(
        c.leaf >= in_leaves,
        "{} leaf frames, {in_leaves} samples in leaves",
        c.leaf
    );
    assert!(
        c.by_cfi as f64 >= 0.999 * c.inserted as f64,
        "{} of {}",
        c.by_cfi,
        c.inserted
    );
    assert_eq!(c.overwritten, 0);
}

/// `ARCH-linux-gnu-objcopy`, which built the kernel.
fn objcopy(arch: &str) -> &'static str {
    match arch {
        "riscv64" => "riscv64-linux-gnu-objcopy",
        _ => "aarch64-linux-gnu-objcopy",
    }
}

fn prologue_analysis_names_the_same_stacks(arch: &'static str) {
    if skip_virt(arch) || skip_unless(&[Need::Program(objcopy(arch))]) {
        return;
    }
    let run = cpu_run(arch);
    let k = virt_kernel(arch);
    let bare: PathBuf = run.dir.join("kernel-without-cfi.elf");
    let status = Command::new(objcopy(arch))
        .args([
            "--remove-section",
            ".eh_frame",
            "--remove-section",
            ".debug_frame",
        ])
        .args([path(&k), path(&bare)])
        .status()
        .unwrap();
    assert!(status.success());
    let sorted = |mut v: Vec<(Vec<String>, u64)>| {
        v.sort();
        v
    };
    let with = sorted(folded_of(&run.raw, &k, &[]));
    let without = sorted(folded_of(&run.raw, &bare, &[]));
    assert!(
        with == without,
        "the stacks differ without call-frame information"
    );
    let (a, b) = (
        correction(&text(&run.raw, &k, &[])),
        correction(&text(&run.raw, &bare, &[])),
    );
    assert_eq!(b.by_cfi, 0);
    assert_eq!(b.by_prologue_analysis, a.inserted);
    assert_eq!((b.inserted, b.leaf), (a.inserted, a.leaf));
}

fn per_cpu_under_smp(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let run = smp_run(arch);
    let c = census(&run.raw);
    assert_eq!(c.header.vcpus, VCPUS);
    let stats = c.stats.expect("a statistics record at exit");
    assert_eq!(stats.dropped, 0);
    for (cpu, &insns) in stats.vcpu_instructions.iter().enumerate() {
        let n = c.per_vcpu.get(&(cpu as u32)).copied().unwrap_or(0);
        let want = insns as f64 / PERIOD as f64;
        assert!(
            (n as f64 - want).abs() / want < 0.01,
            "vCPU {cpu}: {n} samples for {insns} instructions"
        );
    }
    let e = expected_virt(arch);
    let smp = &e["smp"];
    assert_eq!(int(&smp["vcpus"]), VCPUS as u64);
    let docs = smp["cpu"].as_array().unwrap();
    let own_of = |d: &toml::Value| d["own"].as_str().unwrap().to_string();
    let shared = e["kernel"]["smp"]["shared"].as_str().unwrap();
    let all = folded(&run.raw, arch, &["--per-cpu"]);
    for (cpu, d) in docs.iter().enumerate() {
        let mine = cpu_stacks(&all, cpu);
        let alone = folded(&run.raw, arch, &["--cpu", &cpu.to_string()]);
        assert_eq!(
            self_counts(&mine),
            self_counts(&alone),
            "vCPU {cpu}: --per-cpu and --cpu {cpu} differ"
        );
        let counts = kernel_self_counts(&mine);
        let own = own_of(d);
        // Shares of the rounds' instructions (per round, documented exactly): vCPU 0's
        // total also holds its wait for the others, which varies with timing (aarch64's
        // `wfe` does not halt under TCG).
        let in_rounds: Vec<(Vec<String>, u64)> = mine
            .iter()
            .filter(|(s, _)| s.iter().any(|f| f == "kernel::smp::smp_run"))
            .cloned()
            .collect();
        let round_counts = self_counts(&in_rounds);
        let per_round = int(&d["kernel_insns_per_round"]) as f64;
        for (name, key) in [
            (own.as_str(), "own_per_round"),
            (shared, "shared_per_round"),
        ] {
            let (got, want) = (share(&round_counts, name), int(&d[key]) as f64 / per_round);
            assert!(
                (got - want).abs() < SHARE_TOLERANCE,
                "vCPU {cpu}: {name} {got:.4} of the rounds sampled, {want:.4} documented"
            );
        }
        // The rounds are nearly all of a secondary CPU's work.
        if cpu > 0 {
            let want = d["own_share"].as_float().unwrap();
            let got = share(&counts, &own);
            assert!(
                (got - want).abs() < SHARE_TOLERANCE,
                "vCPU {cpu}: {own} {got:.4} sampled, {want:.4} documented"
            );
        }
        assert_eq!(counts.iter().max_by_key(|(_, n)| **n).unwrap().0, &own);
        for other in docs.iter().map(own_of).filter(|o| *o != own) {
            assert_eq!(counts.get(&other), None, "{other} on vCPU {cpu}");
        }
        // The boot CPU's stacks come from _start, the others' from ap_start; the leaves
        // (no frame record) under smp_round.
        let key = if cpu == 0 {
            "call_chain_bsp"
        } else {
            "call_chain_ap"
        };
        let mut chain = strings(&e["kernel"]["smp"][key]);
        chain.push(own.clone());
        assert_eq!(
            with_stack(&mine, &chain),
            counts[&own],
            "vCPU {cpu}: {own} outside {}",
            chain.join(";")
        );
    }
    let report = text(&run.raw, &virt_kernel(arch), &["--per-cpu"]);
    let line = report
        .lines()
        .find(|l| l.starts_with("# per vCPU: "))
        .unwrap_or_else(|| panic!("no per-vCPU line in\n{report}"));
    assert_eq!(line.matches("cpu ").count(), VCPUS as usize, "{line}");
}

/// `kernel 41.31% (…), user 58.69% (…)` → the user share.
fn split_user_share(line: &str) -> f64 {
    let user = line.split("user ").last().unwrap();
    user.split('%')
        .next()
        .unwrap()
        .trim()
        .parse::<f64>()
        .unwrap()
        / 100.0
}

fn user_kernel_split(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let run = user_run(arch);
    let (k, u) = (virt_kernel(arch), virt_user_elf(arch));
    let with_user = ["--user", path(&u)];
    let e = expected_virt(arch);
    let doc = &e["user"];
    let rounds = int(&doc["rounds"]);
    let stacks = folded_of(&run.raw, &k, &with_user);
    let sampled = kernel_self_counts(&stacks);
    let mut exact_args = vec!["--exact"];
    exact_args.extend_from_slice(&with_user);
    let exact = kernel_self_counts(&folded_of(&run.raw, &k, &exact_args));
    for f in doc["function"].as_array().unwrap() {
        let name = f["symbol"].as_str().unwrap();
        // The documented linear model holds within the measurement's slack (user_main prints
        // the checksum, whose digits take branches of their own).
        let (got, want) = (
            exact.get(name).copied().unwrap_or(0),
            int(&f["per_round"]) * rounds + int(&f["fixed"]),
        );
        assert!(
            got.abs_diff(want) <= MODEL_SLACK,
            "{name} (exact): {got} vs {want}"
        );
        let (got, x, want) = (
            share(&sampled, name),
            share(&exact, name),
            f["self_share"].as_float().unwrap(),
        );
        assert!(
            (got - x).abs() < SHARE_TOLERANCE,
            "{name}: {got:.4} sampled, {x:.4} exact"
        );
        assert!(
            (got - want).abs() < SHARE_TOLERANCE,
            "{name}: {got:.4} vs {want:.4} documented"
        );
    }
    assert_eq!(
        sampled.iter().max_by_key(|(_, n)| **n).unwrap().0,
        "user::user_hot"
    );
    // The program's leaves under its whole chain; system calls inside it.
    let root = format!("[user] {}", u.file_name().unwrap().to_str().unwrap());
    for leaf in ["user::user_hot", "user::user_cold"] {
        let chain: Vec<String> = [
            root.as_str(),
            "_start",
            "user_main",
            "user::run",
            "user::round",
            leaf,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            with_stack(&stacks, &chain),
            sampled[leaf],
            "{leaf} outside {}",
            chain.join(";")
        );
    }
    // The system call's stack: from the kernel's system-call stack down into the user
    // stack below it, across the trap entry (`[syscall]`).
    let syscall = strings(&e["kernel"]["user"]["syscall_chain"]);
    assert_eq!(syscall[0], root);
    assert!(syscall.iter().any(|f| f == "[syscall]"), "{syscall:?}");
    let sys_work = syscall.last().unwrap();
    let in_sys_work = sampled[sys_work];
    assert!(in_sys_work > 1000);
    let full = with_stack(&stacks, &syscall);
    let reach_main: u64 = stacks
        .iter()
        .filter(|(s, _)| s.last() == Some(sys_work) && s.iter().any(|f| f == "user_main"))
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "{arch}: {full} of {in_sys_work} {sys_work} samples have the whole chain, {reach_main} \
         reach user_main"
    );
    assert!(
        reach_main as f64 > 0.95 * in_sys_work as f64,
        "{reach_main} of {in_sys_work} {sys_work} samples reach user_main"
    );
    assert!(
        full as f64 > 0.95 * in_sys_work as f64,
        "{full} of {in_sys_work} {sys_work} samples have the stack {}",
        syscall.join(";")
    );
    let mut kernel_only = with_user.to_vec();
    kernel_only.push("--kernel-only");
    assert!(with_stack(&folded_of(&run.raw, &k, &kernel_only), &syscall) > 0);
    let mut user_only = with_user.to_vec();
    user_only.push("--user-only");
    assert!(folded_of(&run.raw, &k, &user_only)
        .iter()
        .all(|(s, _)| !s.contains(sys_work)));
    // The split by privilege, in the text report, as documented; per vCPU too.
    let mut args = with_user.to_vec();
    args.push("--per-cpu");
    let report = text(&run.raw, &k, &args);
    let line = |prefix: &str| {
        report
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in\n{report}"))
    };
    // Every return address the walks found is code: the aggregator cut no stack.
    assert!(
        !report.contains("return address that is no code"),
        "{report}"
    );
    let all = split_user_share(line("# kernel/user split: "));
    let want = doc["user_share_all"].as_float().unwrap();
    assert!(
        (all - want).abs() < SHARE_TOLERANCE,
        "{all:.4} vs {want:.4}"
    );
    assert_eq!(split_user_share(line("# kernel/user split, cpu 0: ")), all);
    // Privilege as recorded: user-mode samples follow the user program's instructions.
    let c = census(&run.raw);
    let want = int(&doc["user_insns"]) as f64 / PERIOD as f64;
    assert!(
        (c.user as f64 - want).abs() / want < 0.01,
        "{} vs {want:.0}",
        c.user
    );
}

/// The kernel starts the program the classic way (ra / x30 a fake return address of all
/// ones, s0 / x29 left as the kernel had it: src/arch/, `enter_user`): the walks end at the
/// program's first frame, so system calls are rooted at the program, and no user frame is
/// named with a kernel symbol.
fn system_calls_are_rooted_at_the_classically_started_program(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let run = user_run(arch);
    let (k, u) = (virt_kernel(arch), virt_user_elf(arch));
    let stacks = folded_of(&run.raw, &k, &["--user", path(&u)]);
    // The system-call code: the frames after `[syscall]` in the documented chain.
    let chain = strings(&expected_virt(arch)["kernel"]["user"]["syscall_chain"]);
    let at = chain.iter().position(|f| f == "[syscall]").unwrap();
    let code: Vec<&str> = chain[at + 1..].iter().map(String::as_str).collect();
    let (user, kernel) = (elf_names(&u), elf_names(&k));
    let r = syscall_roots(&stacks, &code, &[chain[0].as_str()], &user, &kernel);
    r.assert_rooted(
        &format!("{arch}: system-call samples rooted at {}", chain[0]),
        &stacks,
    );
    // The plugin's walks themselves end there: no sample holds the fake return address.
    use kern_profile_format::{RawReader, Record};
    let mut raw = RawReader::new(std::fs::File::open(&run.raw).unwrap()).unwrap();
    let mut fake = 0;
    while let Some(rec) = raw.next_record().unwrap() {
        if let Record::Sample(s) = rec {
            fake += s.frames().filter(|&a| a == u64::MAX).count();
        }
    }
    println!("{arch}: frames of the fake return address: {fake}");
    assert_eq!(fake, 0, "frames of the fake return address (all ones)");
}

fn allocation_views_from_the_memtrace(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let run = cpu_run(arch);
    let e = expected_virt(arch);
    let mt = path(&run.memtrace);
    assert_eq!(
        std::fs::metadata(mt).unwrap().len(),
        int(&e["memtrace"]["bytes"]),
        "the memtrace written through semihosting"
    );
    let k = virt_kernel(arch);
    let report = alloc_of(&run.memtrace, &k, &["-f", "text", "-o", "-"]);
    let folded_dir = run.dir.join("alloc-folded");
    alloc_of(
        &run.memtrace,
        &k,
        &["-f", "folded", "-o", path(&folded_dir)],
    );
    let svg_dir = run.dir.join("alloc-svg");
    alloc_of(&run.memtrace, &k, &["-o", path(&svg_dir)]);
    let allocators = e["memtrace"]["allocator"].as_table().unwrap();
    assert_eq!(allocators.len(), 2);
    for (name, want) in allocators {
        let block = allocator_block(&report, name);
        for (key, field) in [
            ("allocations", "alloc"),
            ("reallocations", "realloc"),
            ("frees", "free"),
            ("peak live", "peak_live"),
            ("live at end", "live_at_end"),
        ] {
            assert_eq!(report_value(block, key), int(&want[field]), "{name}: {key}");
        }
        assert_eq!(report_value(block, "double frees"), 0, "{name}");
        // The leak view puts every leaked unit under the leaking function, called from the
        // allocation phase of kmain.
        let folded =
            std::fs::read_to_string(folded_dir.join(format!("mem-{name}.folded"))).unwrap();
        let leak_fn = want["leak_function"].as_str().unwrap();
        let leaked = count_through(&parse_folded(&folded), leak_fn);
        assert_eq!(
            leaked,
            int(&want["leaked"]),
            "{name}: units leaked by {leak_fn}"
        );
        assert!(
            parse_folded(&folded)
                .iter()
                .all(|(s, _)| s[..2] == ["_start", "kmain"]),
            "{name}: a stack not rooted in kmain:\n{folded}"
        );
        let svg = std::fs::read_to_string(svg_dir.join(format!("mem-{name}.svg"))).unwrap();
        assert!(svg.contains("leaky_cache_fill"), "mem-{name}.svg");
    }
}

fn an_elf_of_the_other_architecture_is_refused(arch: &'static str) {
    let other = if arch == "riscv64" {
        "aarch64"
    } else {
        "riscv64"
    };
    if skip_virt(arch) || skip_unless(&[Need::VirtKernel(other)]) {
        return;
    }
    let raw = &cpu_run(arch).raw;
    let wrong = virt_kernel(other);
    let out = Command::new(bin())
        .args([path(raw), path(&wrong), "-f", "folded", "-o", "-"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{} is an ELF for {other}, but the samples come from a guest of {arch}",
            wrong.display()
        )),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// 32-bit guests of the same boards: the plugin refuses to load, naming what it supports.
#[test]
fn unsupported_guests_are_refused_at_load() {
    for (arch, qemu) in [
        ("riscv32", "qemu-system-riscv32"),
        ("arm", "qemu-system-arm"),
    ] {
        if skip_unless(&[Need::Qemu(arch), Need::Plugin]) {
            continue;
        }
        let dir = scratch(&format!("refused-{arch}"));
        let raw = dir.join("raw");
        let mut c = Command::new(qemu);
        c.args([
            "-M", "virt", "-display", "none", "-monitor", "none", "-serial", "none",
        ])
        .arg("-plugin")
        .arg(format!("{},out={}", plugin().display(), raw.display()));
        let out = output_with_timeout(c, std::time::Duration::from_secs(60));
        assert!(!out.status.success(), "{qemu} ran with the plugin");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "kern-profile: guest architecture '{arch}' is not supported (i386, x86_64, riscv64 and aarch64 are)"
            )),
            "{err}"
        );
        assert!(!raw.exists(), "{} written", raw.display());
    }
}
