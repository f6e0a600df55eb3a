//! The guest-task tracks of the outputs over time (`-f firefox`, `-f trace`), for recordings
//! with task records: besides the vCPU tracks, one track per guest thread, grouped by its
//! process, so that the tracks of tasks, like those of vCPUs, add up to the kept samples.
//!
//! - A thread is its (pid, tid), named by its thread name (a kernel thread's in brackets, as
//!   `ps` and `--by task` show it); its process is its pid, named by its process name. A
//!   thread or process seen under several names (an exec, a rename) is named by them all in
//!   the order they came, up to three: `sh, gzip`.
//! - Linux's idle tasks (`swapper/N`) all have pid and tid 0: one track each would have the
//!   same (pid, tid), which the viewers merge; they share the track of pid 0
//!   (`[swapper/0], [swapper/1]`).
//! - Samples without a known task have a process and thread of their own, `[no task]`
//!   (before their vCPU's first task record) and `[task unknown]` (the recorder could not
//!   read the task), as in `--by task`.
//! - The vCPU tracks' process then takes a pid no guest process has (from 4194304, one past
//!   Linux's largest pid), and the two above the next ones: viewers tell processes apart by
//!   pid.

use std::collections::BTreeMap;

use kern_profile_profile::stacks::{NO_TASK_FRAME, UNKNOWN_TASK_FRAME};
use kern_profile_profile::tasks::{TaskId, TaskOf, Tasks};

/// The pid of the vCPU tracks' process without task tracks.
pub const VCPU_PID: u32 = 1;

/// The first pid the tracks of no guest process may take: one past Linux's `PID_MAX_LIMIT`.
const ABOVE_GUEST_PIDS: u32 = 1 << 22;

/// Names of a track beyond these are `…`.
const MAX_NAMES: usize = 3;

/// One task track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskTrack {
    pub pid: u32,
    pub tid: u32,
    pub thread: String,
    pub process: String,
    /// The process's main thread (tid = pid).
    pub main: bool,
    /// Kept samples on it.
    pub samples: u64,
}

/// The task tracks of one output, and which one each sample goes on.
#[derive(Debug, Clone, Default)]
pub struct TaskTracks {
    /// Sorted by (pid, tid), the two of samples without a known task last.
    pub tracks: Vec<TaskTrack>,
    /// The pid of the vCPU tracks' process.
    pub vcpu_pid: u32,
    /// Track index per task id, of tasks with kept samples.
    of_id: Vec<Option<usize>>,
    no_task: Option<usize>,
    unknown: Option<usize>,
}

/// Where a track's samples came from, before the tracks are numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Thread { pid: u32, tid: u32 },
    NoTask,
    Unknown,
}

impl TaskTracks {
    /// The tracks of the kept samples' tasks, `samples` (`None`: no task), from the
    /// recording's `tasks`; none when it has no task record (the vCPU tracks alone, as
    /// before tasks).
    pub fn new(tasks: &Tasks, samples: impl Iterator<Item = Option<TaskId>>) -> Self {
        if !tasks.any() {
            return TaskTracks {
                vcpu_pid: VCPU_PID,
                ..TaskTracks::default()
            };
        }
        // Kept samples per task id, and of no task.
        let mut per_id: BTreeMap<Option<TaskId>, u64> = BTreeMap::new();
        for t in samples {
            *per_id.entry(t).or_insert(0) += 1;
        }
        let slot_of = |id: Option<TaskId>| match id.map(|id| tasks.get(id).map(TaskOf::of_state)) {
            None => Slot::NoTask,
            Some(Some(TaskOf::Known(t))) => Slot::Thread {
                pid: t.pid,
                tid: t.tid,
            },
            _ => Slot::Unknown,
        };
        // Per slot: samples, and its thread names; per pid, its process names (in the order
        // they came: ids count in first-seen order, and `per_id` is sorted by id).
        let mut slots: BTreeMap<Slot, (u64, Names)> = BTreeMap::new();
        let mut process_names: BTreeMap<u32, Names> = BTreeMap::new();
        for (&id, &n) in &per_id {
            let slot = slot_of(id);
            let s = slots.entry(slot).or_default();
            s.0 += n;
            let (Slot::Thread { pid, .. }, Some(Some(Ok(t)))) = (slot, id.map(|id| tasks.get(id)))
            else {
                continue;
            };
            s.1.add(bracketed(t.thread(), t.kernel_thread));
            process_names
                .entry(pid)
                .or_default()
                .add(bracketed(t.process(), t.kernel_thread));
        }
        // (A hostile file's pids may be anything: saturating, u32::MAX at worst.)
        let mut free = ABOVE_GUEST_PIDS;
        let mut next_free = || loop {
            let p = free;
            free = free.saturating_add(1);
            if p == u32::MAX || !process_names.contains_key(&p) {
                break p;
            }
        };
        let vcpu_pid = next_free();
        let mut out = TaskTracks {
            vcpu_pid,
            ..TaskTracks::default()
        };
        let mut index: BTreeMap<Slot, usize> = BTreeMap::new();
        for (slot, (samples, names)) in &slots {
            let samples = *samples;
            let track = match *slot {
                Slot::Thread { pid, tid } => TaskTrack {
                    pid,
                    tid,
                    thread: names.joined(),
                    process: process_names
                        .get(&pid)
                        .map_or_else(String::new, Names::joined),
                    main: pid == tid,
                    samples,
                },
                Slot::NoTask | Slot::Unknown => {
                    let pid = next_free();
                    let name = match slot {
                        Slot::NoTask => NO_TASK_FRAME,
                        _ => UNKNOWN_TASK_FRAME,
                    };
                    TaskTrack {
                        pid,
                        tid: pid,
                        thread: name.into(),
                        process: name.into(),
                        main: true,
                        samples,
                    }
                }
            };
            index.insert(*slot, out.tracks.len());
            out.tracks.push(track);
        }
        out.of_id = tasks
            .iter()
            .map(|(id, _)| index.get(&slot_of(Some(id))).copied())
            .collect();
        out.no_task = index.get(&Slot::NoTask).copied();
        out.unknown = index.get(&Slot::Unknown).copied();
        out
    }

    /// Whether there are task tracks (the recording had task records).
    pub fn any(&self) -> bool {
        !self.tracks.is_empty()
    }

    /// The track of a sample of task `id` (`None`: no task): `None` without task tracks.
    pub fn of(&self, id: Option<TaskId>) -> Option<usize> {
        match id {
            None => self.no_task,
            Some(id) => self
                .of_id
                .get(id as usize)
                .copied()
                .flatten()
                .or(self.unknown),
        }
    }
}

/// The distinct names of a thread or process, in the order they came.
#[derive(Debug, Clone, Default)]
struct Names(Vec<String>);

impl Names {
    fn add(&mut self, name: String) {
        if !self.0.contains(&name) {
            self.0.push(name);
        }
    }

    /// `a, b, c`, or `a, b, c, …` beyond [`MAX_NAMES`].
    fn joined(&self) -> String {
        let mut s = self.0[..self.0.len().min(MAX_NAMES)].join(", ");
        if self.0.len() > MAX_NAMES {
            s.push_str(", …");
        }
        s
    }
}

/// A name as `ps` shows it: a kernel thread's in brackets.
fn bracketed(name: String, kernel_thread: bool) -> String {
    match kernel_thread {
        true => format!("[{name}]"),
        false => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{TaskIdentity, TaskRecord, TaskUnknown, TASK_NAME_LEN};

    fn name(s: &str) -> [u8; TASK_NAME_LEN] {
        let mut n = [0; TASK_NAME_LEN];
        n[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    fn record(tasks: &mut Tasks, vcpu: u32, t: Result<(u32, u32, &str, &str, bool), TaskUnknown>) {
        let task = t.map(|(tid, pid, thread, process, kernel_thread)| TaskIdentity {
            address: 0x1000 * u64::from(tid) + u64::from(vcpu),
            tid,
            pid,
            kernel_thread,
            thread_name: name(thread),
            process_name: name(process),
        });
        tasks.record(&TaskRecord {
            vcpu,
            time_ns: 0,
            task,
        });
    }

    #[test]
    fn a_track_per_thread_named_last_and_the_vcpus_pid_apart() {
        let mut tasks = Tasks::default();
        // Ids: 0 sh (pid 1), 1 the same pid after its exec, 2 a kernel thread, 3 unknown,
        // 4 and 5 two idle tasks, and a task no sample kept; then many names of one thread.
        record(&mut tasks, 0, Ok((1, 1, "sh", "sh", false)));
        record(&mut tasks, 0, Ok((1, 1, "init", "init", false)));
        record(
            &mut tasks,
            0,
            Ok((12, 12, "kworker/0:1", "kworker/0:1", true)),
        );
        record(&mut tasks, 0, Err(TaskUnknown::Unreadable));
        record(&mut tasks, 0, Ok((0, 0, "swapper/0", "swapper/0", true)));
        record(&mut tasks, 1, Ok((0, 0, "swapper/1", "swapper/1", true)));
        record(&mut tasks, 1, Ok((99, 99, "never", "never", false)));
        for name in ["a", "b", "c", "d"] {
            record(&mut tasks, 1, Ok((5, 5, name, "p", false)));
        }
        let kept = [
            Some(0),
            Some(1),
            Some(1),
            Some(2),
            Some(3),
            None,
            Some(4),
            Some(5),
            Some(7),
            Some(8),
            Some(9),
            Some(10),
        ];
        let t = TaskTracks::new(&tasks, kept.into_iter());
        let names: Vec<(u32, u32, &str, &str, u64)> = t
            .tracks
            .iter()
            .map(|t| (t.pid, t.tid, &*t.process, &*t.thread, t.samples))
            .collect();
        assert_eq!(
            names,
            [
                (
                    0,
                    0,
                    "[swapper/0], [swapper/1]",
                    "[swapper/0], [swapper/1]",
                    2
                ),
                (1, 1, "sh, init", "sh, init", 3),
                (5, 5, "p", "a, b, c, …", 4),
                (12, 12, "[kworker/0:1]", "[kworker/0:1]", 1),
                (4_194_305, 4_194_305, "[no task]", "[no task]", 1),
                (4_194_306, 4_194_306, "[task unknown]", "[task unknown]", 1),
            ]
        );
        assert_eq!(t.vcpu_pid, 4_194_304);
        let track = |id| t.of(id).map(|i| t.tracks[i].tid);
        assert_eq!(track(Some(0)), Some(1));
        assert_eq!(track(Some(3)), Some(4_194_306));
        assert_eq!(track(None), Some(4_194_305));
        // Without task records: no track, the vCPUs' pid as ever.
        let none = TaskTracks::new(&Tasks::default(), [None].into_iter());
        assert!(!none.any());
        assert_eq!((none.vcpu_pid, none.of(None)), (VCPU_PID, None));
    }
}
