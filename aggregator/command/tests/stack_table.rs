//! Version 4's stack table read counted by stack: committed recordings (the example kernel's,
//! a Linux guest's with tasks), as version 2 read sample by sample and compacted as the
//! plugin's writer does, then read a run's samples per distinct stack: every count-only
//! output must be the same, byte for byte, and so must the warnings.

mod common;

use std::path::Path;

use common::runs::{cpu, in_format};
use kern_profile::{Options, OutputFormat};
use kern_profile_format::stack_table::Compactor;
use kern_profile_format::{
    encode_sample_v2, Header, RawReader, Record, SampleExtras, SampleRecord, VERSION_2, VERSION_4,
};

/// The records of `raw` (its header skipped) as version 2 encodes them: a version-1 file's
/// samples re-encoded (their mode unknown), every other record as it is.
fn records_v2(bytes: &[u8]) -> (Header, Vec<u8>) {
    let mut r = RawReader::new(bytes).unwrap();
    let header = r.header().clone();
    let width = header.ptr_width();
    let mut out = Vec::new();
    let mut frames = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Sample(s) => {
                frames.clear();
                s.extend_frames(&mut frames);
                let sample = SampleRecord {
                    vcpu: s.vcpu,
                    user: s.user(),
                    stop: s.walk_end(),
                    time_ns: s.time_ns,
                    icount: s.icount,
                    pc: s.pc,
                    sp: s.sp,
                    sp_word: s.sp_word(),
                    frames: &frames,
                    entry_resolved: s.entry_resolved(),
                };
                let extras = SampleExtras {
                    mode: s.mode(),
                    privilege: s.privilege(),
                    return_register: s.return_register(),
                    page_table_base: s.page_table_base(),
                };
                encode_sample_v2(&mut out, width, &sample, &extras);
            }
            _ => {
                let (start, end) = (r.record_offset() as usize, r.offset() as usize);
                out.extend_from_slice(&bytes[start..end]);
            }
        }
    }
    assert!(r.truncation().is_none());
    (header, out)
}

/// `records` in version 4's form, compacted in batches of about `batch` bytes cut at records
/// (as the plugin's writer thread does).
fn compacted(header: &Header, records: &[u8], batch: usize) -> Vec<u8> {
    let mut out = Vec::new();
    header.encode_version(VERSION_4, &mut out);
    let mut c = Compactor::new(header.ptr_width());
    let (mut start, mut at) = (0, 0);
    while at + 5 <= records.len() {
        let len = u32::from_le_bytes(records[at + 1..at + 5].try_into().unwrap()) as usize;
        at += 5 + len;
        if at - start >= batch || at + 5 > records.len() {
            c.compact(&records[start..at], &mut out);
            start = at;
        }
    }
    assert!(c.stacks() > 0, "no sample");
    out
}

/// The outputs of `raw` (version 1 or 2) read sample by sample and counted by stack from
/// its version-4 form are the same, with the symbols of `elf`.
fn same_outputs(raw: &Path, elf: Option<&Path>, more: &[Options]) {
    let (header, records) = records_v2(&std::fs::read(raw).unwrap());
    let mut plain = Vec::new();
    header.encode_version(VERSION_2, &mut plain);
    plain.extend_from_slice(&records);
    let table = compacted(&header, &records, 16 << 10);
    let per_cpu = Options {
        per_cpu: true,
        ..in_format(OutputFormat::Folded)
    };
    let kernel_only = Options {
        mode: kern_profile::ModeFilter::KernelOnly,
        ..in_format(OutputFormat::Text)
    };
    let opts = [
        in_format(OutputFormat::Folded),
        in_format(OutputFormat::Text),
        in_format(OutputFormat::Pprof),
        per_cpu,
        kernel_only,
    ];
    // One path for both files: outputs name it.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("cpu.raw");
    let outputs = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        opts.iter()
            .chain(more)
            .map(|o| {
                let (out, report) = cpu(&path, elf, o).unwrap();
                // The text report names the version; all else is the same.
                let out = String::from_utf8_lossy(&out).replace("raw format v4", "raw format v2");
                (o, out, format!("{:?}", report.warnings))
            })
            .collect::<Vec<_>>()
    };
    let want = outputs(&plain);
    let got = outputs(&table);
    for ((opts, want, want_warnings), (_, got, got_warnings)) in want.iter().zip(&got) {
        assert!(
            got == want,
            "{} {opts:?}: the stack table's output differs\n--- plain\n{want}\n--- table\n{got}",
            raw.display()
        );
        assert_eq!(got_warnings, want_warnings, "{}", raw.display());
    }
}

fn example(dir: &str, raw: &str) {
    let data = common::data(dir);
    same_outputs(&data.join(raw), Some(&data.join("kernel.elf")), &[]);
}

#[test]
fn a_period_run_counted_by_stack_reports_what_it_reports_sample_by_sample() {
    example("example", "raw-period-exact");
    example("example", "raw-delay");
}

#[test]
fn smp_and_user_runs_counted_by_stack_report_what_they_report_sample_by_sample() {
    example("example-modes", "raw-smp");
    example("example-modes", "raw-user");
}

/// Debian's Linux with task records (the fuzz corpus' recording; its symbols are not here,
/// another x86_64 ELF stands in): keys by task and process, filters by task.
#[test]
fn a_linux_run_with_tasks_counted_by_stack_reports_what_it_reports_sample_by_sample() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cpu_e2e");
    let by_task = Options {
        per_task: true,
        per_process: true,
        ..in_format(OutputFormat::Folded)
    };
    let one_task = Options {
        processes: vec!["1".into()],
        ..in_format(OutputFormat::Folded)
    };
    for raw in ["x86_64-linux-tasks.raw", "x86_64-linux-switches.raw"] {
        let elf = common::data("tiny-x86_64.elf");
        same_outputs(
            &corpus.join(raw),
            Some(&elf),
            &[by_task.clone(), one_task.clone()],
        );
    }
}
