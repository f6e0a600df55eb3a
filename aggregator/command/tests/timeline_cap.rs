//! `--timeline-samples`: the outputs over time (Firefox, trace) hold at most that many
//! samples, each vCPU's every Nth, each weighing N, with a warning; the outputs that count
//! (folded, text, pprof) still count every sample. On the recorded example kernel
//! (tests/data/example/raw-period-exact, 1257 samples at `period=100000`).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use kern_profile::{Options, OutputFormat, RunReport, TimelineCap, Warning};

fn example(name: &str) -> PathBuf {
    common::data("example").join(name)
}

fn run(format: OutputFormat, cap: TimelineCap) -> (String, RunReport) {
    let opts = Options {
        format,
        timeline_samples: cap,
        ..Options::default()
    };
    let (out, report) = common::runs::cpu(
        &example("raw-period-exact"),
        Some(&example("kernel.elf")),
        &opts,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (String::from_utf8(out).unwrap(), report)
}

fn thinned(report: &RunReport) -> Option<(u64, u64, u64)> {
    report.warnings.iter().find_map(|w| match w {
        Warning::TimelineThinned {
            held,
            total,
            stride,
            ..
        } => Some((*held, *total, *stride)),
        _ => None,
    })
}

/// The Firefox profile's self weight by leaf function, and the weights' sum.
fn firefox_leaves(out: &str) -> (BTreeMap<String, i64>, i64) {
    let v: serde_json::Value = serde_json::from_str(out).unwrap();
    let shared = &v["shared"];
    let name_of = |s: u64| {
        let frame = shared["stackTable"]["frame"][s as usize].as_u64().unwrap() as usize;
        let func = shared["frameTable"]["func"][frame].as_u64().unwrap() as usize;
        let name = shared["funcTable"]["name"][func].as_u64().unwrap() as usize;
        shared["stringArray"][name].as_str().unwrap().to_string()
    };
    let (mut by, mut total) = (BTreeMap::new(), 0);
    for t in v["threads"].as_array().unwrap() {
        let samples = &t["samples"];
        let n = samples["length"].as_u64().unwrap() as usize;
        let weights: Vec<i64> = match samples["weight"].as_array() {
            Some(w) => w.iter().map(|x| x.as_i64().unwrap()).collect(),
            None => vec![1; n],
        };
        for (s, w) in samples["stack"].as_array().unwrap().iter().zip(weights) {
            if let Some(s) = s.as_u64() {
                *by.entry(name_of(s)).or_default() += w;
            }
            total += w;
        }
    }
    (by, total)
}

#[test]
fn the_default_holds_every_sample_of_a_short_recording() {
    let (out, report) = run(OutputFormat::Firefox, TimelineCap::DEFAULT);
    assert_eq!(thinned(&report), None, "{:?}", report.warnings);
    let (_, total) = firefox_leaves(&out);
    assert_eq!(total, 1257);
    assert!(report.summary.contains("1257 of 1257 samples in a Firefox"));
}

#[test]
fn a_capped_firefox_profile_holds_every_nth_sample_weighing_n() {
    let (all, _) = run(OutputFormat::Firefox, TimelineCap::All);
    let (out, report) = run(OutputFormat::Firefox, TimelineCap::AtMost(100));
    // 1257 samples: every 16th is 79 (every 8th would be 158, over 100).
    let (held, total, stride) = thinned(&report).expect("a warning says it is thinned");
    assert_eq!((held, total, stride), (79, 1257, 16));
    assert!(
        report
            .summary
            .contains("79 of 1257 samples (each vCPU's every 16th, each weighing 16)"),
        "{}",
        report.summary
    );
    let warning = report
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>();
    assert!(
        warning.iter().any(|w| w.contains("--timeline-samples 100")),
        "{warning:?}"
    );
    let (capped, weight) = firefox_leaves(&out);
    let (every, n) = firefox_leaves(&all);
    assert_eq!((weight, n), (79 * 16, 1257));
    // The hot functions' shares, from a sixteenth of the samples: within 5 points.
    for (f, &k) in every.iter().filter(|(_, &k)| k * 10 >= n) {
        let want = k as f64 / n as f64;
        let got = capped.get(f).copied().unwrap_or(0) as f64 / weight as f64;
        println!(
            "{f}: {:.1}% of all, {:.1}% of every 16th",
            100.0 * want,
            100.0 * got
        );
        assert!(
            (got - want).abs() <= 0.05,
            "{f}: {got:.3} against {want:.3}"
        );
    }
}

#[test]
fn a_capped_trace_weighs_its_slices() {
    let (out, report) = run(OutputFormat::Trace, TimelineCap::AtMost(100));
    assert_eq!(thinned(&report).map(|t| t.2), Some(16));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["otherData"]["samples"], 79 * 16);
    assert_eq!(v["otherData"]["each_sample_weighs"], 16);
    // The root slices of the vCPU's track (each starting where the last root ended or
    // later) add up to the samples they weigh.
    let mut slices: Vec<(f64, f64, u64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == 0)
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            let end = ts + e["dur"].as_f64().unwrap();
            (ts, end, e["args"]["samples"].as_u64().unwrap())
        })
        .collect();
    slices.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let (mut roots, mut end) = (0u64, f64::MIN);
    for (ts, e, n) in slices {
        if ts >= end {
            roots += n;
            end = e;
        }
    }
    assert_eq!(roots, 79 * 16);
}

#[test]
fn the_counting_outputs_count_every_sample_whatever_the_cap() {
    let (out, report) = run(OutputFormat::Folded, TimelineCap::AtMost(10));
    assert_eq!(thinned(&report), None);
    let total: u64 = out
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(total, 1257);
}
