//! Which samples a CPU run keeps, and what their address stacks carry besides addresses.
//!
//! Two kinds of rules: those a sample's fields decide ([`SampleFilter::keeps`]: vCPU, mode,
//! time), applied while reading, and those its *named* stack decides ([`NameRules`]:
//! `--focus`, `--exclude`), applied once per distinct stack in the collect stage
//! ([`crate::collect::Run::collect`]) and when stacks are named.

use std::rc::Rc;

use crate::cpu_list::CpuList;
use crate::options::{ModeFilter, Options, OutputFormat, ReportBy};
use crate::stacks::{NO_TASK_FRAME, UNKNOWN_TASK_FRAME};
use crate::tasks::{SampleTask, TaskOf, TaskPattern, TaskRules};

/// The sample filters and key options, resolved from [`Options`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleFilter {
    /// Kernel/user filter.
    pub mode: ModeFilter,
    /// Keep only these vCPUs (`None`: all).
    pub cpus: Option<CpuList>,
    /// Key stacks by vCPU too (a root frame `cpu N`).
    pub per_cpu: bool,
    /// Key stacks by address space too (a root frame per address space; per process, for
    /// samples with a task).
    pub per_process: bool,
    /// A root frame per task.
    pub per_task: bool,
    /// Keys carry the task of samples that have one: for roots, the report by task, pprof's
    /// labels. Recordings without task records get the same keys either way.
    pub task_keys: bool,
    /// `--task`, `--process`: the patterns of threads and processes.
    pub task_rules: TaskRules,
    /// `--task`, `--process` of `[no task]` or `[task unknown]`.
    pub without_task: WithoutTask,
    /// What the text report is by (by task or process, it needs task keys).
    pub by: ReportBy,
    /// Keep user samples' addresses when no user binary names them.
    pub addresses: bool,
    /// Keep only samples taken in this part of the recording.
    pub time: TimeRange,
    /// `--focus` and `--exclude`.
    pub names: NameRules,
}

impl SampleFilter {
    pub fn from_options(o: &Options) -> Self {
        SampleFilter {
            mode: o.mode,
            cpus: o.cpus.clone(),
            per_cpu: o.per_cpu,
            per_process: o.per_process,
            per_task: o.per_task,
            task_keys: o.per_task
                || o.per_process
                || o.by != ReportBy::Function
                || o.format == OutputFormat::Pprof
                || o.off_cpu,
            task_rules: TaskRules {
                tasks: task_patterns(&o.tasks),
                processes: task_patterns(&o.processes),
            },
            without_task: WithoutTask::of(o.tasks.iter().chain(&o.processes)),
            by: o.by,
            addresses: o.addresses,
            time: TimeRange::from_secs(o.from_time, o.to_time),
            names: NameRules {
                focus: o.focus.clone(),
                exclude: o.exclude.clone(),
            },
        }
    }

    /// Whether a sample of `vcpu`, in user mode or not, taken at `time_ns` (`None`: a file
    /// without times, which [`crate::collect::Run::open`] refuses under a time range) is kept.
    pub fn keeps(&self, vcpu: u32, user: bool, time_ns: Option<u64>) -> bool {
        self.mode.keeps(user)
            && self.cpus.as_ref().is_none_or(|c| c.contains(vcpu))
            && time_ns.is_none_or(|t| self.time.contains(t))
    }

    /// Whether `--task`/`--process` keep a sample of task `t`: one of a thread and process
    /// they name, or without a known task when they name `[no task]` or `[task unknown]`
    /// (whatever the other option says: such a sample has neither).
    #[inline]
    pub fn keeps_task(&self, t: Option<SampleTask<'_>>) -> bool {
        if !self.without_task.any() {
            return self.task_rules.keeps(t);
        }
        match TaskOf::of(t) {
            TaskOf::None => self.without_task.none,
            TaskOf::Unknown(_) => self.without_task.unknown,
            TaskOf::Known(_) => self.task_rules.is_active() && self.task_rules.keeps(t),
        }
    }

    /// What needs the recording's task records (`--per-task`, `--by`, `--task`,
    /// `--process`), as the options say it; `None` when nothing does.
    pub fn task_options(&self) -> Option<String> {
        let mut asked = Vec::new();
        if self.per_task {
            asked.push("--per-task".to_string());
        }
        if self.by != ReportBy::Function {
            asked.push(format!("--by {}", self.by.name()));
        }
        if !self.task_rules.tasks.is_empty() || self.without_task.any() {
            asked.push("--task".into());
        }
        if !self.task_rules.processes.is_empty() {
            asked.push("--process".into());
        }
        (!asked.is_empty()).then(|| asked.join(", "))
    }
}

/// The patterns of `--task` or `--process` values but `[no task]` and `[task unknown]`.
fn task_patterns(values: &[String]) -> Vec<TaskPattern> {
    values
        .iter()
        .filter(|v| ![NO_TASK_FRAME, UNKNOWN_TASK_FRAME].contains(&v.as_str()))
        .map(|v| TaskPattern::parse(v))
        .collect()
}

/// `--task '[no task]'`, `--task '[task unknown]'` (or `--process`): the samples without a
/// known task, by the names the tables and `--per-task` roots give them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WithoutTask {
    /// Before their vCPU's first task record.
    pub none: bool,
    /// In a task the recorder could not read.
    pub unknown: bool,
}

impl WithoutTask {
    fn of<'a>(values: impl Iterator<Item = &'a String>) -> Self {
        let mut w = WithoutTask::default();
        for v in values {
            w.none |= v == NO_TASK_FRAME;
            w.unknown |= v == UNKNOWN_TASK_FRAME;
        }
        w
    }

    pub fn any(self) -> bool {
        self.none || self.unknown
    }
}

/// `--from-time` / `--to-time`: a part of the recording, in host time since the plugin
/// started (each sample's time stamp).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub from_ns: Option<u64>,
    /// Exclusive.
    pub to_ns: Option<u64>,
}

impl TimeRange {
    /// From seconds (negative values count as 0).
    pub fn from_secs(from: Option<f64>, to: Option<f64>) -> Self {
        let ns = |s: f64| (s.max(0.0) * 1e9) as u64;
        TimeRange {
            from_ns: from.map(ns),
            to_ns: to.map(ns),
        }
    }

    /// Whether a bound is set.
    pub fn is_set(&self) -> bool {
        self.from_ns.is_some() || self.to_ns.is_some()
    }

    pub fn contains(&self, t: u64) -> bool {
        self.from_ns.is_none_or(|f| t >= f) && self.to_ns.is_none_or(|e| t < e)
    }

    /// `0.5 s to 2 s into the recording`, for headers.
    pub fn describe(&self) -> String {
        let s = |ns: u64| format!("{} s", ns as f64 / 1e9);
        match (self.from_ns, self.to_ns) {
            (Some(f), Some(t)) => format!("{} to {} into the recording", s(f), s(t)),
            (Some(f), None) => format!("from {} into the recording", s(f)),
            (None, Some(t)) => format!("the first {} of the recording", s(t)),
            (None, None) => String::new(),
        }
    }
}

/// Rules on the functions of a named stack.
///
/// A pattern names a function by its full name (`kernel::workload::hot_leaf`) or by a tail
/// of it after `::` (`hot_leaf`, `workload::hot_leaf`); decorations (` (file:line)`, the
/// inline marker `_[i]`) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameRules {
    /// Keep only stacks through this function, rooted at it (its outermost occurrence).
    pub focus: Option<String>,
    /// Drop stacks through any of these functions.
    pub exclude: Vec<String>,
}

impl NameRules {
    pub fn is_active(&self) -> bool {
        self.focus.is_some() || !self.exclude.is_empty()
    }

    /// Whether the stack `frames` (root first) is kept: the frames from `skip` on are judged
    /// (the first `skip` are roots such as `cpu N`, kept as they are).
    pub fn keeps(&self, frames: &[Rc<str>], skip: usize) -> bool {
        let judged = frames.get(skip..).unwrap_or_default();
        if judged
            .iter()
            .any(|f| self.exclude.iter().any(|p| matches(f, p)))
        {
            return false;
        }
        match &self.focus {
            Some(p) => judged.iter().any(|f| matches(f, p)),
            None => true,
        }
    }

    /// Applies the rules to `frames` (root first; the first `skip` left alone): `None` when
    /// the stack is dropped; with a focus, the frames above the focused function go, and
    /// how many went is returned.
    pub fn shape(&self, frames: &mut Vec<Rc<str>>, skip: usize) -> Option<usize> {
        if !self.keeps(frames, skip) {
            return None;
        }
        let skip = skip.min(frames.len());
        let removed = match &self.focus {
            Some(p) => frames[skip..]
                .iter()
                .position(|f| matches(f, p))
                .unwrap_or(0),
            None => 0,
        };
        frames.drain(skip..skip + removed);
        Some(removed)
    }
}

/// Whether frame name `frame` is function `pattern` (see [`NameRules`]).
pub fn matches(frame: &str, pattern: &str) -> bool {
    let base = function_of(frame);
    base == pattern
        || base
            .strip_suffix(pattern)
            .is_some_and(|head| head.ends_with("::"))
}

/// A frame name without its decorations: the inline marker and ` (file:line)`.
fn function_of(frame: &str) -> &str {
    let f = frame
        .strip_suffix(crate::stacks::INLINE_SUFFIX)
        .unwrap_or(frame);
    match f.rfind(" (") {
        Some(i) if f.ends_with(')') => &f[..i],
        _ => f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(s: &str) -> Vec<Rc<str>> {
        s.split(';').map(Rc::from).collect()
    }

    fn join(f: &[Rc<str>]) -> String {
        f.iter().map(|s| &**s).collect::<Vec<_>>().join(";")
    }

    #[test]
    fn task_options_pick_samples_without_a_known_task_by_their_rows_names() {
        use crate::tasks::TaskState;
        use kern_profile_format::{TaskIdentity, TaskUnknown, TASK_NAME_LEN};
        let mut name = [0; TASK_NAME_LEN];
        name[..2].copy_from_slice(b"sh");
        let sh: TaskState = Ok(TaskIdentity {
            address: 0x1000,
            tid: 7,
            pid: 7,
            kernel_thread: false,
            thread_name: name,
            process_name: name,
        });
        let unread: TaskState = Err(TaskUnknown::Unreadable);
        let (sh, unread) = (
            Some(SampleTask { id: 0, state: &sh }),
            Some(SampleTask {
                id: 1,
                state: &unread,
            }),
        );
        let keeps = |tasks: &[&str], processes: &[&str]| {
            let o = Options {
                tasks: tasks.iter().map(|s| s.to_string()).collect(),
                processes: processes.iter().map(|s| s.to_string()).collect(),
                ..Options::default()
            };
            let f = SampleFilter::from_options(&o);
            [sh, unread, None].map(|t| f.keeps_task(t))
        };
        assert_eq!(keeps(&[], &[]), [true, true, true]);
        assert_eq!(keeps(&["sh"], &[]), [true, false, false]);
        assert_eq!(keeps(&["[no task]"], &[]), [false, false, true]);
        assert_eq!(keeps(&["[task unknown]"], &[]), [false, true, false]);
        assert_eq!(keeps(&["sh", "[task unknown]"], &[]), [true, true, false]);
        // Whatever the other option says: such a sample has no process.
        assert_eq!(keeps(&["[no task]"], &["sh"]), [true, false, true]);
        assert_eq!(keeps(&["[no task]"], &["nope"]), [false, false, true]);
        let f = SampleFilter::from_options(&Options {
            tasks: vec!["[no task]".into()],
            ..Options::default()
        });
        assert!(f.task_rules.tasks.is_empty());
        assert_eq!(f.task_options().as_deref(), Some("--task"));
    }

    #[test]
    fn patterns_match_full_names_tails_and_decorated_frames() {
        assert!(matches("kernel::workload::hot_leaf", "hot_leaf"));
        assert!(matches("kernel::workload::hot_leaf", "workload::hot_leaf"));
        assert!(matches(
            "kernel::workload::hot_leaf",
            "kernel::workload::hot_leaf"
        ));
        assert!(!matches("kernel::workload::not_hot_leaf", "hot_leaf"));
        assert!(!matches("kernel::workload::hot_leaf", "leaf"));
        assert!(matches("kernel::blend::mix_inlined_[i]", "mix_inlined"));
        assert!(matches("kmain (src/main.rs:12)", "kmain"));
        assert!(matches("a::mix (src/a.rs:3)_[i]", "mix"));
    }

    #[test]
    fn focus_roots_at_the_outermost_occurrence_and_exclude_drops() {
        let rules = NameRules {
            focus: Some("recurse".into()),
            exclude: vec![],
        };
        let mut f = frames("kmain;run;k::recurse;k::recurse;leaf");
        assert_eq!(rules.shape(&mut f, 0), Some(2));
        assert_eq!(join(&f), "k::recurse;k::recurse;leaf");
        let mut f = frames("cpu 1;kmain;k::recurse");
        assert_eq!(rules.shape(&mut f, 1), Some(1));
        assert_eq!(join(&f), "cpu 1;k::recurse");
        assert_eq!(rules.shape(&mut frames("kmain;other"), 0), None);

        let rules = NameRules {
            focus: None,
            exclude: vec!["cold_leaf".into(), "idle".into()],
        };
        assert_eq!(rules.shape(&mut frames("kmain;k::cold_leaf"), 0), None);
        let mut f = frames("kmain;k::hot_leaf");
        assert_eq!(rules.shape(&mut f, 0), Some(0));
        assert_eq!(join(&f), "kmain;k::hot_leaf");
        // A root outside the judged part is not matched.
        assert!(rules.keeps(&frames("idle;k::hot_leaf"), 1));
    }

    #[test]
    fn time_ranges() {
        let r = TimeRange::from_secs(Some(0.5), Some(2.0));
        assert!(!r.contains(499_999_999));
        assert!(r.contains(500_000_000));
        assert!(r.contains(1_999_999_999));
        assert!(!r.contains(2_000_000_000));
        assert_eq!(r.describe(), "0.5 s to 2 s into the recording");
        assert!(!TimeRange::default().is_set());
        assert!(TimeRange::default().contains(u64::MAX));
        let filter = SampleFilter {
            time: TimeRange::from_secs(None, Some(1.0)),
            ..SampleFilter::default()
        };
        assert!(filter.keeps(0, false, Some(10)));
        assert!(!filter.keeps(0, false, Some(1_000_000_000)));
    }
}
