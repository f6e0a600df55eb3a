//! Time off the CPU (format record kind 10, task switches): `--off-cpu` stacks weighed by
//! the time each task waited, rooted at its task, blocked and runnable apart; the `--by
//! task|process` table's on-CPU, runnable and blocked columns, its exact shares and its idle
//! row; the error of a recording without switches; bad switches as warnings.
//!
//! The kernel is tests/data/tiny.elf; the recording, two vCPUs over 2 s:
//! - vCPU 0: `sleeper` (tid 71 of process `app`, pid 70) blocks at 0.1 s (in `leaf` called
//!   from `middle`), idle runs until 1.1 s, `sleeper` runs until `spinner` preempts it at
//!   1.2 s (in `leaf` called from `kernel::work`), `spinner` runs until 1.5 s, preempted by
//!   `sleeper`, which runs to the end;
//! - vCPU 1: `spinner` (tid 80) runs until 1 s, preempted by idle, which runs to the end.
//!
//! So `sleeper` waits 1 s blocked and 0.3 s runnable, and `spinner` 0.2 s runnable, then 0.5
//! s until the end (still off); instructions between switches: `sleeper` 1 M, `spinner` 3 M,
//! idle 0.1 M.

mod common;

use std::path::{Path, PathBuf};

use common::tiny::*;
use kern_profile::{Options, OutputFormat, ReportBy, RunReport};
use kern_profile_format::{
    encode_sample_v2, encode_stats, CpuMode, LeftAs, Privilege, SampleExtras, TaskIdentity,
    VERSION_2,
};
use kern_profile_test_support::switches::{encode_switch_to, identity, switch, task_record};

const MS: u64 = 1_000_000;
const SLEEPER: u64 = 0xc800_1000;
const SPINNER: u64 = 0xc800_2000;
const IDLE0: u64 = 0xc100_0000;
const IDLE1: u64 = 0xc100_4000;

fn sleeper() -> TaskIdentity {
    identity(SLEEPER, 71, 70, "sleeper", "app")
}
fn spinner() -> TaskIdentity {
    identity(SPINNER, 80, 80, "spinner", "spinner")
}
fn idle(cpu: u32) -> TaskIdentity {
    let a = if cpu == 0 { IDLE0 } else { IDLE1 };
    identity(
        a,
        0,
        0,
        &format!("swapper/{cpu}"),
        &format!("swapper/{cpu}"),
    )
}

struct Builder {
    out: Vec<u8>,
    samples: u64,
}

impl Builder {
    fn new() -> Self {
        let mut out = Vec::new();
        common::header(2, false).encode_version(VERSION_2, &mut out);
        Builder { out, samples: 0 }
    }

    fn sample(&mut self, vcpu: u32, t: u64) {
        self.samples += 1;
        let frames = [RET_MIDDLE, RET_WORK, RET_START];
        let s = common::sample(vcpu, t, LEAF_SQUARE, &frames);
        let x = SampleExtras {
            mode: CpuMode::Paging,
            privilege: Privilege::Kernel,
            return_register: None,
            page_table_base: Some(0x0010_f000),
        };
        encode_sample_v2(&mut self.out, 4, &s, &x);
    }

    /// A switch on `vcpu` at `ms` (instruction count `icount`), then the next task's record.
    #[allow(clippy::too_many_arguments)]
    fn switch(
        &mut self,
        vcpu: u32,
        ms: u64,
        icount: u64,
        prev: u64,
        next: TaskIdentity,
        left_as: LeftAs,
        frames: &[u64],
    ) {
        let s = switch(
            vcpu,
            ms * MS,
            Some(icount),
            prev,
            next.address,
            left_as,
            LEAF,
            frames,
        );
        encode_switch_to(&mut self.out, 4, &s, next);
    }

    fn finish(mut self, dir: &Path, name: &str) -> PathBuf {
        let n = self.samples;
        encode_stats(&mut self.out, n, 0, &[n, 0, 0, 0, 0, 0], &[10_000, 10_000]);
        common::write(dir, name, &self.out)
    }
}

/// Blocked in `leaf` called from `middle`; preempted in `leaf` called from `kernel::work`.
const BLOCKED_AT: [u64; 3] = [RET_MIDDLE, RET_WORK, RET_START];
const PREEMPTED_AT: [u64; 2] = [RET_WORK, RET_START];

/// The recording of the module's comment, and one alike without switches.
fn fixture(test: &str) -> (PathBuf, PathBuf) {
    let dir = common::temp_dir(test);
    let mut b = Builder::new();
    task_record(0, 0, sleeper()).encode(&mut b.out);
    task_record(1, 0, spinner()).encode(&mut b.out);
    b.sample(0, 50 * MS);
    b.sample(1, 60 * MS);
    b.switch(
        0,
        100,
        1_000_000,
        SLEEPER,
        idle(0),
        LeftAs::Blocked,
        &BLOCKED_AT,
    );
    b.sample(1, 500 * MS);
    b.switch(
        1,
        1000,
        9_000_000,
        SPINNER,
        idle(1),
        LeftAs::Runnable,
        &PREEMPTED_AT,
    );
    b.switch(0, 1100, 1_100_000, IDLE0, sleeper(), LeftAs::Runnable, &[]);
    b.switch(
        0,
        1200,
        2_100_000,
        SLEEPER,
        spinner(),
        LeftAs::Runnable,
        &PREEMPTED_AT,
    );
    b.sample(0, 1300 * MS);
    b.sample(0, 1400 * MS);
    b.switch(
        0,
        1500,
        5_100_000,
        SPINNER,
        sleeper(),
        LeftAs::Runnable,
        &PREEMPTED_AT,
    );
    b.sample(0, 1600 * MS);
    b.sample(0, 2000 * MS);
    let raw = b.finish(&dir, "switches.raw");
    // The same tasks, no switches.
    let mut p = Builder::new();
    task_record(0, 0, sleeper()).encode(&mut p.out);
    p.sample(0, 50 * MS);
    let plain = p.finish(&dir, "plain.raw");
    (raw, plain)
}

fn run(raw: &Path, opts: &Options) -> (String, RunReport) {
    let (out, report) =
        common::runs::cpu(raw, Some(&common::tiny_elf()), opts).unwrap_or_else(|e| panic!("{e}"));
    (String::from_utf8(out).unwrap(), report)
}

fn off_cpu(format: OutputFormat) -> Options {
    Options {
        format,
        off_cpu: true,
        ..Options::default()
    }
}

fn folded(raw: &Path, o: Options) -> Vec<String> {
    let (text, report) = run(raw, &o);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    common::sorted_lines(text.as_bytes())
}

#[test]
fn a_task_that_blocked_for_a_second_shows_a_second_blocked_under_it_with_its_stack() {
    let (raw, _) = fixture("off-cpu-folded");
    let lines = folded(&raw, off_cpu(OutputFormat::Folded));
    assert_eq!(
        lines,
        [
            // 1 s = 1 000 000 µs, where it blocked: `leaf` called from `middle`.
            "[task sleeper 71];[blocked];_start;kernel::work;middle;leaf 1000000",
            "[task sleeper 71];[runnable];_start;kernel::work;leaf 300000",
            // 0.2 s until it ran again, then 0.5 s until the end.
            "[task spinner 80];[runnable];_start;kernel::work;leaf 700000",
        ],
        "idle tasks are left out"
    );
}

#[test]
fn per_process_roots_and_task_filters() {
    let (raw, _) = fixture("off-cpu-roots");
    let lines = folded(
        &raw,
        Options {
            per_process: true,
            ..off_cpu(OutputFormat::Folded)
        },
    );
    assert_eq!(
        lines,
        [
            "[process app 70];[task sleeper 71];[blocked];_start;kernel::work;middle;leaf 1000000",
            "[process app 70];[task sleeper 71];[runnable];_start;kernel::work;leaf 300000",
            "[process spinner 80];[task spinner 80];[runnable];_start;kernel::work;leaf 700000",
        ]
    );
    for keep in [
        Options {
            tasks: vec!["spinner".into()],
            ..off_cpu(OutputFormat::Folded)
        },
        Options {
            processes: vec!["80".into()],
            ..off_cpu(OutputFormat::Folded)
        },
    ] {
        assert_eq!(
            folded(&raw, keep),
            ["[task spinner 80];[runnable];_start;kernel::work;leaf 700000"]
        );
    }
}

#[test]
fn the_flamegraph_says_its_unit_and_what_is_still_off() {
    let (raw, _) = fixture("off-cpu-svg");
    let (svg, report) = run(&raw, &off_cpu(OutputFormat::Svg));
    assert!(svg.contains("time off the CPU, 2000000 µs"), "{svg}");
    assert!(svg.contains("µs off the CPU, from each task"), "{svg}");
    assert!(
        svg.contains("2 tasks still off at the end, counted to its last time (2.000 s)"),
        "{svg}"
    );
    assert!(
        report.summary.contains("2000000 µs off the CPU"),
        "{}",
        report.summary
    );
}

/// The table of a `--by` report: its lines from the `Overhead` heading to the blank line.
fn table(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("Overhead"))
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_task_table_has_on_cpu_runnable_blocked_exact_shares_and_an_idle_row() {
    let (raw, plain) = fixture("off-cpu-table");
    let by = |by| Options {
        format: OutputFormat::Text,
        by,
        ..Options::default()
    };
    let (text, report) = run(&raw, &by(ReportBy::Task));
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let rows = table(&text);
    assert_eq!(
        rows,
        [
            "  Overhead  Samples  Command  Tid  Pid   On-CPU s   Runnable    Blocked  Exact %",
            "    57.14%        4  spinner   80   80      0.300      0.700      0.000   73.17%",
            "    42.86%        3  sleeper   71   70      0.600      0.300      1.000   24.39%",
            "     0.00%        0  [idle]     -    0      2.000      0.000      0.000    2.44%",
        ],
        "{text}"
    );
    // The exact shares add up to 100.
    let exact: f64 = rows[1..]
        .iter()
        .map(|r| {
            r.trim_end_matches('%')
                .rsplit(' ')
                .next()
                .unwrap()
                .parse::<f64>()
                .unwrap()
        })
        .sum();
    assert!((exact - 100.0).abs() < 0.02, "{exact}");
    assert!(
        text.contains("from the recording's 5 task switches"),
        "{text}"
    );
    assert!(text.contains("2 tasks still off at the end"), "{text}");
    // --off-cpu -f text is that table too.
    let (same, _) = run(&raw, &off_cpu(OutputFormat::Text));
    assert_eq!(table(&same), rows);
    // By process.
    let (text, _) = run(&raw, &by(ReportBy::Process));
    assert_eq!(
        table(&text)[2],
        "    42.86%        3  app       70      0.600      0.300      1.000   24.39%",
        "{text}"
    );
    // Without switches, the table is what it was.
    let (text, _) = run(&plain, &by(ReportBy::Task));
    assert_eq!(
        table(&text),
        [
            "  Overhead  Samples  Command  Tid  Pid",
            "   100.00%        1  sleeper   71   70",
        ],
        "{text}"
    );
    assert!(!text.contains("task switches"), "{text}");
}

#[test]
fn off_cpu_of_a_recording_without_switches_is_an_error_naming_it() {
    let (_, plain) = fixture("off-cpu-none");
    let e = common::runs::cpu(
        &plain,
        Some(&common::tiny_elf()),
        &off_cpu(OutputFormat::Svg),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("plain.raw was recorded without switches=...: no off-CPU time"),
        "{e}"
    );
    // Options that make no sense with it are refused before reading.
    for (o, what) in [
        (
            Options {
                exact: true,
                ..off_cpu(OutputFormat::Svg)
            },
            "--exact",
        ),
        (
            Options {
                per_cpu: true,
                ..off_cpu(OutputFormat::Svg)
            },
            "--per-cpu",
        ),
        (off_cpu(OutputFormat::Firefox), "svg, folded, pprof or text"),
    ] {
        let e = common::runs::cpu(&plain, Some(&common::tiny_elf()), &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--off-cpu") && e.contains(what), "{e}");
    }
}

#[test]
fn bad_switches_are_warnings_not_failures() {
    let dir = common::temp_dir("off-cpu-bad");
    let mut b = Builder::new();
    // A switch before any task record, one whose prev is not the vCPU's task, one of
    // another vCPU written later with an earlier time (taken in time order: the vCPUs'
    // batches interleave in the file), and a task no record names.
    b.switch(0, 100, 0, SLEEPER, spinner(), LeftAs::Blocked, &BLOCKED_AT);
    b.switch(0, 200, 0, SLEEPER, spinner(), LeftAs::Blocked, &BLOCKED_AT);
    b.switch(1, 50, 0, 0xdead_0000, sleeper(), LeftAs::Runnable, &[]);
    b.sample(0, 300 * MS);
    let raw = b.finish(&dir, "bad.raw");
    let (text, report) = run(&raw, &off_cpu(OutputFormat::Folded));
    let w = common::joined(&report.warnings);
    for expected in [
        "bad.raw: 1 task-switch records leave a task that is not the one their vCPU ran",
        "bad.raw: 2 task-switch records come before their vCPU's first task record",
        "bad.raw: 1 tasks of its task switches were never named by a task record",
        "bad.raw: 1 task-switch records switch out a task already off the CPU",
    ] {
        assert!(w.contains(expected), "{w}");
    }
    assert!(!w.contains("a time before the interval"), "{w}");
    // Still off from 50 ms to the end, 300 ms.
    assert!(
        text.contains("[task 0xdead0000];[runnable];leaf 250000"),
        "{text}"
    );
}

#[test]
fn pprof_weighs_waits_in_microseconds_with_task_labels() {
    use kern_profile::output::pprof_proto::decode;
    let (raw, _) = fixture("off-cpu-pprof");
    let (out, _) = common::runs::cpu(
        &raw,
        Some(&common::tiny_elf()),
        &off_cpu(OutputFormat::Pprof),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let p = decode(&out, 1 << 20).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(
        (s(p.sample_type[0].r#type), s(p.sample_type[0].unit)),
        ("off-cpu", "microseconds")
    );
    let total: i64 = p.sample.iter().map(|x| x.value[0]).sum();
    assert_eq!(total, 2_000_000);
    let sleeper: i64 = p
        .sample
        .iter()
        .filter(|x| {
            x.label
                .iter()
                .any(|l| s(l.key) == "comm" && s(l.str) == "sleeper")
        })
        .map(|x| x.value[0])
        .sum();
    assert_eq!(sleeper, 1_300_000);
}
