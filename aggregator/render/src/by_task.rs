//! `-f text --by task|process`: the kept samples per guest thread or process, like
//! `perf report --sort comm,pid`, from the tasks the recording's task records name (the keys
//! carry each sample's task, see `SampleFilter::task_keys`).

use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::describe::describe;
use crate::text::pct;
use crate::{write_err, Collected, CpuRenderer, Drawn};
use kern_profile_profile::collect::Run;
use kern_profile_profile::options::ReportBy;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::stacks::{key_task, NO_TASK_FRAME, UNKNOWN_TASK_FRAME};
use kern_profile_profile::tasks::{TaskId, TaskOf, Tasks};

/// One row: a thread or a process (or the samples without a known task).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskRow {
    /// The name, a kernel thread's in brackets as `ps` shows it (`[kworker/0:1]`), or
    /// `[no task]`, `[task unknown]`.
    pub command: String,
    /// The thread id (`--by task` only) and the process id; `None` for the rows of samples
    /// without a known task.
    pub tid: Option<u32>,
    pub pid: Option<u32>,
    pub samples: u64,
}

/// The kept samples of `profile` per task or process, most first.
pub fn task_rows(profile: &CpuProfile, by: ReportBy) -> Vec<TaskRow> {
    let mut per_id: FxHashMap<Option<TaskId>, u64> = FxHashMap::default();
    profile.counts.for_each(|key, n| {
        let c = per_id.entry(key_task(key)).or_insert(0);
        *c = c.saturating_add(n);
    });
    rows_of(per_id, &profile.summary.tasks, by)
}

/// Samples per task id (`None`: no task) as rows per task or process of `tasks`, most
/// first (also `top --by`'s).
pub fn rows_of(
    per_id: impl IntoIterator<Item = (Option<TaskId>, u64)>,
    tasks: &Tasks,
    by: ReportBy,
) -> Vec<TaskRow> {
    let mut rows: FxHashMap<(String, Option<u32>, Option<u32>), u64> = FxHashMap::default();
    for (id, n) in per_id {
        let state = id.map(|id| tasks.get(id).map(TaskOf::of_state));
        let row = match state {
            None => (NO_TASK_FRAME.to_string(), None, None),
            Some(Some(TaskOf::Known(t))) => {
                let name = match by {
                    ReportBy::Task => t.thread(),
                    _ => t.process(),
                };
                let command = match t.kernel_thread {
                    true => format!("[{name}]"),
                    false => name,
                };
                let tid = (by == ReportBy::Task).then_some(t.tid);
                (command, tid, Some(t.pid))
            }
            _ => (UNKNOWN_TASK_FRAME.to_string(), None, None),
        };
        let c = rows.entry(row).or_insert(0);
        *c = c.saturating_add(n);
    }
    let mut rows: Vec<TaskRow> = rows
        .into_iter()
        .map(|((command, tid, pid), samples)| TaskRow {
            command,
            tid,
            pid,
            samples,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.command.cmp(&b.command))
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    rows
}

/// Writes the header lines (each prefixed `# `), then the table's first `top` rows.
pub fn write_task_table(
    rows: &[TaskRow],
    header: &[String],
    top: usize,
    by: ReportBy,
    mut out: impl Write,
) -> io::Result<()> {
    for h in header {
        writeln!(out, "# {h}")?;
    }
    writeln!(out)?;
    let total = rows.iter().fold(0u64, |t, r| t.saturating_add(r.samples));
    if total == 0 {
        writeln!(out, "No samples.")?;
        return Ok(());
    }
    let what = match by {
        ReportBy::Task => "thread",
        _ => "process",
    };
    let shown = &rows[..top.min(rows.len())];
    if shown.len() < rows.len() {
        writeln!(
            out,
            "Samples per {what} (of {total}), the top {} of {} rows:",
            shown.len(),
            rows.len()
        )?;
    } else {
        writeln!(out, "Samples per {what} (of {total}):")?;
    }
    for l in table_lines(shown, total, by) {
        writeln!(out, "{l}")?;
    }
    writeln!(out)?;
    writeln!(out, "{TASK_LEGEND}")
}

/// What the table's names in brackets are.
pub const TASK_LEGEND: &str = "[NAME]: a kernel thread; [no task]: samples before their \
     vCPU's first task record; [task unknown]: the recorder could not read the task";

/// The table's heading and a line per row of `shown`, each row's share of `total`.
pub fn table_lines(shown: &[TaskRow], total: u64, by: ReportBy) -> Vec<String> {
    let id = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let samples_w = shown
        .iter()
        .map(|r| r.samples.to_string().len())
        .max()
        .unwrap_or(0)
        .max("Samples".len());
    let command_w = shown
        .iter()
        .map(|r| r.command.chars().count())
        .max()
        .unwrap_or(0)
        .max("Command".len());
    let id_w = shown
        .iter()
        .flat_map(|r| [id(r.tid).len(), id(r.pid).len()])
        .max()
        .unwrap_or(0)
        .max(3);
    let tid_head = match by {
        ReportBy::Task => format!("  {:>id_w$}", "Tid"),
        _ => String::new(),
    };
    let mut lines = vec![format!(
        "  {:>8}  {:>samples_w$}  {:<command_w$}{tid_head}  {:>id_w$}",
        "Overhead", "Samples", "Command", "Pid"
    )];
    for r in shown {
        let tid = match by {
            ReportBy::Task => format!("  {:>id_w$}", id(r.tid)),
            _ => String::new(),
        };
        lines.push(format!(
            "  {:>7.2}%  {:>samples_w$}  {:<command_w$}{tid}  {:>id_w$}",
            pct(r.samples, total),
            r.samples,
            r.command,
            id(r.pid)
        ));
    }
    lines
}

/// The text report by task or by process (`--by`).
pub struct TaskTableRenderer {
    pub by: ReportBy,
    /// Rows of the table.
    pub top: usize,
}

impl CpuRenderer for TaskTableRenderer {
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let rows = task_rows(profile, self.by);
        let split = profile.summary.tally.user_samples > 0 || run.sym.has_user_binaries();
        let header = describe(profile, &run.kernel, run.filter, split, false);
        write_task_table(&rows, &header, self.top, self.by, out).map_err(write_err)?;
        Ok(format!(
            "{} of {} samples in {} rows by {}",
            profile.kept,
            profile.summary.tally.samples,
            rows.len(),
            self.by.name()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_ids_of_no_task_are_dashes() {
        let row = |command: &str, tid, pid, samples| TaskRow {
            command: command.into(),
            tid,
            pid,
            samples,
        };
        let rows = [
            row("worker", Some(71), Some(70), 3),
            row("[no task]", None, None, 1),
        ];
        let mut out = Vec::new();
        write_task_table(&rows, &["h".into()], 20, ReportBy::Task, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(
            s.starts_with(
                "# h\n\nSamples per thread (of 4):\n\
                 \x20 Overhead  Samples  Command    Tid  Pid\n\
                 \x20   75.00%        3  worker      71   70\n\
                 \x20   25.00%        1  [no task]    -    -\n"
            ),
            "{s}"
        );
        let mut out = Vec::new();
        write_task_table(&rows, &[], 1, ReportBy::Process, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("the top 1 of 2 rows"), "{s}");
        assert!(!s.contains("Tid"), "{s}");
    }
}
