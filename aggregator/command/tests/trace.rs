//! `-f trace` (Chrome trace-event JSON): a golden file of a window of the example kernel's
//! recorded `delay=` run (tests/data/example), the JSON parsed back (serde_json): a track per
//! vCPU named `vCPU N`, timestamps in order per track, slices nested, and the slices folded
//! back into the same stacks and counts as `-f folded` (per vCPU: `--per-cpu`); boundary
//! markers' slices and the host timer's halted time on a synthetic run. No independent
//! reader is run: Perfetto's trace processor (the `perfetto` Python package) downloads a
//! binary, and chrome://tracing's importer is no package. `KP_BLESS=1` rewrites the golden.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kern_profile::{Options, OutputFormat, ProfileError};
use serde_json::Value;

fn data(dir: &str, name: &str) -> PathBuf {
    common::data(dir).join(name)
}

fn run_with(raw: &Path, elf: Option<&Path>, opts: &Options) -> Result<String, ProfileError> {
    let (out, report) = common::runs::cpu(raw, elf, opts)?;
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    Ok(String::from_utf8(out).unwrap())
}

fn run(dir: &str, raw: &str, opts: &Options) -> String {
    let out = common::runs::recorded(dir, raw, opts).unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8(out).unwrap()
}

fn trace_opts() -> Options {
    Options {
        format: OutputFormat::Trace,
        ..Options::default()
    }
}

/// A slice of the trace: track, start and end (ns), name, category, samples.
#[derive(Debug, Clone)]
struct Slice {
    tid: u64,
    start: u64,
    end: u64,
    name: String,
    cat: String,
    samples: u64,
}

fn ns(v: &Value) -> u64 {
    (v.as_f64().unwrap() * 1000.0).round() as u64
}

/// The parsed trace: track names by tid, and the slices in file order.
fn parse(json: &str) -> (Value, BTreeMap<u64, String>, Vec<Slice>) {
    let v: Value = serde_json::from_str(json).unwrap();
    let mut tracks = BTreeMap::new();
    let mut slices = Vec::new();
    for e in v["traceEvents"].as_array().unwrap() {
        let tid = e["tid"].as_u64().unwrap();
        match e["ph"].as_str().unwrap() {
            "M" if e["name"] == "thread_name" => {
                tracks.insert(tid, e["args"]["name"].as_str().unwrap().to_string());
            }
            "M" => {}
            "X" => {
                let start = ns(&e["ts"]);
                slices.push(Slice {
                    tid,
                    start,
                    end: start + ns(&e["dur"]),
                    name: e["name"].as_str().unwrap().to_string(),
                    cat: e["cat"].as_str().unwrap().to_string(),
                    samples: e["args"]["samples"].as_u64().unwrap(),
                });
            }
            ph => panic!("unexpected phase {ph}: {e}"),
        }
    }
    (v, tracks, slices)
}

/// Checks each track's slices are in time order and nest; folds them back into stacks (a
/// slice's self samples: its samples less its children's), `cpu N;` first with `per_cpu`.
/// Also returns each track's samples (its root slices').
fn refold(slices: &[Slice], per_cpu: bool) -> (String, BTreeMap<u64, u64>) {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_track: BTreeMap<u64, u64> = BTreeMap::new();
    let mut tids: Vec<u64> = slices.iter().map(|s| s.tid).collect();
    tids.dedup();
    let mut seen = std::collections::BTreeSet::new();
    for tid in tids {
        assert!(seen.insert(tid), "track {tid}'s slices are not together");
        let track: Vec<&Slice> = slices.iter().filter(|s| s.tid == tid).collect();
        assert!(
            track.windows(2).all(|w| w[0].start <= w[1].start),
            "timestamps of track {tid} out of order"
        );
        // Open slices: (slice, path, children's samples).
        let mut open: Vec<(&Slice, String, u64)> = Vec::new();
        let mut flush = |(s, path, children): (&Slice, String, u64)| {
            assert!(s.samples >= children, "{s:?}");
            if s.samples > children {
                *lines.entry(path).or_insert(0) += s.samples - children;
            }
        };
        for s in track {
            while let Some((top, _, _)) = open.last() {
                let inside = s.start < top.end || s.start == top.start;
                if inside {
                    assert!(s.end <= top.end, "{s:?} overlaps {top:?}");
                    break;
                }
                flush(open.pop().unwrap());
            }
            let path = match open.last_mut() {
                Some((_, p, children)) => {
                    *children += s.samples;
                    format!("{p};{}", s.name)
                }
                None => {
                    *per_track.entry(tid).or_insert(0) += s.samples;
                    if per_cpu {
                        format!("cpu {tid};{}", s.name)
                    } else {
                        s.name.clone()
                    }
                }
            };
            open.push((s, path, 0));
        }
        while let Some(o) = open.pop() {
            flush(o);
        }
    }
    let folded = lines.iter().map(|(k, n)| format!("{k} {n}\n")).collect();
    (folded, per_track)
}

#[test]
fn golden_of_a_window_of_the_delay_run() {
    let opts = Options {
        from_time: Some(0.2),
        to_time: Some(0.205),
        ..trace_opts()
    };
    let json = run("example", "raw-delay", &opts);
    assert_eq!(json, run("example", "raw-delay", &opts), "deterministic");
    common::golden("example-delay-window.trace.json", json.as_bytes());
    let (v, tracks, slices) = parse(&json);
    assert_eq!(tracks, BTreeMap::from([(0, "vCPU 0".to_string())]));
    assert_eq!(v["displayTimeUnit"], "ns");
    assert_eq!(v["otherData"]["input"], "raw-delay");
    let (refolded, per_track) = refold(&slices, false);
    let folded = run(
        "example",
        "raw-delay",
        &Options {
            format: OutputFormat::Folded,
            ..opts.clone()
        },
    );
    assert_eq!(refolded, folded);
    assert_eq!(per_track[&0], v["otherData"]["samples"].as_u64().unwrap());
    // Within the window.
    assert!(slices
        .iter()
        .all(|s| s.start >= 200_000_000 && s.start < 205_000_000));
}

#[test]
fn every_vcpu_a_track_and_the_stacks_of_folded() {
    for (dir, raw) in [
        ("example", "raw-delay"),
        ("example", "raw-period-exact"),
        ("example-modes", "raw-smp"),
    ] {
        let json = run(dir, raw, &trace_opts());
        let (v, tracks, slices) = parse(&json);
        let per_cpu = tracks.len() > 1;
        let folded = run(
            dir,
            raw,
            &Options {
                format: OutputFormat::Folded,
                per_cpu,
                ..Options::default()
            },
        );
        let (refolded, per_track) = refold(&slices, per_cpu);
        assert_eq!(refolded, folded, "{raw}");
        // Samples per track: as the folded stacks of each vCPU count them.
        let total: u64 = per_track.values().sum();
        assert_eq!(total, v["otherData"]["samples"].as_u64().unwrap(), "{raw}");
        let text = run(
            dir,
            raw,
            &Options {
                format: OutputFormat::Text,
                ..Options::default()
            },
        );
        assert!(
            text.contains(&format!("# samples: {total} read, {total} kept")),
            "{text}"
        );
        for (tid, n) in &per_track {
            assert_eq!(tracks[tid], format!("vCPU {tid}"));
            if per_cpu {
                let on_cpu: u64 = folded
                    .lines()
                    .filter(|l| l.starts_with(&format!("cpu {tid};")))
                    .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
                    .sum();
                assert_eq!(*n, on_cpu, "{raw} vCPU {tid}");
            }
        }
        if raw == "raw-smp" {
            assert_eq!(tracks.len(), 4, "{tracks:?}");
        }
    }
}

/// Kernel symbols for the synthetic run: an interrupt handler and a system call.
#[test]
fn interrupts_and_system_calls_are_slices_and_halted_time_a_note() {
    let dir = common::temp_dir("trace-markers");
    let (raw, map) = common::kernel_entries_run(&dir);
    let opts = Options {
        symbols: vec![map],
        ..trace_opts()
    };
    let json = run_with(&raw, None, &opts).unwrap();
    let (v, tracks, slices) = parse(&json);
    assert_eq!(tracks.len(), 2);
    let of = |cat: &str| -> Vec<&Slice> { slices.iter().filter(|s| s.cat == cat).collect() };
    let irq = of("interrupt");
    assert_eq!(irq.len(), 1, "{slices:#?}");
    assert_eq!(
        (irq[0].name.as_str(), irq[0].samples, irq[0].tid),
        ("[interrupt]", 2, 0)
    );
    assert_eq!((irq[0].start, irq[0].end), (200_000, 400_000));
    let sys = of("syscall");
    assert_eq!(sys.len(), 1, "{slices:#?}");
    assert_eq!(
        (sys[0].name.as_str(), sys[0].samples, sys[0].tid),
        ("[syscall]", 2, 1)
    );
    // kmain on vCPU 0 spans all four samples; its last one lasts the median spacing.
    let kmain: Vec<&Slice> = slices
        .iter()
        .filter(|s| s.name == "kmain" && s.tid == 0)
        .collect();
    assert_eq!(kmain.len(), 1, "{kmain:?}");
    assert_eq!(
        (kmain[0].samples, kmain[0].start, kmain[0].end),
        (4, 100_000, 500_000)
    );
    assert_eq!(
        v["otherData"]["halted_ns"],
        serde_json::json!({"vCPU 0": 5_000_000, "vCPU 1": 7_000_000})
    );
    let (refolded, _) = refold(&slices, true);
    let folded = run_with(
        &raw,
        None,
        &Options {
            format: OutputFormat::Folded,
            per_cpu: true,
            ..opts
        },
    )
    .unwrap();
    assert_eq!(refolded, folded);
}

#[test]
fn exact_counts_have_no_trace() {
    let e = run_with(
        &data("example", "raw-period-exact"),
        Some(&data("example", "kernel.elf")),
        &Options {
            exact: true,
            ..trace_opts()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--exact"), "{e}");
}

#[test]
fn default_output_file_is_trace_json() {
    let dir = common::kp_in_fresh_dir(
        &data("example", "raw-delay"),
        &data("example", "kernel.elf"),
        &["-f", "trace", "--no-progress"],
    );
    let json = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    let (_, tracks, _) = parse(&json);
    assert_eq!(tracks.len(), 1);
}
