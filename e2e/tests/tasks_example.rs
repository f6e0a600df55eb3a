//! `tasks=example,switches=example` on the example kernels' scheduler (`sched=on`,
//! examples/kernel-common/src/sched.rs), on every architecture: `--by task` names each task
//! with its id, and each task's share of the samples is within 2 points of its exact share,
//! the instructions between a vCPU's consecutive switch records (their `icount`, `period=`)
//! credited to the task the earlier switch ran next.

use std::collections::BTreeMap;
use std::path::Path;

use kern_profile_e2e::*;

const PERIOD: u64 = 1_000;
/// The scheduler's tasks: name and id.
const TASKS: [(&str, u32); 3] = [("hasher", 1), ("sorter", 2), ("spinner", 3)];

/// `--by task`'s rows: name -> (samples, tid, pid).
fn sampled(raw: &Path, kernel: &Path) -> BTreeMap<String, (u64, String, String)> {
    let text = by_task_text(raw, &[kernel.to_str().unwrap()]);
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // With switches, time columns follow the pid.
        if let [pct, samples, name, tid, pid, ..] = f[..] {
            if pct.ends_with('%') && TASKS.iter().any(|(n, _)| *n == name) {
                rows.insert(
                    name.to_string(),
                    (samples.parse().unwrap(), tid.into(), pid.into()),
                );
            }
        }
    }
    assert_eq!(rows.len(), TASKS.len(), "every task has its row in\n{text}");
    rows
}

fn tasks_are_named_and_shared_as_they_ran(arch: &'static str, need: Need) {
    if skip_unless(&[Need::Qemu(arch), Need::Plugin, Need::Bin, need]) {
        return;
    }
    let kernel = example_kernel(arch);
    let args = format!(
        "period={PERIOD},elf={},tasks=example,switches=example",
        kernel.display()
    );
    let run = boot_kernel(
        arch,
        &kernel,
        "tasks-example",
        &args,
        "sched=on alloc_rounds=0",
    );
    assert!(
        run.stderr
            .contains("samples carry their task (struct Task from DWARF")
            && run.stderr.contains("task switches recorded at switch_to"),
        "{}",
        run.stderr
    );
    // The ids are the process ids of the task records (tid = pid = id).
    let exact = exact_by_process(&run.raw);
    assert!(exact.switches > 100, "{} switches recorded", exact.switches);
    assert_eq!(
        exact.mismatched, 0,
        "every switch leaves the task the last one ran"
    );
    let rows = sampled(&run.raw, &kernel);
    let exact_total: u64 = TASKS
        .iter()
        .map(|(_, id)| exact.instructions.get(id).copied().unwrap_or(0))
        .sum();
    let sampled_total: u64 = rows.values().map(|(n, ..)| n).sum();
    for (name, id) in TASKS {
        let insns = *exact
            .instructions
            .get(&id)
            .unwrap_or_else(|| panic!("{name}: no task record for id {id}"));
        let (samples, tid, pid) = &rows[name];
        assert_eq!(
            (tid.as_str(), pid.as_str()),
            (&*id.to_string(), &*id.to_string()),
            "{name}"
        );
        let want = insns as f64 / exact_total as f64;
        let got = *samples as f64 / sampled_total as f64;
        eprintln!(
            "{arch}: {name} (id {id}): {samples} samples, {:.2}% of the tasks' samples; exact {insns} instructions, {:.2}%",
            got * 100.0,
            want * 100.0
        );
        assert!(
            (got - want).abs() <= 0.02,
            "{arch}: {name}: sampled {got:.4}, exact {want:.4}"
        );
    }
}

#[test]
fn i386_tasks() {
    tasks_are_named_and_shared_as_they_ran("i386", Need::Kernel);
}

#[test]
fn x86_64_tasks() {
    tasks_are_named_and_shared_as_they_ran("x86_64", Need::Kernel64);
}

#[test]
fn riscv64_tasks() {
    tasks_are_named_and_shared_as_they_ran("riscv64", Need::VirtKernel("riscv64"));
}

#[test]
fn aarch64_tasks() {
    tasks_are_named_and_shared_as_they_ran("aarch64", Need::VirtKernel("aarch64"));
}
