//! `-f text --by task|process`: the kept samples per guest thread or process, like
//! `perf report --sort comm,pid`, from the tasks the recording's task records name (the keys
//! carry each sample's task, see `SampleFilter::task_keys`). In a recording with task
//! switches, also each row's time on the CPU, runnable and blocked, its share of the exact
//! instructions (with instruction counts), and the idle tasks as one `[idle]` row.

use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::describe::describe;
use crate::off_cpu::still_off;
use crate::text::pct;
use crate::{write_err, Collected, CpuRenderer, Drawn};
use kern_profile_format::TaskIdentity;
use kern_profile_profile::collect::Run;
use kern_profile_profile::off_cpu::{is_idle, OffCpu, TaskTimes};
use kern_profile_profile::options::ReportBy;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::stacks::{key_task, NO_TASK_FRAME, UNKNOWN_TASK_FRAME};
use kern_profile_profile::tasks::{TaskId, TaskOf, TaskRules, Tasks};

/// The row of Linux's idle tasks (pid 0, `swapper/N`), in recordings with task switches.
pub const IDLE_ROW: &str = "[idle]";

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
    /// Its times from the task switches (recordings with switch records).
    pub off: Option<TaskTimes>,
}

/// A row's key: command, thread id (by task), process id.
type RowKey = (String, Option<u32>, Option<u32>);

/// The row of task `t`; idle tasks share one with `idle`.
fn row_key(t: &TaskIdentity, by: ReportBy, idle: bool) -> RowKey {
    if idle && is_idle(t) {
        return (IDLE_ROW.to_string(), None, Some(0));
    }
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

/// Sample counts (and switch times) per row.
type RowMap = FxHashMap<RowKey, (u64, Option<TaskTimes>)>;

/// The kept samples of `profile` per task or process, most first; with task switches, each
/// row's times too (of the tasks `rules` keep), and rows of tasks that waited unsampled.
pub fn task_rows(profile: &CpuProfile, by: ReportBy, rules: &TaskRules) -> Vec<TaskRow> {
    let off = &profile.summary.off_cpu;
    let mut per_id: FxHashMap<Option<TaskId>, u64> = FxHashMap::default();
    profile.counts.for_each(|key, n| {
        let c = per_id.entry(key_task(key)).or_insert(0);
        *c = c.saturating_add(n);
    });
    let mut rows = row_map(per_id, &profile.summary.tasks, by, off.any());
    add_switch_times(&mut rows, off, by, rules);
    sorted(rows)
}

/// Samples per task id (`None`: no task) as rows per task or process of `tasks`, most
/// first, without switch times (`top --by`'s).
pub fn rows_of(
    per_id: impl IntoIterator<Item = (Option<TaskId>, u64)>,
    tasks: &Tasks,
    by: ReportBy,
) -> Vec<TaskRow> {
    sorted(row_map(per_id, tasks, by, false))
}

/// Samples per row; the idle tasks share one row with `idle`.
fn row_map(
    per_id: impl IntoIterator<Item = (Option<TaskId>, u64)>,
    tasks: &Tasks,
    by: ReportBy,
    idle: bool,
) -> RowMap {
    let mut rows = RowMap::default();
    for (id, n) in per_id {
        let state = id.map(|id| tasks.get(id).map(TaskOf::of_state));
        let row = match state {
            None => (NO_TASK_FRAME.to_string(), None, None),
            Some(Some(TaskOf::Known(t))) => row_key(t, by, idle),
            _ => (UNKNOWN_TASK_FRAME.to_string(), None, None),
        };
        let c = &mut rows.entry(row).or_insert((0, None)).0;
        *c = c.saturating_add(n);
    }
    rows
}

/// The rows, most samples first (then most time, then by name and ids).
fn sorted(rows: RowMap) -> Vec<TaskRow> {
    let mut rows: Vec<TaskRow> = rows
        .into_iter()
        .map(|((command, tid, pid), (samples, off))| TaskRow {
            command,
            tid,
            pid,
            samples,
            off,
        })
        .collect();
    rows.sort_by(|a, b| {
        let waited = |r: &TaskRow| r.off.map_or(0, |t| t.on_ns + t.runnable_ns + t.blocked_ns);
        b.samples
            .cmp(&a.samples)
            .then_with(|| waited(b).cmp(&waited(a)))
            .then_with(|| a.command.cmp(&b.command))
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    rows
}
/// Adds each task's times from the switches to its row (a row of its own when it has no
/// samples); rows without switch times get zeros, so that every row has columns.
fn add_switch_times(rows: &mut RowMap, off: &OffCpu, by: ReportBy, rules: &TaskRules) {
    if !off.any() {
        return;
    }
    for (task, times) in off.tasks() {
        let who = off.identity(task);
        if rules.is_active() && !who.is_some_and(|t| rules.keeps_identity(t)) {
            continue;
        }
        let key = match who {
            Some(t) => row_key(t, by, true),
            None => (format!("[task {:#x}]", task.0), None, None),
        };
        // Nobody waits for an idle task: its time off the CPU is others' time on it.
        let times = match who.is_some_and(is_idle) {
            true => TaskTimes {
                on_ns: times.on_ns,
                instructions: times.instructions,
                ..TaskTimes::default()
            },
            false => *times,
        };
        rows.entry(key)
            .or_insert((0, None))
            .1
            .get_or_insert_with(TaskTimes::default)
            .add(&times);
    }
    for (_, t) in rows.values_mut() {
        t.get_or_insert_with(TaskTimes::default);
    }
}

/// Writes the header lines (each prefixed `# `), then the table's first `top` rows; with
/// rows of switch times, their columns, and `switches` (what they mean) below the table.
pub fn write_task_table(
    rows: &[TaskRow],
    header: &[String],
    top: usize,
    by: ReportBy,
    switches: Option<&str>,
    mut out: impl Write,
) -> io::Result<()> {
    for h in header {
        writeln!(out, "# {h}")?;
    }
    writeln!(out)?;
    let total = rows.iter().fold(0u64, |t, r| t.saturating_add(r.samples));
    let times = rows.iter().any(|r| r.off.is_some());
    if total == 0 && !times {
        writeln!(out, "No samples.")?;
        return Ok(());
    }
    let what = match by {
        ReportBy::Task => "thread",
        _ => "process",
    };
    let shown = top.min(rows.len());
    if shown < rows.len() {
        writeln!(
            out,
            "Samples per {what} (of {total}), the top {shown} of {} rows:",
            rows.len()
        )?;
    } else {
        writeln!(out, "Samples per {what} (of {total}):")?;
    }
    for l in table_lines(rows, shown, total, by) {
        writeln!(out, "{l}")?;
    }
    writeln!(out)?;
    writeln!(out, "{TASK_LEGEND}")?;
    if let (true, Some(s)) = (times, switches) {
        writeln!(out, "{s}")?;
    }
    Ok(())
}

/// What the table's names in brackets are.
pub const TASK_LEGEND: &str = "[NAME]: a kernel thread; [no task]: samples before their \
     vCPU's first task record; [task unknown]: the recorder could not read the task";

/// The table's heading and a line for each of the first `shown` of `rows`, each row's share
/// of `total` (and of all rows' exact instructions, with switch times).
pub fn table_lines(rows: &[TaskRow], shown: usize, total: u64, by: ReportBy) -> Vec<String> {
    let columns = SwitchColumns::of(rows);
    let shown = &rows[..shown.min(rows.len())];
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
        "  {:>8}  {:>samples_w$}  {:<command_w$}{tid_head}  {:>id_w$}{}",
        "Overhead",
        "Samples",
        "Command",
        "Pid",
        columns.head()
    )];
    for r in shown {
        let tid = match by {
            ReportBy::Task => format!("  {:>id_w$}", id(r.tid)),
            _ => String::new(),
        };
        lines.push(format!(
            "  {:>7.2}%  {:>samples_w$}  {:<command_w$}{tid}  {:>id_w$}{}",
            pct(r.samples, total),
            r.samples,
            r.command,
            id(r.pid),
            columns.cells(r.off.as_ref())
        ));
    }
    lines
}

/// The switch times' columns: seconds on the CPU, runnable, blocked (and off in a state not
/// read, when any task left so), and the share of the exact instructions (when the switches
/// carry instruction counts).
struct SwitchColumns {
    on: bool,
    unknown: bool,
    /// All rows' instructions (0: no column).
    instructions: u64,
}

impl SwitchColumns {
    fn of(rows: &[TaskRow]) -> Self {
        let offs = rows.iter().filter_map(|r| r.off.as_ref());
        let mut c = SwitchColumns {
            on: false,
            unknown: false,
            instructions: 0,
        };
        for t in offs {
            c.on = true;
            c.unknown |= t.unknown_ns > 0;
            c.instructions = c.instructions.saturating_add(t.instructions);
        }
        c
    }

    fn head(&self) -> String {
        if !self.on {
            return String::new();
        }
        let mut h = format!("  {:>9}  {:>9}  {:>9}", "On-CPU s", "Runnable", "Blocked");
        if self.unknown {
            h.push_str(&format!("  {:>9}", "Off, ?"));
        }
        if self.instructions > 0 {
            h.push_str(&format!("  {:>7}", "Exact %"));
        }
        h
    }

    fn cells(&self, t: Option<&TaskTimes>) -> String {
        if !self.on {
            return String::new();
        }
        let t = t.copied().unwrap_or_default();
        let s = |ns: u64| format!("{:>9.3}", ns as f64 / 1e9);
        let mut c = format!(
            "  {}  {}  {}",
            s(t.on_ns),
            s(t.runnable_ns),
            s(t.blocked_ns)
        );
        if self.unknown {
            c.push_str(&format!("  {}", s(t.unknown_ns)));
        }
        if self.instructions > 0 {
            c.push_str(&format!(
                "  {:>6.2}%",
                pct(t.instructions, self.instructions)
            ));
        }
        c
    }
}

/// What the switch columns mean, below the table.
fn switches_note(off: &OffCpu) -> String {
    let mut s = format!(
        "On-CPU s, Runnable, Blocked: seconds from the recording's {} task switches: on the \
         CPU from switch in to switch out (from each vCPU's first switch), off it from switch \
         out to switch in, preempted (runnable) or asleep (blocked){}; {IDLE_ROW}: the idle \
         tasks (pid 0), whose time on the CPU is the vCPUs' idle time",
        off.switches,
        still_off(off)
    );
    if off.icounts {
        s.push_str(
            "; Exact %: the share of the instructions the vCPUs ran between switches, by \
             their instruction counts",
        );
    }
    s
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
        let rows = task_rows(profile, self.by, &run.filter.task_rules);
        let split = profile.summary.tally.user_samples > 0 || run.sym.has_user_binaries();
        let header = describe(profile, &run.kernel, run.filter, split, false);
        let off = &profile.summary.off_cpu;
        let note = off.any().then(|| switches_note(off));
        write_task_table(&rows, &header, self.top, self.by, note.as_deref(), out)
            .map_err(write_err)?;
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
            off: None,
        };
        let rows = [
            row("worker", Some(71), Some(70), 3),
            row("[no task]", None, None, 1),
        ];
        let mut out = Vec::new();
        write_task_table(&rows, &["h".into()], 20, ReportBy::Task, None, &mut out).unwrap();
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
        write_task_table(&rows, &[], 1, ReportBy::Process, None, &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("the top 1 of 2 rows"), "{s}");
        assert!(!s.contains("Tid"), "{s}");
    }
}
