//! `period=N` runs of the example kernel with the real plugin in a real QEMU: sample counts,
//! shares, callers, exact counts and reproducibility against examples/kernel/expected.toml.

use std::sync::OnceLock;

use kern_profile_e2e::*;

const PERIOD: u64 = 10_000;

fn rounds() -> u64 {
    expected()["kernel"]["default_rounds"].as_integer().unwrap() as u64
}

/// One exact=on period run, shared by the tests of this file.
fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| boot("period-exact", &format!("period={PERIOD},exact=on"), ""))
}

fn folded(raw: &std::path::Path, extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    folded_of(raw, &kernel(), extra)
}

#[test]
fn sample_count_is_instructions_over_period() {
    if skip_i386() {
        return;
    }
    let insns = whole_run_instructions(&census(&run().raw), PERIOD);
    // The kernel's own work dominates: the documented instruction count is all but firmware.
    let kernel_insns = expected()["cpu"]["kernel_insns"].as_integer().unwrap() as f64;
    assert!((insns as f64) > kernel_insns && (insns as f64) < kernel_insns * 1.02);
}

#[test]
fn hot_leaf_self_share_matches_documentation() {
    if skip_i386() {
        return;
    }
    let counts = kernel_self_counts(&folded(&run().raw, &[]));
    let hot = hottest();
    let doc = expected_functions()
        .into_iter()
        .find(|f| f.symbol == hot)
        .unwrap()
        .self_share_inline;
    let got = share(&counts, &hot);
    assert!(
        (got - doc).abs() < 0.02,
        "{hot}: {got:.4} sampled, {doc:.4} documented"
    );
    let top = counts.iter().max_by_key(|(_, n)| **n).unwrap().0;
    assert_eq!(top, &hot, "the hot leaf is the hottest function");
}

#[test]
fn text_report_shows_hot_leaf_share() {
    if skip_i386() {
        return;
    }
    let raw = run().raw.to_str().unwrap().to_string();
    let k = kernel();
    let text = kern_profile(&[&raw, k.to_str().unwrap(), "-f", "text"]);
    let hot = hottest();
    let row = text
        .lines()
        .find(|l| l.trim_end().ends_with(&format!(" {hot}")))
        .unwrap_or_else(|| panic!("no row for {hot} in\n{text}"));
    let pct: f64 = row
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    let doc = expected_functions()
        .into_iter()
        .find(|f| f.symbol == hot)
        .unwrap();
    assert!((pct / 100.0 - doc.self_share_inline).abs() < 0.02, "{row}");
}

#[test]
fn no_sample_skips_a_caller() {
    if skip_i386() {
        return;
    }
    let edges = call_tree();
    let stacks = folded(&run().raw, &[]);
    let mut checked = 0;
    for (stack, n) in &stacks {
        let names: Vec<&str> = stack.iter().map(|s| s.trim_end_matches("_[i]")).collect();
        checked += check_callers(&names, &edges, *n);
        if names.iter().any(|f| f.starts_with("kernel::workload::")) {
            assert_eq!(&names[..2], ["_start", "kmain"], "{}", names.join(";"));
        }
    }
    assert!(checked > 100_000, "only {checked} frames checked");
}

#[test]
fn exact_counts_match_documentation() {
    if skip_i386() {
        return;
    }
    let r = rounds();
    let inline = self_counts(&folded(&run().raw, &["--exact"]));
    let outer = self_counts(&folded(&run().raw, &["--exact", "--no-inline"]));
    for f in expected_functions() {
        let want_inline = f.per_round_inline * r + f.fixed_inline;
        let want_outer = f.per_round * r + f.fixed;
        assert_eq!(
            inline.get(&f.symbol).copied().unwrap_or(0),
            want_inline,
            "{} (inline)",
            f.symbol
        );
        assert_eq!(
            outer.get(&f.symbol).copied().unwrap_or(0),
            want_outer,
            "{} (--no-inline)",
            f.symbol
        );
    }
}

/// `exact=only`: the same exact counts, no samples, and the report shows them without
/// `--exact`.
#[test]
fn exact_only_counts_without_sampling() {
    if skip_i386() {
        return;
    }
    let only = boot("exact-only", "exact=only", "");
    let c = census(&only.raw);
    assert_eq!(c.samples, 0);
    assert_eq!(c.header.sampling, kern_profile_format::SamplingMode::Off);
    let r = rounds();
    let counts = self_counts(&folded(&only.raw, &[]));
    for f in expected_functions() {
        assert_eq!(
            counts.get(&f.symbol).copied().unwrap_or(0),
            f.per_round_inline * r + f.fixed_inline,
            "{}",
            f.symbol
        );
    }
    assert!(only.stderr.contains("0 samples written"), "{}", only.stderr);
}

#[test]
fn inlined_function_is_a_frame_of_its_own_unless_no_inline() {
    if skip_i386() {
        return;
    }
    let e = expected();
    let inl = &e["kernel"]["inlined"];
    let (func, into) = (
        inl["function"].as_str().unwrap(),
        inl["into"].as_str().unwrap(),
    );
    let with = folded(&run().raw, &[]);
    assert!(
        with.iter()
            .any(|(s, _)| s.ends_with(&[into.to_string(), format!("{func}_[i]")])),
        "no stack ends in {into};{func}_[i]"
    );
    let without = folded(&run().raw, &["--no-inline"]);
    assert!(without
        .iter()
        .all(|(s, _)| s.iter().all(|f| !f.contains(func))));
    // Its samples went to the function it was inlined into.
    let c = self_counts(&without);
    assert!(share(&c, into) > share(&self_counts(&with), into));
}

#[test]
fn period_runs_are_reproducible() {
    if skip_i386() {
        return;
    }
    let a = self_counts(&folded(&run().raw, &[]));
    let second = boot("period-again", &format!("period={PERIOD}"), "");
    let b = self_counts(&folded(&second.raw, &[]));
    let total: u64 = a.values().sum();
    for name in a.keys().chain(b.keys()) {
        let (x, y) = (
            a.get(name).copied().unwrap_or(0),
            b.get(name).copied().unwrap_or(0),
        );
        assert!(
            x.abs_diff(y) as f64 <= 0.001 * total as f64,
            "{name}: {x} vs {y} of {total} samples"
        );
    }
}
