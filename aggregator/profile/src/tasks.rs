//! Which guest task each sample ran in, from the recording's task records (format record kind
//! 9): a task record says what its vCPU runs from there on, so a sample is the task of its
//! vCPU's last task record before it, and has none before that vCPU's first one.
//!
//! The distinct tasks are interned ([`TaskId`]): keys and filters carry the id, and the
//! names are looked up once per task, not per sample.

use std::fmt::Write as _;

use kern_profile_format::{name_bytes, TaskIdentity, TaskRecord, TaskUnknown};
use rustc_hash::FxHashMap;

/// A task's index in its recording's [`Tasks`].
pub type TaskId = u32;

/// What a task record says a vCPU runs: a task, or why it could not be read.
pub type TaskState = Result<TaskIdentity, TaskUnknown>;

/// vCPUs below this have their current task in an array (as the format's tallies do).
const DENSE_VCPUS: usize = 4096;

/// A sample's task, as [`crate::input::Sample::task`] carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleTask<'a> {
    pub id: TaskId,
    pub state: &'a TaskState,
}

/// A sample's task, as reports tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskOf<'a> {
    /// Before its vCPU's first task record, or a recording without any.
    None,
    /// The recorder could not read the task.
    Unknown(TaskUnknown),
    Known(&'a TaskIdentity),
}

impl<'a> TaskOf<'a> {
    /// The task of `t`.
    pub fn of(t: Option<SampleTask<'a>>) -> Self {
        t.map_or(TaskOf::None, |t| TaskOf::of_state(t.state))
    }

    /// What a task record said.
    pub fn of_state(state: &'a TaskState) -> Self {
        match state {
            Err(why) => TaskOf::Unknown(*why),
            Ok(task) => TaskOf::Known(task),
        }
    }

    /// The identity, when known.
    pub fn known(self) -> Option<&'a TaskIdentity> {
        match self {
            TaskOf::Known(t) => Some(t),
            _ => None,
        }
    }
}

/// The tasks of a recording: each distinct one interned, each vCPU's current one while
/// reading, and how many samples were read in each (and in none).
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    list: Vec<TaskState>,
    index: FxHashMap<TaskState, TaskId>,
    current: Vec<Option<TaskId>>,
    sparse: FxHashMap<u32, TaskId>,
    /// Samples read per task id (the others have none: see [`Tasks::no_task_samples`]).
    samples: Vec<u64>,
    /// Task records read, and those of a task that could not be read.
    pub records: u64,
    pub unknown_records: u64,
}

impl Tasks {
    /// Whether the recording had any task record (so far).
    pub fn any(&self) -> bool {
        self.records > 0
    }

    /// Notes a task record: its vCPU runs its task from here on.
    pub fn record(&mut self, r: &TaskRecord) {
        self.records += 1;
        if r.task.is_err() {
            self.unknown_records += 1;
        }
        let id = match self.index.get(&r.task) {
            Some(&id) => id,
            None => {
                let id = self.list.len() as TaskId;
                self.list.push(r.task);
                self.samples.push(0);
                self.index.insert(r.task, id);
                id
            }
        };
        let v = r.vcpu as usize;
        if v < DENSE_VCPUS {
            if v >= self.current.len() {
                self.current.resize(v + 1, None);
            }
            self.current[v] = Some(id);
        } else {
            self.sparse.insert(r.vcpu, id);
        }
    }

    /// The task `vcpu` runs now, counting a sample read in it.
    #[inline]
    pub fn sample_on(&mut self, vcpu: u32) -> Option<SampleTask<'_>> {
        self.samples_on(vcpu, 1)
    }

    /// [`Tasks::sample_on`] for `n` samples.
    #[inline]
    pub fn samples_on(&mut self, vcpu: u32, n: u64) -> Option<SampleTask<'_>> {
        // A recording without task records pays this test alone.
        if self.records == 0 {
            return None;
        }
        let id = match self.current.get(vcpu as usize) {
            Some(&id) => id,
            None if self.sparse.is_empty() => None,
            None => self.sparse.get(&vcpu).copied(),
        };
        match id {
            Some(id) => {
                self.samples[id as usize] += n;
                Some(SampleTask {
                    id,
                    state: &self.list[id as usize],
                })
            }
            None => None,
        }
    }

    /// Of `read` samples, those read with no task: before their vCPU's first task record.
    pub fn no_task_samples(&self, read: u64) -> u64 {
        read.saturating_sub(self.samples.iter().sum())
    }

    /// The task of id `id` (`None` for an id this recording has not: a key of another one).
    pub fn get(&self, id: TaskId) -> Option<&TaskState> {
        self.list.get(id as usize)
    }

    /// Every distinct task with its id.
    pub fn iter(&self) -> impl Iterator<Item = (TaskId, &TaskState)> + '_ {
        (0..).zip(&self.list)
    }

    /// Samples read in an unknown task, by reason (in reason-code order).
    pub fn unknown_samples(&self) -> Vec<(TaskUnknown, u64)> {
        let mut by: FxHashMap<TaskUnknown, u64> = FxHashMap::default();
        for (state, &n) in self.list.iter().zip(&self.samples) {
            if let (Err(why), 1..) = (state, n) {
                *by.entry(*why).or_insert(0) += n;
            }
        }
        let mut v: Vec<(TaskUnknown, u64)> = by.into_iter().collect();
        v.sort_by_key(|(why, _)| why.code());
        v
    }

    /// The report's line on tasks (only for recordings with task records), of `read`
    /// samples: `tasks: 3 distinct, 12 task records (2 of tasks that could not be read); 7
    /// samples read with no task (before their vCPU's first task record 2, task memory
    /// unreadable 5)`.
    pub fn describe(&self, read: u64) -> Option<String> {
        if !self.any() {
            return None;
        }
        let mut line = format!(
            "tasks: {} distinct, {} task records",
            self.list.iter().filter(|t| t.is_ok()).count(),
            self.records
        );
        if self.unknown_records > 0 {
            let _ = write!(
                line,
                " ({} of tasks that could not be read)",
                self.unknown_records
            );
        }
        let unknown = self.unknown_samples();
        let none = self.no_task_samples(read);
        let without = none + unknown.iter().map(|u| u.1).sum::<u64>();
        if without > 0 {
            let mut parts = Vec::new();
            if none > 0 {
                parts.push(format!("before their vCPU's first task record {none}"));
            }
            parts.extend(
                unknown
                    .iter()
                    .map(|(why, n)| format!("{} {n}", why.describe())),
            );
            let _ = write!(
                line,
                "; {without} samples read with no task ({})",
                parts.join(", ")
            );
        }
        Some(line)
    }
}

/// A thread or process as `--task`/`--process` name it: a number is its id, anything else
/// its name, exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskPattern {
    Id(u32),
    Name(String),
}

impl TaskPattern {
    pub fn parse(s: &str) -> Self {
        match s.parse::<u32>() {
            Ok(n) => TaskPattern::Id(n),
            Err(_) => TaskPattern::Name(s.to_string()),
        }
    }

    /// Whether it names the thread or process of id `id` and name `name` (NUL-padded).
    pub fn matches(&self, id: u32, name: &[u8]) -> bool {
        match self {
            TaskPattern::Id(n) => *n == id,
            TaskPattern::Name(s) => name_bytes(name) == s.as_bytes(),
        }
    }

    /// As the user wrote it.
    pub fn text(&self) -> String {
        match self {
            TaskPattern::Id(n) => n.to_string(),
            TaskPattern::Name(s) => s.clone(),
        }
    }
}

/// `--task` and `--process`: keep only samples of these threads and processes (any of each
/// option's patterns; both options when both are given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskRules {
    pub tasks: Vec<TaskPattern>,
    pub processes: Vec<TaskPattern>,
}

impl TaskRules {
    pub fn is_active(&self) -> bool {
        !self.tasks.is_empty() || !self.processes.is_empty()
    }

    /// Whether a sample of task `t` is kept (a sample without a known task is not, once a
    /// rule is given).
    #[inline]
    pub fn keeps(&self, t: Option<SampleTask<'_>>) -> bool {
        if !self.is_active() {
            return true;
        }
        match t.map(|t| t.state) {
            Some(Ok(task)) => self.keeps_identity(task),
            _ => false,
        }
    }

    /// Whether the rules keep task `t`.
    pub fn keeps_identity(&self, t: &TaskIdentity) -> bool {
        let thread =
            self.tasks.is_empty() || self.tasks.iter().any(|p| p.matches(t.tid, &t.thread_name));
        let process = self.processes.is_empty()
            || self
                .processes
                .iter()
                .any(|p| p.matches(t.pid, &t.process_name));
        thread && process
    }

    /// The rules that match no task of `tasks`: (option, pattern as written).
    pub fn unmatched(&self, tasks: &Tasks) -> Vec<(&'static str, String)> {
        let known: Vec<&TaskIdentity> = tasks.iter().filter_map(|(_, t)| t.as_ref().ok()).collect();
        let mut out = Vec::new();
        for p in &self.tasks {
            if !known.iter().any(|t| p.matches(t.tid, &t.thread_name)) {
                out.push(("--task", p.text()));
            }
        }
        for p in &self.processes {
            if !known.iter().any(|t| p.matches(t.pid, &t.process_name)) {
                out.push(("--process", p.text()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::TASK_NAME_LEN;

    fn name(s: &str) -> [u8; TASK_NAME_LEN] {
        let mut n = [0; TASK_NAME_LEN];
        n[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    fn task(tid: u32, pid: u32, thread: &str, process: &str) -> TaskState {
        Ok(TaskIdentity {
            address: 0xffff_8880_0000_0000 + u64::from(tid) * 0x1000,
            tid,
            pid,
            kernel_thread: false,
            thread_name: name(thread),
            process_name: name(process),
        })
    }

    fn rec(vcpu: u32, task: TaskState) -> TaskRecord {
        TaskRecord {
            vcpu,
            time_ns: 0,
            task,
        }
    }

    /// The tid of each sample's task (0: unknown, `None`: no task).
    fn tid(t: Option<SampleTask<'_>>) -> Option<u32> {
        t.map(|t| t.state.as_ref().map_or(0, |t| t.tid))
    }

    #[test]
    fn each_vcpu_runs_its_last_recorded_task() {
        let gzip = task(71, 70, "worker", "gzip");
        let sh = task(80, 80, "sh", "sh");
        let mut t = Tasks::default();
        // Samples before a vCPU's first record have no task.
        assert_eq!(tid(t.sample_on(0)), None);
        t.record(&rec(0, gzip));
        assert_eq!(tid(t.sample_on(0)), Some(71));
        assert_eq!(tid(t.sample_on(1)), None);
        // Interleaved: vCPU 1 changes, vCPU 0 keeps its task.
        t.record(&rec(1, sh));
        assert_eq!(tid(t.sample_on(1)), Some(80));
        assert_eq!(tid(t.sample_on(0)), Some(71));
        // A change mid-stream, to the task vCPU 1 runs: the same id.
        t.record(&rec(0, sh));
        let s0 = t.sample_on(0).unwrap().id;
        assert_eq!(t.sample_on(1).unwrap().id, s0);
        t.record(&rec(1, Err(TaskUnknown::Unreadable)));
        assert_eq!(tid(t.sample_on(1)), Some(0));
        // A vCPU index beyond the array.
        t.record(&rec(100_000, gzip));
        assert_eq!(tid(t.sample_on(100_000)), Some(71));
        assert_eq!(tid(t.sample_on(99_999)), None);
        assert_eq!((t.records, t.unknown_records), (5, 1));
        // The 10 samples above, 3 of them on a vCPU before its first task record.
        let read = 10;
        assert_eq!(t.no_task_samples(read), 3);
        assert_eq!(t.unknown_samples(), [(TaskUnknown::Unreadable, 1)]);
        assert_eq!(
            t.describe(read).unwrap(),
            "tasks: 2 distinct, 5 task records (1 of tasks that could not be read); 4 samples \
             read with no task (before their vCPU's first task record 3, task memory \
             unreadable 1)"
        );
        assert_eq!(Tasks::default().describe(read), None);
    }

    #[test]
    fn rules_match_ids_or_exact_names() {
        let gzip = task(71, 70, "worker", "gzip");
        let mut t = Tasks::default();
        t.record(&rec(0, gzip));
        let s = t.sample_on(0);
        let rules = |tasks: &[&str], processes: &[&str]| TaskRules {
            tasks: tasks.iter().map(|s| TaskPattern::parse(s)).collect(),
            processes: processes.iter().map(|s| TaskPattern::parse(s)).collect(),
        };
        assert!(rules(&[], &[]).keeps(s));
        assert!(rules(&[], &[]).keeps(None));
        assert!(rules(&["71"], &[]).keeps(s));
        assert!(rules(&["worker"], &[]).keeps(s));
        assert!(!rules(&["work"], &[]).keeps(s));
        assert!(!rules(&["70"], &[]).keeps(s));
        assert!(rules(&[], &["70", "sh"]).keeps(s));
        assert!(rules(&[], &["gzip"]).keeps(s));
        assert!(!rules(&["sh"], &["gzip"]).keeps(s));
        assert!(!rules(&[], &["gzip"]).keeps(None));
        let r = rules(&["worker", "nope"], &["1"]);
        assert_eq!(
            r.unmatched(&t),
            [
                ("--task", "nope".to_string()),
                ("--process", "1".to_string())
            ]
        );
    }
}
