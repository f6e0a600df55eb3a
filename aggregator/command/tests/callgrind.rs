//! `--exact -f callgrind` on the example kernel's recorded run (tests/data/example,
//! raw-period-exact, exact=on): a golden file, self costs by function equal to the exact
//! folded output's leaves, the workload's call edges with their exact call counts, and
//! valgrind's `callgrind_annotate` reading it: its total is the exact total and its top
//! function the workload's hot leaf (`kernel::workload::hot_leaf`, 60009000 instructions, as
//! tests/golden/example-exact.txt documents); with `--inclusive=yes`, `run_workload` costs
//! what the workload's functions cost. `KP_BLESS=1` rewrites
//! the golden; without `callgrind_annotate` (Debian's valgrind) that check is skipped with a
//! message, or fails with `KP_CALLGRIND_ANNOTATE=require`.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use kern_profile::{Options, OutputFormat, ProfileError};

fn example(name: &str) -> PathBuf {
    common::data("example").join(name)
}

fn run_on(raw: &str, opts: &Options) -> Result<String, ProfileError> {
    let out = common::runs::recorded("example", raw, opts)?;
    Ok(String::from_utf8(out).unwrap())
}

fn run(raw: &str, opts: &Options) -> String {
    run_on(raw, opts).unwrap_or_else(|e| panic!("{e}"))
}

fn exact(format: OutputFormat) -> Options {
    Options {
        format,
        exact: true,
        ..Options::default()
    }
}

/// The documented hot leaf of the example run and its exact count.
const HOT_LEAF: (&str, u64) = ("kernel::workload::hot_leaf", 60_009_000);

/// Self costs by function name, and the `summary:` and `totals:` values.
fn parse(cg: &str) -> (BTreeMap<String, u64>, u64, u64) {
    let mut by_fn = BTreeMap::new();
    let (mut summary, mut totals) = (0, 0);
    let mut current = None;
    let mut call_cost_next = false;
    for l in cg.lines() {
        if std::mem::take(&mut call_cost_next) {
            continue; // a call's inclusive cost, not self cost
        }
        if l.starts_with("calls=") {
            call_cost_next = true;
        } else if let Some(n) = l.strip_prefix("summary: ") {
            summary = n.parse().unwrap();
        } else if let Some(n) = l.strip_prefix("totals: ") {
            totals = n.parse().unwrap();
        } else if let Some(f) = l.strip_prefix("fn=") {
            current = Some(f.to_string());
        } else if l.starts_with(|c: char| c.is_ascii_digit()) {
            let (line, n) = l.split_once(' ').unwrap();
            line.parse::<u32>().unwrap();
            *by_fn.entry(current.clone().unwrap()).or_insert(0) += n.parse::<u64>().unwrap();
        }
    }
    (by_fn, summary, totals)
}

#[test]
fn golden_and_same_self_costs_as_exact_folded() {
    let opts = exact(OutputFormat::Callgrind);
    let cg = run("raw-period-exact", &opts);
    assert_eq!(cg, run("raw-period-exact", &opts), "deterministic");
    common::golden("example-exact.callgrind", cg.as_bytes());
    assert!(cg.starts_with("# callgrind format\nversion: 1\n"), "{cg}");
    assert!(cg.contains("\npositions: line\nevents: Ir\n"), "{cg}");
    let (by_fn, summary, totals) = parse(&cg);
    // The exact folded output's leaves are the functions self costs go to.
    let folded = run("raw-period-exact", &exact(OutputFormat::Folded));
    let mut leaves: BTreeMap<String, u64> = BTreeMap::new();
    for l in folded.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        let leaf = stack.rsplit(';').next().unwrap();
        *leaves.entry(leaf.to_string()).or_insert(0) += n.parse::<u64>().unwrap();
    }
    assert_eq!(by_fn, leaves);
    let total: u64 = leaves.values().sum();
    assert_eq!((summary, totals), (total, total));
    assert_eq!(by_fn[HOT_LEAF.0], HOT_LEAF.1);
    // Lines from DWARF: the hot leaf's are lines of the example's workload.rs.
    let block = cg
        .split("\n\n")
        .find(|b| b.contains(&format!("fn={}\n", HOT_LEAF.0)))
        .unwrap();
    let at = cg.find(&format!("fn={}\n", HOT_LEAF.0)).unwrap();
    let file = cg[..at]
        .rsplit("\nfl=")
        .next()
        .unwrap()
        .lines()
        .next()
        .unwrap();
    assert!(file.ends_with("workload.rs"), "{file}");
    let on_line_0: u64 = block
        .lines()
        .filter_map(|l| l.strip_prefix("0 "))
        .map(|n| n.parse::<u64>().unwrap())
        .sum();
    assert!(on_line_0 * 1000 < HOT_LEAF.1, "{block}");
}

#[test]
fn without_exact_counts_it_is_an_error() {
    let plain = Options {
        format: OutputFormat::Callgrind,
        ..Options::default()
    };
    let e = run_on("raw-period-exact", &plain).unwrap_err().to_string();
    assert!(e.contains("--exact") && e.contains("exact=on"), "{e}");
    let e = run_on("raw-delay", &exact(OutputFormat::Callgrind))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--exact") && e.contains("exact=on"), "{e}");
    let e = run_on(
        "raw-period-exact",
        &Options {
            to_time: Some(1.0),
            ..exact(OutputFormat::Callgrind)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--to-time"), "{e}");
}

#[test]
fn default_output_file_is_callgrind_out() {
    let dir = common::kp_in_fresh_dir(
        &example("raw-period-exact"),
        &example("kernel.elf"),
        &["--exact", "-f", "callgrind", "--no-progress"],
    );
    let cg = std::fs::read_to_string(dir.path().join("callgrind.out")).unwrap();
    assert_eq!(parse(&cg).0[HOT_LEAF.0], HOT_LEAF.1);
}

/// The call edges `caller -> callee: (calls, inclusive cost)`, summed over lines.
fn edges(cg: &str) -> BTreeMap<(String, String), (u64, u64)> {
    let mut out = BTreeMap::new();
    let (mut caller, mut callee) = (String::new(), String::new());
    let mut lines = cg.lines();
    while let Some(l) = lines.next() {
        if let Some(f) = l.strip_prefix("fn=") {
            caller = f.to_string();
        } else if let Some(f) = l.strip_prefix("cfn=") {
            callee = f.to_string();
        } else if let Some(c) = l.strip_prefix("calls=") {
            let calls: u64 = c.split(' ').next().unwrap().parse().unwrap();
            let cost = lines.next().unwrap().split(' ').nth(1).unwrap();
            let e = out
                .entry((caller.clone(), callee.clone()))
                .or_insert((0, 0));
            e.0 += calls;
            e.1 += cost.parse::<u64>().unwrap();
        }
    }
    out
}

/// The workload's functions (the example kernel's `expected.toml`), by their names here.
const WORKLOAD: [&str; 7] = [
    "stage_outer",
    "stage_middle",
    "hot_leaf",
    "cold_leaf",
    "recurse",
    "blend",
    "mix_inlined_[i]",
];

#[test]
fn direct_calls_are_edges_with_exact_counts() {
    let cg = run("raw-period-exact", &exact(OutputFormat::Callgrind));
    let e = edges(&cg);
    let w = |f: &str| format!("kernel::workload::{f}");
    // stage_middle calls hot_leaf once a round (1000 rounds); hot_leaf calls nothing, and
    // is called from there alone: the edge carries all its cost.
    assert_eq!(
        e[&(w("stage_middle"), w("hot_leaf"))],
        (1000, HOT_LEAF.1),
        "{e:?}"
    );
    assert_eq!(e[&(w("run_workload"), w("stage_outer"))].0, 1000);
    // Recursion: recurse calls itself, an edge with no inclusive cost of its own.
    assert!(e[&(w("recurse"), w("recurse"))].0 > 1000, "{e:?}");
    assert_eq!(e[&(w("recurse"), w("recurse"))].1, 0);
    // run_workload's callee costs what the whole workload does (inlined code included).
    let (by_fn, _, _) = parse(&cg);
    let workload: u64 = WORKLOAD.iter().map(|f| by_fn[&w(f)]).sum();
    let outer = e[&(w("run_workload"), w("stage_outer"))].1;
    assert!(
        outer >= workload && outer < workload + workload / 100,
        "{outer} vs {workload}"
    );
}

/// Skips (with a message) or, with `KP_CALLGRIND_ANNOTATE=require`, fails.
fn skip(why: &str) {
    if std::env::var_os("KP_CALLGRIND_ANNOTATE").is_some_and(|v| v == "require") {
        panic!("{why}");
    }
    eprintln!("skipping the callgrind_annotate check: {why}");
}

/// A count as callgrind_annotate prints it (`60,009,000`).
fn number(s: &str) -> u64 {
    s.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("not a count: {s}"))
}

#[test]
fn callgrind_annotate_reads_the_exact_totals_and_hot_leaf() {
    // Valgrind 3.19's callgrind_annotate prints its version and exits 255: judged by what
    // it prints.
    let found = Command::new("callgrind_annotate")
        .arg("--version")
        .output()
        .is_ok_and(|o| {
            o.status.success()
                || o.stdout.starts_with(b"callgrind_annotate")
                || o.stderr.starts_with(b"callgrind_annotate")
        });
    if !found {
        return skip("callgrind_annotate not found (Debian: apt-get install valgrind)");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("callgrind.out");
    std::fs::write(
        &file,
        run("raw-period-exact", &exact(OutputFormat::Callgrind)),
    )
    .unwrap();
    let o = Command::new("callgrind_annotate")
        .arg("--auto=no")
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text_report = run("raw-period-exact", &exact(OutputFormat::Text));
    let total: u64 = text_report
        .lines()
        .find_map(|l| {
            l.strip_prefix("Top ")?
                .rsplit("(of ")
                .next()?
                .strip_suffix("):")
        })
        .unwrap()
        .parse()
        .unwrap();
    let totals = text
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .unwrap_or_else(|| panic!("no totals in\n{text}"));
    assert_eq!(
        number(totals.split_whitespace().next().unwrap()),
        total,
        "{text}"
    );
    // The first row of the function table: `COUNT (SHARE)  FILE:FUNCTION [OBJECT]`.
    let top = text
        .lines()
        .skip_while(|l| !l.contains("file:function"))
        .nth(2)
        .unwrap_or_else(|| panic!("no function table in\n{text}"));
    let count = number(top.split_whitespace().next().unwrap());
    assert_eq!(count, HOT_LEAF.1, "{top}");
    let function = top.split(')').nth(1).unwrap().trim();
    assert!(
        function.ends_with(&format!(":{} [kernel.elf]", HOT_LEAF.0)),
        "{top}"
    );
    // Inclusive costs follow the call edges: run_workload's is the workload's.
    let o = Command::new("callgrind_annotate")
        .args(["--auto=no", "--inclusive=yes"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let row = text
        .lines()
        .find(|l| l.ends_with(":kernel::workload::run_workload [kernel.elf]"))
        .unwrap_or_else(|| panic!("no run_workload in\n{text}"));
    let inclusive = number(row.split_whitespace().next().unwrap());
    let (by_fn, _, _) = parse(&std::fs::read_to_string(&file).unwrap());
    let workload: u64 = WORKLOAD
        .iter()
        .map(|f| by_fn[&format!("kernel::workload::{f}")])
        .sum();
    assert!(
        inclusive >= workload && inclusive < workload + workload / 100,
        "{inclusive} vs {workload}: {row}"
    );
}
