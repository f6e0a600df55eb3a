//! Guest tasks (format record kind 9): each sample runs in its vCPU's last recorded task;
//! the text report's tasks line, `--by task|process`, `--task`/`--process`, `--per-task`
//! roots and pprof's task labels, on a synthetic recording of two vCPUs.
//!
//! The kernel is tests/data/tiny.elf. Its 20 samples, in file order (vCPUs interleaved):
//! 2 before vCPU 0's first task record; `worker` (tid 71 of process `gzip`, pid 70) 10,
//! on vCPU 0 then on vCPU 1; `gzip` (tid 70) 4; the kernel thread `kworker/0:1` (12) 3; 1
//! in a task that could not be read.

mod common;

use std::path::PathBuf;

use common::tiny::*;
use kern_profile::{Options, OutputFormat, ReportBy, RunReport};
use kern_profile_format::{
    encode_sample_v2, encode_stats, CpuMode, Privilege, SampleExtras, TaskIdentity, TaskRecord,
    TaskUnknown, TASK_NAME_LEN, VERSION_2,
};

fn name(s: &str) -> [u8; TASK_NAME_LEN] {
    let mut n = [0; TASK_NAME_LEN];
    n[..s.len()].copy_from_slice(s.as_bytes());
    n
}

fn task(tid: u32, pid: u32, thread: &str, process: &str, kernel_thread: bool) -> TaskIdentity {
    TaskIdentity {
        address: 0xc800_0000 + u64::from(tid) * 0x400,
        tid,
        pid,
        kernel_thread,
        thread_name: name(thread),
        process_name: name(process),
    }
}

/// The recording, and one alike without task records.
struct Fixture {
    raw: PathBuf,
    plain: PathBuf,
}

fn fixture(test: &str) -> Fixture {
    let worker = task(71, 70, "worker", "gzip", false);
    let gzip = task(70, 70, "gzip", "gzip", false);
    let kworker = task(12, 12, "kworker/0:1", "kworker/0:1", true);
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    common::header(2, false).encode_version(VERSION_2, &mut out);
    common::header(2, false).encode_version(VERSION_2, &mut plain);
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    let mut t = 0;
    let mut n = 0u64;
    let mut sample = |out: &mut Vec<u8>, plain: &mut Vec<u8>, vcpu: u32, pc: u64| {
        t += 1000;
        n += 1;
        let frames: &[u64] = match pc {
            LEAF_SQUARE | LEAF_LOOP => &full,
            MIDDLE_BODY => &full[1..],
            _ => &[],
        };
        let s = common::sample(vcpu, t, pc, frames);
        let x = SampleExtras {
            mode: CpuMode::Paging,
            privilege: Privilege::Kernel,
            return_register: None,
            page_table_base: Some(0x0010_f000),
        };
        encode_sample_v2(out, 4, &s, &x);
        encode_sample_v2(plain, 4, &s, &x);
    };
    let switch = |out: &mut Vec<u8>, vcpu: u32, task: Result<TaskIdentity, TaskUnknown>| {
        TaskRecord {
            vcpu,
            time_ns: 0,
            task,
        }
        .encode(out)
    };
    let (o, p) = (&mut out, &mut plain);
    for _ in 0..2 {
        sample(o, p, 0, START_LOOP);
    }
    switch(o, 0, Ok(worker));
    for _ in 0..3 {
        sample(o, p, 0, LEAF_SQUARE);
    }
    switch(o, 1, Ok(gzip));
    for vcpu in [1, 0, 1, 0, 0] {
        let pc = if vcpu == 0 { LEAF_SQUARE } else { MIDDLE_BODY };
        sample(o, p, vcpu, pc);
    }
    switch(o, 0, Ok(kworker));
    for vcpu in [0, 1, 0, 1, 0] {
        let pc = if vcpu == 0 { START_LOOP } else { MIDDLE_BODY };
        sample(o, p, vcpu, pc);
    }
    switch(o, 1, Err(TaskUnknown::Unreadable));
    sample(o, p, 1, LEAF_LOOP);
    // `worker` moved to vCPU 1.
    switch(o, 1, Ok(worker));
    for _ in 0..4 {
        sample(o, p, 1, LEAF_LOOP);
    }
    assert_eq!(n, 20);
    for bytes in [&mut out, &mut plain] {
        encode_stats(bytes, n, 0, &[n, 0, 0, 0, 0, 0], &[10_000, 10_000]);
    }
    let dir = common::temp_dir(test);
    Fixture {
        raw: common::write(&dir, "tasks.raw", &out),
        plain: common::write(&dir, "plain.raw", &plain),
    }
}

fn run(raw: &std::path::Path, opts: &Options) -> (String, RunReport) {
    let (out, report) =
        common::runs::cpu(raw, Some(&common::tiny_elf()), opts).unwrap_or_else(|e| panic!("{e}"));
    (String::from_utf8(out).unwrap(), report)
}

fn opts(format: OutputFormat) -> Options {
    Options {
        format,
        ..Options::default()
    }
}

#[test]
fn the_text_report_says_how_many_samples_have_no_task() {
    let f = fixture("tasks-line");
    let (text, report) = run(&f.raw, &opts(OutputFormat::Text));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(
        text.contains(
            "# tasks: 3 distinct, 5 task records (1 of tasks that could not be read); 3 samples \
             read with no task (before their vCPU's first task record 2, task memory \
             unreadable 1)\n"
        ),
        "{text}"
    );
    // Without task records: no such line, and the same report otherwise.
    let (plain, _) = run(&f.plain, &opts(OutputFormat::Text));
    assert!(!plain.contains("tasks:"), "{plain}");
    let without_line: String = text
        .lines()
        .filter(|l| !l.starts_with("# tasks:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        without_line.replace("tasks.raw", "plain.raw"),
        plain,
        "the same samples, the same report"
    );
}

fn by(by: ReportBy) -> Options {
    Options {
        by,
        ..opts(OutputFormat::Text)
    }
}

/// The table of a `--by` report: its lines from the `Overhead` heading to the blank line.
fn table(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("Overhead"))
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn by_process_and_by_task_count_samples_per_process_and_thread() {
    let f = fixture("tasks-by");
    let (text, report) = run(&f.raw, &by(ReportBy::Process));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert!(text.contains("\nSamples per process (of 20):\n"), "{text}");
    assert_eq!(
        table(&text),
        [
            "  Overhead  Samples  Command         Pid",
            "    70.00%       14  gzip             70",
            "    15.00%        3  [kworker/0:1]    12",
            "    10.00%        2  [no task]         -",
            "     5.00%        1  [task unknown]    -",
        ],
        "{text}"
    );
    // The same header as the function report's.
    assert!(
        text.starts_with("# kern-profile CPU profile of tiny.elf"),
        "{text}"
    );
    assert!(text.contains("# tasks: 3 distinct"), "{text}");
    let (text, _) = run(&f.raw, &by(ReportBy::Task));
    assert_eq!(
        table(&text),
        [
            "  Overhead  Samples  Command         Tid  Pid",
            "    50.00%       10  worker           71   70",
            "    20.00%        4  gzip             70   70",
            "    15.00%        3  [kworker/0:1]    12   12",
            "    10.00%        2  [no task]         -    -",
            "     5.00%        1  [task unknown]    -    -",
        ],
        "{text}"
    );
    // --top cuts the table.
    let (text, _) = run(
        &f.raw,
        &Options {
            top: 2,
            ..by(ReportBy::Task)
        },
    );
    assert_eq!(table(&text).len(), 3, "{text}");
    assert!(text.contains("the top 2 of 5 rows"), "{text}");
}

#[test]
fn asking_for_tasks_of_a_recording_without_them_is_an_error() {
    let f = fixture("tasks-none");
    let asks = [
        (by(ReportBy::Process), "--by process"),
        (
            Options {
                per_task: true,
                ..opts(OutputFormat::Folded)
            },
            "--per-task",
        ),
        (
            Options {
                tasks: vec!["sh".into()],
                ..opts(OutputFormat::Svg)
            },
            "--task",
        ),
    ];
    for (o, what) in asks {
        let e = common::runs::cpu(&f.plain, Some(&common::tiny_elf()), &o)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("plain.raw has no task records, which ")
                && e.contains(what)
                && e.contains("record with tasks= (Linux guests: elf=vmlinuz)"),
            "{e}"
        );
    }
    // --by is the text report's.
    let e = common::runs::cpu(
        &f.raw,
        Some(&common::tiny_elf()),
        &Options {
            by: ReportBy::Task,
            ..opts(OutputFormat::Svg)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("--by task|process") && e.contains("-f text"),
        "{e}"
    );
}

fn folded(raw: &std::path::Path, o: Options) -> (Vec<String>, RunReport) {
    let o = Options {
        format: OutputFormat::Folded,
        ..o
    };
    let (text, report) = run(raw, &o);
    (common::sorted_lines(text.as_bytes()), report)
}

#[test]
fn task_and_process_filters_keep_their_samples_in_any_format() {
    let f = fixture("tasks-filters");
    let total = |lines: &[String]| -> u64 {
        lines
            .iter()
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let keep = |tasks: &[&str], processes: &[&str]| Options {
        tasks: tasks.iter().map(|s| s.to_string()).collect(),
        processes: processes.iter().map(|s| s.to_string()).collect(),
        ..Options::default()
    };
    // A name or an id, exactly.
    let (worker, report) = folded(&f.raw, keep(&["worker"], &[]));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(
        worker,
        [
            "_start;kernel::work;middle;leaf 4",
            "_start;kernel::work;middle;leaf;square_[i] 6"
        ]
    );
    assert_eq!(folded(&f.raw, keep(&["71"], &[])).0, worker);
    assert_eq!(total(&folded(&f.raw, keep(&[], &["gzip"])).0), 14);
    assert_eq!(total(&folded(&f.raw, keep(&[], &["70"])).0), 14);
    assert_eq!(total(&folded(&f.raw, keep(&["gzip", "12"], &[])).0), 7);
    // Both options: both hold.
    assert_eq!(folded(&f.raw, keep(&["worker"], &["gzip"])).0, worker);
    assert!(folded(&f.raw, keep(&["worker"], &["12"])).0.is_empty());
    // A value that matches nothing is a warning naming it; the others still keep theirs.
    let (lines, report) = folded(&f.raw, keep(&["work", "worker"], &[]));
    assert_eq!(lines, worker);
    assert_eq!(
        common::joined(&report.warnings),
        "--task work matches no task of the recording (no thread has that name or id)"
    );
    let (_, report) = folded(&f.raw, keep(&[], &["99"]));
    assert_eq!(
        common::joined(&report.warnings),
        "--process 99 matches no task of the recording (no process has that name or id)"
    );
    // The samples without a known task, by the names the tables give them.
    let (none, report) = folded(&f.raw, keep(&["[no task]"], &[]));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(none, ["_start 2"]);
    assert_eq!(total(&folded(&f.raw, keep(&["[task unknown]"], &[])).0), 1);
    assert_eq!(
        total(
            &folded(
                &f.raw,
                keep(&["worker", "[no task]", "[task unknown]"], &[])
            )
            .0
        ),
        13
    );
    // The text report's header counts what the filters kept.
    let (text, _) = run(
        &f.raw,
        &Options {
            format: OutputFormat::Text,
            ..keep(&[], &["gzip"])
        },
    );
    assert!(text.contains("# samples: 20 read, 14 kept"), "{text}");
}

#[test]
fn per_task_and_per_process_roots() {
    let f = fixture("tasks-roots");
    let (lines, _) = folded(
        &f.raw,
        Options {
            per_task: true,
            ..Options::default()
        },
    );
    assert_eq!(
        lines,
        [
            "[no task];_start 2",
            "[task gzip 70];_start;kernel::work;middle 4",
            "[task kworker/0:1 12];_start 3",
            "[task unknown];_start;kernel::work;middle;leaf 1",
            "[task worker 71];_start;kernel::work;middle;leaf 4",
            "[task worker 71];_start;kernel::work;middle;leaf;square_[i] 6",
        ]
    );
    // --per-process: a sample with a task under its process, the others under their
    // address space as before; with --per-task, threads under their process.
    let (lines, _) = folded(
        &f.raw,
        Options {
            per_process: true,
            per_task: true,
            ..Options::default()
        },
    );
    assert_eq!(
        lines,
        [
            "[as cr3 0x10f000];[no task];_start 2",
            "[process gzip 70];[task gzip 70];_start;kernel::work;middle 4",
            "[process gzip 70];[task worker 71];_start;kernel::work;middle;leaf 4",
            "[process gzip 70];[task worker 71];_start;kernel::work;middle;leaf;square_[i] 6",
            "[process kworker/0:1 12];[task kworker/0:1 12];_start 3",
            "[task unknown];_start;kernel::work;middle;leaf 1",
        ]
    );
    // A task that could not be read has one root either way.
    let (lines, _) = folded(
        &f.raw,
        Options {
            per_process: true,
            ..Options::default()
        },
    );
    assert!(
        lines.contains(&"[task unknown];_start;kernel::work;middle;leaf 1".to_string()),
        "{lines:?}"
    );
    // Without task records, --per-process is what it was.
    let (plain, _) = folded(
        &f.plain,
        Options {
            per_process: true,
            ..Options::default()
        },
    );
    assert!(
        plain.iter().all(|l| l.starts_with("[as cr3 0x10f000];")),
        "{plain:?}"
    );
    // --focus judges the frames below the roots.
    let (lines, _) = folded(
        &f.raw,
        Options {
            per_task: true,
            focus: Some("leaf".into()),
            ..Options::default()
        },
    );
    assert_eq!(
        lines,
        [
            "[task unknown];leaf 1",
            "[task worker 71];leaf 4",
            "[task worker 71];leaf;square_[i] 6",
        ]
    );
}

#[test]
fn pprof_samples_carry_their_tasks_labels() {
    use kern_profile::output::pprof_proto::decode;
    let f = fixture("tasks-pprof");
    let (out, _) = common::runs::cpu(
        &f.raw,
        Some(&common::tiny_elf()),
        &opts(OutputFormat::Pprof),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let p = decode(&out, 1 << 20).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    // Samples per (pid, tid, comm, process), or "-" without labels.
    let mut per: std::collections::BTreeMap<String, i64> = Default::default();
    for smp in &p.sample {
        let labels: Vec<String> = smp
            .label
            .iter()
            .map(|l| match l.str {
                0 => format!("{}={}", s(l.key), l.num),
                v => format!("{}={}", s(l.key), s(v)),
            })
            .collect();
        let k = if labels.is_empty() {
            "-".to_string()
        } else {
            labels.join(" ")
        };
        *per.entry(k).or_insert(0) += smp.value[0];
    }
    let want: std::collections::BTreeMap<String, i64> = [
        ("-", 3),
        ("pid=12 tid=12 comm=kworker/0:1 process=kworker/0:1", 3),
        ("pid=70 tid=70 comm=gzip process=gzip", 4),
        ("pid=70 tid=71 comm=worker process=gzip", 10),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(per, want);
    // Without task records, no label and none of their strings.
    let (out, _) = common::runs::cpu(
        &f.plain,
        Some(&common::tiny_elf()),
        &opts(OutputFormat::Pprof),
    )
    .unwrap();
    let p = decode(&out, 1 << 20).unwrap();
    assert!(p.sample.iter().all(|s| s.label.is_empty()));
    assert!(!p.string_table.iter().any(|s| s == "pid" || s == "comm"));
}

#[test]
fn the_command_line_takes_the_task_options() {
    let f = fixture("tasks-cli");
    let dir = f.raw.parent().unwrap();
    std::fs::copy(common::tiny_elf(), dir.join("kernel.elf")).unwrap();
    let o = common::kp(
        dir,
        &[
            "tasks.raw",
            "kernel.elf",
            "-f",
            "text",
            "--by",
            "process",
            "--process",
            "gzip,12",
            "--task",
            "worker",
            "--task",
            "12",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        table(&text),
        [
            "  Overhead  Samples  Command        Pid",
            "    76.92%       10  gzip            70",
            "    23.08%        3  [kworker/0:1]   12",
        ],
        "{text}"
    );
    let o = common::kp(
        dir,
        &["plain.raw", "kernel.elf", "-f", "text", "--by", "task"],
    );
    assert!(!o.status.success());
    assert!(
        common::stderr(&o).contains("plain.raw has no task records, which --by task needs"),
        "{}",
        common::stderr(&o)
    );
    let o = common::kp(dir, &["tasks.raw", "kernel.elf", "--by", "nope"]);
    assert!(!o.status.success());
    assert!(common::stderr(&o).contains("[possible values: function, task, process]"));
}

/// pprof's labels of a profile: each sample's `comm` label (`-` without), with its value.
fn comm_labels(bytes: &[u8]) -> std::collections::BTreeMap<String, i64> {
    let p = kern_profile::output::pprof_proto::decode(bytes, 1 << 20).unwrap();
    let s = |i: i64| p.string_table[i as usize].clone();
    let mut per = std::collections::BTreeMap::new();
    for smp in &p.sample {
        let comm = smp
            .label
            .iter()
            .find(|l| s(l.key) == "comm")
            .map_or("-".to_string(), |l| s(l.str));
        *per.entry(comm).or_insert(0) += smp.value[0];
    }
    per
}

#[test]
fn records_one_pass_gives_pprof_its_labels_too() {
    use kern_profile::job::SymbolSources;
    use kern_profile::record::aggregate::aggregate;
    let f = fixture("tasks-record");
    let dir = f.raw.parent().unwrap().join("out");
    std::fs::create_dir(&dir).unwrap();
    let sources = SymbolSources {
        elf: Some(common::tiny_elf()),
        ..SymbolSources::default()
    };
    aggregate(&f.raw, &dir, &sources, None, &Options::default(), false, 10).unwrap();
    let labels = comm_labels(&std::fs::read(dir.join("profile.pb.gz")).unwrap());
    let want: std::collections::BTreeMap<String, i64> =
        [("-", 3), ("gzip", 4), ("kworker/0:1", 3), ("worker", 10)]
            .into_iter()
            .map(|(k, n)| (k.to_string(), n))
            .collect();
    assert_eq!(labels, want);
    // The report is the one -f text writes.
    let (text, _) = run(&f.raw, &opts(OutputFormat::Text));
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert_eq!(
        table_of_functions(&report),
        table_of_functions(&text),
        "{report}"
    );
}

/// A function report's tables, without the header.
fn table_of_functions(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

#[test]
fn damaged_task_records_are_errors_or_warnings_never_panics() {
    use kern_profile_test_support::damage::damaged_copies;
    let f = fixture("tasks-damaged");
    let good = std::fs::read(&f.raw).unwrap();
    let dir = f.raw.parent().unwrap();
    let asks = [
        by(ReportBy::Task),
        Options {
            per_task: true,
            per_process: true,
            processes: vec!["gzip".into()],
            ..opts(OutputFormat::Folded)
        },
        opts(OutputFormat::Pprof),
    ];
    // Whole or cut anywhere, up to the whole length.
    let keep = |len: usize, r: u64| len - (r as usize % len.min(200));
    for (i, bytes) in damaged_copies(&good, 0x7a5c, 200, keep).enumerate() {
        let raw = common::write(dir, &format!("damaged-{i}.raw"), &bytes);
        for o in &asks {
            // Ok or Err: what matters is that it returns.
            let _ = common::runs::cpu(&raw, Some(&common::tiny_elf()), o);
        }
    }
}

#[test]
fn exact_counts_have_no_task() {
    let f = fixture("tasks-exact");
    let e = common::runs::cpu(
        &f.raw,
        Some(&common::tiny_elf()),
        &Options {
            exact: true,
            tasks: vec!["worker".into()],
            ..opts(OutputFormat::Text)
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("exact instruction counts have no task"), "{e}");
}

#[test]
fn trace_and_firefox_put_samples_without_a_known_task_on_tracks_of_their_own() {
    let f = fixture("tasks-tracks");
    // Per (pid, tid): the thread's name and its samples.
    let (out, _) = common::runs::cpu(
        &f.raw,
        Some(&common::tiny_elf()),
        &opts(OutputFormat::Firefox),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let threads: Vec<(String, String, String, u64)> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap().to_string();
            let n = t["samples"]["length"].as_u64().unwrap();
            (s("pid"), s("tid"), s("name"), n)
        })
        .collect();
    // The guest's pids and tids; the vCPUs' process of a pid no guest's has.
    let want = [
        ("12", "12", "[kworker/0:1]", 3),
        ("4194304", "0", "vCPU 0", 11),
        ("4194304", "1", "vCPU 1", 9),
        ("4194305", "4194305", "[no task]", 2),
        ("4194306", "4194306", "[task unknown]", 1),
        ("70", "70", "gzip", 4),
        ("70", "71", "worker", 10),
    ];
    let want: Vec<(String, String, String, u64)> = want
        .iter()
        .map(|&(p, t, n, s)| (p.into(), t.into(), n.into(), s))
        .collect();
    let mut threads = threads;
    threads.sort();
    assert_eq!(threads, want);
    // The trace's processes: the same pids and names.
    let (out, _) = common::runs::cpu(
        &f.raw,
        Some(&common::tiny_elf()),
        &opts(OutputFormat::Trace),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let processes: Vec<(u64, String)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            let name = e["args"]["name"].as_str().unwrap().to_string();
            (e["pid"].as_u64().unwrap(), name)
        })
        .collect();
    let want = [
        (4_194_304, "tiny.elf"),
        (12, "[kworker/0:1]"),
        (70, "gzip"),
        (4_194_305, "[no task]"),
        (4_194_306, "[task unknown]"),
    ];
    let want: Vec<(u64, String)> = want.iter().map(|&(p, n)| (p, n.into())).collect();
    assert_eq!(processes, want);
}
