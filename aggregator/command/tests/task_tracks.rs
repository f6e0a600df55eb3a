//! Guest tasks in the outputs over time (`-f trace`, `-f firefox`) and in `top --by`, on a
//! real recording: the fuzz seed `fuzz/corpus/raw/x86_64-linux-tasks.raw` (a Debian amd64
//! Linux guest's early boot, two vCPUs, with task records), named with
//! tests/data/tiny-x86_64.elf (any x86_64 ELF will do: the tasks are what is checked, not
//! the functions). What a user checks: a track per guest thread under its guest pid, named
//! as `-f text --by task` names them, its samples those the table counts, the task tracks
//! adding up to the vCPU tracks; the live table by process the report's.
//!
//! The samples without a known task (`[no task]`, `[task unknown]`), which this recording
//! has none of, are checked on tasks.rs's synthetic recording.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kern_profile::job::SymbolSources;
use kern_profile::live::profile::LiveProfile;
use kern_profile::live::tail::RawTail;
use kern_profile::live::view::{render, Status, View};
use kern_profile::output::by_task::TaskRow;
use kern_profile::stacks::{KeyBuilder, NameStyle, StackNamer};
use kern_profile::{filter::SampleFilter, Options, OutputFormat, ReportBy};
use serde_json::Value;

fn seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/raw/x86_64-linux-tasks.raw")
}

fn elf() -> PathBuf {
    common::data("tiny-x86_64.elf")
}

fn output(raw: &Path, elf: &Path, opts: &Options) -> String {
    let (out, _) = common::runs::cpu(raw, Some(elf), opts).unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8(out).unwrap()
}

fn in_format(format: OutputFormat) -> Options {
    Options {
        format,
        ..Options::default()
    }
}

/// `-f text --by task`'s rows as (pid, tid) → (commands, samples).
fn by_task(raw: &Path, elf: &Path) -> BTreeMap<(u32, u32), (Vec<String>, u64)> {
    let text = output(
        raw,
        elf,
        &Options {
            by: ReportBy::Task,
            ..in_format(OutputFormat::Text)
        },
    );
    let mut rows: BTreeMap<(u32, u32), (Vec<String>, u64)> = BTreeMap::new();
    for l in text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Overhead"))
        .skip(1)
        .take_while(|l| !l.is_empty())
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        let [_, samples, command, tid, pid] = f[..] else {
            panic!("{l}")
        };
        let r = rows
            .entry((pid.parse().unwrap(), tid.parse().unwrap()))
            .or_default();
        r.0.push(command.to_string());
        r.1 += samples.parse::<u64>().unwrap();
    }
    assert!(!rows.is_empty(), "{text}");
    rows
}

/// A trace's tracks: per (pid, tid), its name and the samples of its root slices; and the
/// processes' names by pid.
type Tracks = BTreeMap<(u64, u64), (String, u64)>;

/// A track's slices: start, end (ns), samples.
type Slices = Vec<(u64, u64, u64)>;

fn trace_tracks(json: &str) -> (Tracks, BTreeMap<u64, String>) {
    let v: Value = serde_json::from_str(json).unwrap();
    let mut tracks: Tracks = BTreeMap::new();
    let mut processes = BTreeMap::new();
    let mut slices: BTreeMap<(u64, u64), Slices> = BTreeMap::new();
    let ns = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
    for e in v["traceEvents"].as_array().unwrap() {
        let at = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let name = || e["args"]["name"].as_str().unwrap().to_string();
        match (e["ph"].as_str().unwrap(), e["name"].as_str().unwrap()) {
            ("M", "process_name") => {
                assert!(processes.insert(at.0, name()).is_none(), "named twice: {e}");
            }
            ("M", "thread_name") => {
                assert!(tracks.insert(at, (name(), 0)).is_none(), "named twice: {e}");
            }
            ("X", _) => {
                let start = ns(&e["ts"]);
                let end = start + ns(&e["dur"]);
                let samples = e["args"]["samples"].as_u64().unwrap();
                slices.entry(at).or_default().push((start, end, samples));
            }
            _ => {}
        }
    }
    for (at, mut s) in slices {
        // Roots: the slices no earlier one of the track contains.
        s.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
        let mut root_end = 0;
        let t = tracks
            .get_mut(&at)
            .unwrap_or_else(|| panic!("{at:?} unnamed"));
        for (start, end, samples) in s {
            if start >= root_end {
                root_end = end;
                t.1 += samples;
            }
        }
    }
    (tracks, processes)
}

#[test]
fn trace_has_a_track_per_guest_thread_under_its_pid() {
    let (raw, elf) = (seed(), elf());
    let rows = by_task(&raw, &elf);
    let json = output(&raw, &elf, &in_format(OutputFormat::Trace));
    let (tracks, processes) = trace_tracks(&json);
    // The vCPU tracks as ever, in a process of a pid no guest process has.
    let vcpu_pid = 4_194_304;
    assert_eq!(processes[&vcpu_pid], "tiny-x86_64.elf");
    let vcpus: Tracks = tracks
        .iter()
        .filter(|(k, _)| k.0 == vcpu_pid)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    assert_eq!(
        vcpus
            .iter()
            .map(|(k, v)| (k.1, v.0.as_str()))
            .collect::<Vec<_>>(),
        [(0, "vCPU 0"), (1, "vCPU 1")]
    );
    let total: u64 = vcpus.values().map(|v| v.1).sum();
    assert_eq!(total, 68);
    // A track per guest thread: its samples and names the table's.
    let tasks: BTreeMap<(u32, u32), (String, u64)> = tracks
        .iter()
        .filter(|(k, _)| k.0 != vcpu_pid)
        .map(|(k, v)| ((k.0 as u32, k.1 as u32), v.clone()))
        .collect();
    assert_eq!(
        tasks.keys().collect::<Vec<_>>(),
        rows.keys().collect::<Vec<_>>()
    );
    for (k, (name, samples)) in &tasks {
        let (commands, n) = &rows[k];
        assert_eq!(samples, n, "{k:?} {name}");
        assert!(
            commands.iter().all(|c| name.contains(c.as_str())),
            "{k:?}: {name} {commands:?}"
        );
    }
    assert_eq!(tasks.values().map(|t| t.1).sum::<u64>(), total);
    // The processes by pid: kthreadd, init before its exec (still swapper/0's name), and
    // every CPU's idle task on pid 0's one track.
    assert_eq!(processes[&2], "[kthreadd]");
    assert_eq!(processes[&1], "swapper/0");
    assert_eq!(tasks[&(0, 0)].0, "[swapper], [swapper/0], [swapper/1]");
    assert_eq!(tasks[&(0, 0)].1, 28);
}

#[test]
fn firefox_has_a_thread_per_guest_thread_in_its_process() {
    let (raw, elf) = (seed(), elf());
    let rows = by_task(&raw, &elf);
    let json = output(&raw, &elf, &in_format(OutputFormat::Firefox));
    let v: Value = serde_json::from_str(&json).unwrap();
    let mut threads: BTreeMap<(String, String), (String, String, u64)> = BTreeMap::new();
    for t in v["threads"].as_array().unwrap() {
        let s = |k: &str| t[k].as_str().unwrap().to_string();
        let samples = t["samples"]["length"].as_u64().unwrap();
        threads.insert((s("pid"), s("tid")), (s("name"), s("processName"), samples));
    }
    let vcpus: Vec<_> = threads
        .iter()
        .filter(|(k, _)| k.0 == "4194304")
        .map(|(_, t)| (t.0.as_str(), t.2))
        .collect();
    assert_eq!(vcpus, [("vCPU 0", 54), ("vCPU 1", 14)]);
    let tasks: BTreeMap<(u32, u32), &(String, String, u64)> = threads
        .iter()
        .filter(|(k, _)| k.0 != "4194304")
        .map(|(k, t)| ((k.0.parse().unwrap(), k.1.parse().unwrap()), t))
        .collect();
    assert_eq!(
        tasks.keys().collect::<Vec<_>>(),
        rows.keys().collect::<Vec<_>>(),
        "guest pids and tids as the guest has them"
    );
    for (k, (name, process, samples)) in &tasks {
        assert_eq!(*samples, rows[k].1, "{k:?} {name}");
        assert!(
            rows[k].0.iter().all(|c| name.contains(c.as_str())),
            "{k:?} {name}"
        );
        assert!(!process.is_empty(), "{k:?}");
    }
    assert_eq!(tasks[&(2, 2)].1, "[kthreadd]");
    assert_eq!(tasks.values().map(|t| t.2).sum::<u64>(), 68);
}

#[test]
fn a_recording_without_tasks_has_the_vcpu_tracks_alone() {
    // tasks.rs's kind of synthetic run, without task records: pid 1, no other process.
    let dir = common::temp_dir("task-tracks-none");
    let raw = common::write(&dir, "plain.raw", &common::synthetic_raw(false));
    let json = output(&raw, &common::tiny_elf(), &in_format(OutputFormat::Trace));
    let (_, processes) = trace_tracks(&json);
    assert_eq!(processes.keys().collect::<Vec<_>>(), [&1]);
}

/// The live table's rows by process, read by `top`'s tail of the recording.
fn live_rows(
    raw: &Path,
    elf: &Path,
    by: ReportBy,
    vcpu: Option<u32>,
) -> (Vec<TaskRow>, Vec<String>) {
    let sources = SymbolSources {
        elf: Some(elf.to_path_buf()),
        ..SymbolSources::default()
    };
    let mut sym = sources.load().unwrap();
    let opts = Options::default();
    let filter = SampleFilter {
        task_keys: true,
        ..SampleFilter::from_options(&opts)
    };
    let keys = KeyBuilder::new(&filter).with_markers(true);
    let mut live = LiveProfile::default();
    let mut tail = RawTail::new(raw);
    tail.poll(|s| live.add(s, &keys, &mut sym)).unwrap();
    let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(&opts, false));
    let table = live.table(&mut namer, &filter.names, tail.tasks(), by);
    let status = Status {
        elapsed: std::time::Duration::from_secs(1),
        exited: None,
        keys: true,
    };
    let view = View {
        by,
        vcpu,
        ..View::default()
    };
    let lines = render(&table, view, &status, 5, (0, 0));
    (table.task_rows(vcpu).to_vec(), lines)
}

#[test]
fn top_by_process_and_by_task_list_the_reports_rows() {
    let (raw, elf) = (seed(), elf());
    for by in [ReportBy::Process, ReportBy::Task] {
        let (rows, lines) = live_rows(&raw, &elf, by, None);
        let opts = Options {
            by,
            ..in_format(OutputFormat::Text)
        };
        let report = common::runs::cpu(&raw, Some(&elf), &opts).unwrap().0;
        let report = String::from_utf8(report).unwrap();
        let table: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("Overhead"))
            .take_while(|l| !l.is_empty())
            .collect();
        // The live table's heading and first rows are the report's.
        let live: Vec<&str> = lines
            .iter()
            .map(String::as_str)
            .skip_while(|l| !l.trim_start().starts_with("Overhead"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(live.len(), 6, "{lines:#?}");
        assert_eq!(rows.iter().map(|r| r.samples).sum::<u64>(), 68);
        // Cell by cell: the columns' widths follow the rows shown.
        let cells = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let want: Vec<_> = table[..6].iter().map(|l| cells(l)).collect();
        let got: Vec<_> = live.iter().map(|l| cells(l)).collect();
        assert_eq!(got, want, "{lines:#?}");
        assert!(
            lines[2].contains(match by {
                ReportBy::Task => "by thread",
                _ => "by process",
            }),
            "{lines:#?}"
        );
        assert!(lines
            .iter()
            .any(|l| l.contains("[t] function/thread/process")));
    }
    // One vCPU's rows: its samples alone.
    let (rows, _) = live_rows(&raw, &elf, ReportBy::Process, Some(1));
    assert_eq!(rows.iter().map(|r| r.samples).sum::<u64>(), 14);
}
