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
use kern_profile::{Options, OutputFormat, RunReport};
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
