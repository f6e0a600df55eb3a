//! Time off the CPU, from the recording's task switches (format record kind 10), consumed in
//! time order (the vCPUs' records put back in order, see `reorder`): each task's intervals
//! from its switch out to its next switch in (on any
//! vCPU), with the stack it left on and whether it left runnable or blocked, and per task
//! its time on the CPU, waiting runnable, blocked, and the exact instructions it ran (from
//! the vCPUs' instruction counts, in `period=` recordings).
//!
//! Memory is per task and per distinct waiting stack, never per switch: the intervals add
//! into a folded map as they close. A task is its address (Linux: `task_struct`) and its
//! thread id, from the task records (the vCPU's record before a switch names the task that
//! leaves, the one after it the task that runs next): an exited task's address is reused by
//! later tasks, whose switch in must not end the dead task's "wait". Its names are its latest
//! record's (an exec renames it).

use std::fmt;

use kern_profile_format::{LeftAs, SwitchRecord, TaskIdentity, TaskRecord};
use rustc_hash::FxHashMap;

use crate::symbolize::Symbolizer;

mod reorder;
use reorder::{Event, Reorder};

/// A distinct waiting stack's index in [`OffCpu`].
type StackId = u32;

/// A task: its address and, when a task record named it, its thread id.
pub type TaskKey = (u64, Option<u32>);

/// What is wrong with some switch records (counted, reported as warnings, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SwitchProblem {
    /// The leaving task is not the one its vCPU ran (as its last switch or task record
    /// said): the time since that vCPU's last switch is left out.
    PrevMismatch,
    /// A switch on a vCPU that had no task record yet.
    BeforeTaskRecord,
    /// A task switched out while it was already off the CPU (its earlier wait is dropped).
    AlreadyOff,
    /// A time earlier than the interval's start (counted as 0): a record that came more than
    /// the reorder window late.
    TimeBackwards,
    /// A task the recording's task records never named (shown by its address).
    UnknownAddress,
}

impl fmt::Display for SwitchProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SwitchProblem::PrevMismatch => {
                "leave a task that is not the one their vCPU ran (the time since that vCPU's \
                 last switch is left out)"
            }
            SwitchProblem::BeforeTaskRecord => "come before their vCPU's first task record",
            SwitchProblem::AlreadyOff => {
                "switch out a task already off the CPU (its earlier wait is dropped)"
            }
            SwitchProblem::TimeBackwards => {
                "have a time before the interval they end (counted as 0)"
            }
            SwitchProblem::UnknownAddress => {
                "were never named by a task record (shown by their address)"
            }
        })
    }
}

/// One task's totals, ns (and instructions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskTimes {
    /// From its switch in to its switch out (from each vCPU's first switch on).
    pub on_ns: u64,
    /// Off the CPU after leaving runnable (preempted: waiting for a CPU).
    pub runnable_ns: u64,
    /// Off the CPU after leaving blocked (sleeping until woken).
    pub blocked_ns: u64,
    /// Off the CPU after leaving in a state the recorder did not read.
    pub unknown_ns: u64,
    /// Instructions between its switch in and its switch out, from the vCPU's counts.
    pub instructions: u64,
}

impl TaskTimes {
    fn add_off(&mut self, left_as: LeftAs, ns: u64) {
        let t = match left_as {
            LeftAs::Runnable => &mut self.runnable_ns,
            LeftAs::Blocked => &mut self.blocked_ns,
            LeftAs::Unknown => &mut self.unknown_ns,
        };
        *t = t.saturating_add(ns);
    }

    /// Adds another task's totals (rows of a process, of idle).
    pub fn add(&mut self, o: &TaskTimes) {
        self.on_ns = self.on_ns.saturating_add(o.on_ns);
        self.runnable_ns = self.runnable_ns.saturating_add(o.runnable_ns);
        self.blocked_ns = self.blocked_ns.saturating_add(o.blocked_ns);
        self.unknown_ns = self.unknown_ns.saturating_add(o.unknown_ns);
        self.instructions = self.instructions.saturating_add(o.instructions);
    }
}

/// A task off the CPU now.
#[derive(Debug, Clone, Copy)]
struct Off {
    since: u64,
    left_as: LeftAs,
    stack: StackId,
    /// The thread id of the task that left (`None`: no task record named it).
    tid: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Vcpu {
    /// The task it runs, as its last switch or task record said.
    current: Option<u64>,
    /// Its last task record's thread id, when that record named `current`.
    tid: Option<u32>,
    task_record_seen: bool,
    /// Its last switch: time and instruction count.
    since: Option<(u64, Option<u64>)>,
    /// The task its last switch ran next, and when, until the task record after it says
    /// who that is.
    pending_in: Option<(u64, u64)>,
}

/// A wait that lasted to the end of the recording, kept apart so that an exit's can be
/// taken back ([`OffCpu::forget_exits`]).
#[derive(Debug, Clone, Copy)]
struct Last {
    task: TaskKey,
    left_as: LeftAs,
    stack: StackId,
    ns: u64,
}

/// A waiting stack's total: the task, how it left, its addresses (the switch function's
/// entry, then return addresses, innermost first), and the time, ns.
#[derive(Debug, Clone, Copy)]
pub struct OffStack<'a> {
    pub task: TaskKey,
    pub left_as: LeftAs,
    pub addrs: &'a [u64],
    pub ns: u64,
}

/// The off-CPU view of a recording, built from its switch and task records in file order.
#[derive(Debug, Clone, Default)]
pub struct OffCpu {
    /// Switch records read.
    pub switches: u64,
    /// Whether any switch carried the vCPU's instruction count.
    pub icounts: bool,
    /// The latest time any record said (the end of the recording, for tasks still off).
    pub last_ns: u64,
    /// Tasks still off the CPU at the end, counted to `last_ns`.
    pub still_off: u64,
    /// Tasks that exited: their last switch out is no wait (its address reused by another
    /// task, or its stack in the kernel's exit path).
    pub exited: u64,
    identities: FxHashMap<(u64, u32), TaskIdentity>,
    vcpus: FxHashMap<u32, Vcpu>,
    /// Who is off the CPU, by address.
    off: FxHashMap<u64, Off>,
    times: FxHashMap<TaskKey, TaskTimes>,
    last: Vec<Last>,
    stack_ids: FxHashMap<Box<[u64]>, StackId>,
    stacks: Vec<Box<[u64]>>,
    folded: FxHashMap<(TaskKey, LeftAs, StackId), u64>,
    problems: FxHashMap<SwitchProblem, u64>,
    finished: bool,
    /// Switch and task records held until the other vCPUs' records of their time are in.
    reorder: Reorder,
}

impl OffCpu {
    /// Whether the recording had switch records.
    pub fn any(&self) -> bool {
        self.switches > 0
    }

    /// Notes the time of any record.
    #[inline]
    pub fn saw_time(&mut self, ns: u64) {
        self.last_ns = self.last_ns.max(ns);
    }

    /// Notes a task record; it is applied in time order with the other vCPUs' records.
    pub fn task_record(&mut self, r: &TaskRecord) {
        self.saw_time(r.time_ns);
        self.hold(Event::Task(*r));
    }

    /// Notes a switch; it is applied in time order with the other vCPUs' records.
    pub fn switch(&mut self, s: &SwitchRecord) {
        self.switches += 1;
        self.icounts |= s.icount.is_some();
        self.saw_time(s.time_ns);
        self.hold(Event::Switch(s.clone()));
    }

    fn hold(&mut self, event: Event) {
        let mut reorder = std::mem::take(&mut self.reorder);
        reorder.push(event, |e| self.apply(e));
        self.reorder = reorder;
    }

    fn apply(&mut self, e: Event) {
        match e {
            Event::Switch(s) => self.apply_switch(&s),
            Event::Task(t) => self.apply_task_record(&t),
        }
    }

    /// A task record: who its task is, and that its vCPU runs it.
    fn apply_task_record(&mut self, r: &TaskRecord) {
        let v = self.vcpus.entry(r.vcpu).or_default();
        v.task_record_seen = true;
        let pending = v.pending_in.take();
        let named = r.task.as_ref().ok().map(|t| (t.address, t.tid));
        v.current = named.map(|n| n.0);
        v.tid = named.map(|n| n.1);
        if let Ok(t) = &r.task {
            self.identities.insert((t.address, t.tid), *t);
        }
        if let Some((address, at)) = pending {
            let tid = named.filter(|n| n.0 == address).map(|n| n.1);
            self.switched_in(address, tid, at);
        }
    }

    /// The task at `address` (thread `tid`, when a task record said) ran again at `at`:
    /// its wait ends, unless the one waiting was another thread at that address (it
    /// exited).
    fn switched_in(&mut self, address: u64, tid: Option<u32>, at: u64) {
        let Some(off) = self.off.remove(&address) else {
            return;
        };
        if let (Some(was), Some(is)) = (off.tid, tid) {
            if was != is {
                self.exited += 1;
                return;
            }
        }
        let dt = self.elapsed(off.since, at);
        self.close((address, off.tid.or(tid)), off, dt);
    }

    fn problem(&mut self, p: SwitchProblem) {
        *self.problems.entry(p).or_insert(0) += 1;
    }

    fn times(&mut self, task: TaskKey) -> &mut TaskTimes {
        self.times.entry(task).or_default()
    }

    fn intern(&mut self, s: &SwitchRecord) -> StackId {
        let mut addrs = Vec::with_capacity(1 + s.frames.len());
        addrs.push(s.pc);
        addrs.extend_from_slice(&s.frames);
        if let Some(&id) = self.stack_ids.get(&addrs[..]) {
            return id;
        }
        let id = self.stacks.len() as StackId;
        let key: Box<[u64]> = addrs.into();
        self.stacks.push(key.clone());
        self.stack_ids.insert(key, id);
        id
    }

    /// `to - from`, or 0 (counted) when time went backwards.
    fn elapsed(&mut self, from: u64, to: u64) -> u64 {
        to.checked_sub(from).unwrap_or_else(|| {
            self.problem(SwitchProblem::TimeBackwards);
            0
        })
    }

    /// Notes a switch: the vCPU's last interval was the leaving task's time on the CPU; it
    /// goes off here, with its stack; the next task's wait, if it had one, ends.
    fn apply_switch(&mut self, s: &SwitchRecord) {
        let t = s.time_ns;
        let mut v = self.vcpus.get(&s.vcpu).copied().unwrap_or_default();
        // No task record since its last switch: who ran next is known by address only.
        if let Some((address, at)) = v.pending_in.take() {
            self.switched_in(address, None, at);
        }
        let prev_tid = v.tid.filter(|_| v.current == Some(s.prev));
        let ran = match v.current {
            Some(cur) if cur == s.prev => true,
            Some(_) => {
                self.problem(SwitchProblem::PrevMismatch);
                false
            }
            // A task record that could not be read: nothing to check against.
            None if v.task_record_seen => true,
            None => {
                self.problem(SwitchProblem::BeforeTaskRecord);
                false
            }
        };
        if let (true, Some((since, icount))) = (ran, v.since) {
            let dt = self.elapsed(since, t);
            let insns = match (icount, s.icount) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            };
            let times = self.times((s.prev, prev_tid));
            times.on_ns = times.on_ns.saturating_add(dt);
            times.instructions = times.instructions.saturating_add(insns);
        }
        let stack = self.intern(s);
        let off = Off {
            since: t,
            left_as: s.left_as,
            stack,
            tid: prev_tid,
        };
        if self.off.insert(s.prev, off).is_some() {
            self.problem(SwitchProblem::AlreadyOff);
        }
        self.vcpus.insert(
            s.vcpu,
            Vcpu {
                current: Some(s.next),
                tid: None,
                task_record_seen: v.task_record_seen,
                since: Some((t, s.icount)),
                pending_in: Some((s.next, t)),
            },
        );
    }

    fn close(&mut self, task: TaskKey, off: Off, ns: u64) {
        self.times(task).add_off(off.left_as, ns);
        let c = self
            .folded
            .entry((task, off.left_as, off.stack))
            .or_insert(0);
        *c = c.saturating_add(ns);
    }

    /// Ends the recording at its last time: tasks still off wait until then, and each
    /// vCPU's task ran until then. Once; later calls do nothing.
    pub fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) || !self.any() {
            return;
        }
        let mut reorder = std::mem::take(&mut self.reorder);
        reorder.drain(|e| self.apply(e));
        let end = self.last_ns;
        let pending: Vec<(u64, u64)> = self
            .vcpus
            .values_mut()
            .filter_map(|v| v.pending_in.take())
            .collect();
        for (address, at) in pending {
            self.switched_in(address, None, at);
        }
        let waiting: Vec<(u64, Off)> = self.off.drain().collect();
        self.still_off = waiting.len() as u64;
        for (a, off) in waiting {
            let ns = end.saturating_sub(off.since);
            let task = (a, off.tid);
            self.close(task, off, ns);
            self.last.push(Last {
                task,
                left_as: off.left_as,
                stack: off.stack,
                ns,
            });
        }
        let running: Vec<(TaskKey, u64)> = self
            .vcpus
            .values()
            .filter_map(|v| {
                let a = v.current?;
                Some(((a, v.tid), v.since?.0))
            })
            .collect();
        for (task, since) in running {
            let times = self.times(task);
            times.on_ns = times.on_ns.saturating_add(end.saturating_sub(since));
        }
        let unknown = self
            .times
            .keys()
            .filter(|k| self.identity(**k).is_none())
            .count() as u64;
        if unknown > 0 {
            *self
                .problems
                .entry(SwitchProblem::UnknownAddress)
                .or_insert(0) += unknown;
        }
    }

    /// Takes back the waits still open at the end whose stack `is_exit` says is the
    /// kernel's exit path (a task that exited is not waiting): counted in
    /// [`OffCpu::exited`], not in the times.
    pub fn forget_exits(&mut self, mut is_exit: impl FnMut(&[u64]) -> bool) {
        let last = std::mem::take(&mut self.last);
        for l in last {
            if !is_exit(&self.stacks[l.stack as usize]) {
                self.last.push(l);
                continue;
            }
            self.exited += 1;
            self.still_off -= 1;
            let t = self.times(l.task);
            let slot = match l.left_as {
                LeftAs::Runnable => &mut t.runnable_ns,
                LeftAs::Blocked => &mut t.blocked_ns,
                LeftAs::Unknown => &mut t.unknown_ns,
            };
            *slot = slot.saturating_sub(l.ns);
            if let Some(c) = self.folded.get_mut(&(l.task, l.left_as, l.stack)) {
                *c = c.saturating_sub(l.ns);
            }
        }
    }

    /// Who task `task` is (its latest task record): by its thread id, else the only thread
    /// records named at its address.
    pub fn identity(&self, task: TaskKey) -> Option<&TaskIdentity> {
        match task {
            (a, Some(tid)) => self.identities.get(&(a, tid)),
            (a, None) => {
                let mut at = self.identities.iter().filter(|(k, _)| k.0 == a);
                match (at.next(), at.next()) {
                    (Some((_, t)), None) => Some(t),
                    _ => None,
                }
            }
        }
    }

    /// Every task's totals (in no particular order).
    pub fn tasks(&self) -> impl Iterator<Item = (TaskKey, &TaskTimes)> + '_ {
        self.times.iter().map(|(&k, t)| (k, t))
    }

    /// Every distinct stack a task left on (the switch function's entry, then return
    /// addresses, innermost first).
    pub fn distinct_stacks(&self) -> impl Iterator<Item = &[u64]> + '_ {
        self.stacks.iter().map(|s| &s[..])
    }

    /// Every waiting stack's total (in no particular order).
    pub fn stacks(&self) -> impl Iterator<Item = OffStack<'_>> + '_ {
        self.folded
            .iter()
            .filter(|(_, &ns)| ns > 0)
            .map(|(&(task, left_as, id), &ns)| OffStack {
                task,
                left_as,
                addrs: &self.stacks[id as usize],
                ns,
            })
    }

    /// What was wrong, by problem, with how many records (or tasks).
    pub fn problems(&self) -> Vec<(SwitchProblem, u64)> {
        let mut v: Vec<(SwitchProblem, u64)> =
            self.problems.iter().map(|(&p, &n)| (p, n)).collect();
        v.sort_unstable();
        v
    }

    /// The exact instructions of all tasks.
    pub fn instructions(&self) -> u64 {
        self.times
            .values()
            .fold(0u64, |s, t| s.saturating_add(t.instructions))
    }
}

/// Whether a stack a task left on is Linux's exit path (`do_exit` calls `do_task_dead`, the
/// dead task's last switch): the task is gone, not waiting.
pub fn exit_path(sym: &mut Symbolizer, addrs: &[u64]) -> bool {
    addrs
        .iter()
        .skip(1)
        .filter(|&&a| a >= kern_profile_format::frame_marker::LIMIT)
        .any(|&a| {
            sym.frames(a.wrapping_sub(1))
                .iter()
                .any(|f| &*f.function == "do_task_dead")
        })
}

/// Whether `t` is one of Linux's idle tasks (pid 0, `swapper/N`): their time on the CPU is
/// the vCPU's idle time, and their time off it nobody waits for.
pub fn is_idle(t: &TaskIdentity) -> bool {
    t.pid == 0 && t.tid == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{StopReason, WalkEnd, Walker, TASK_NAME_LEN};

    const A: u64 = 0xffff_8880_0000_1000;
    const B: u64 = 0xffff_8880_0000_2000;
    const IDLE: u64 = 0xffff_ffff_8200_0000;
    const MS: u64 = 1_000_000;

    fn ident(address: u64, tid: u32, name: &str) -> TaskIdentity {
        let mut n = [0; TASK_NAME_LEN];
        n[..name.len()].copy_from_slice(name.as_bytes());
        TaskIdentity {
            address,
            tid,
            pid: tid,
            kernel_thread: false,
            thread_name: n,
            process_name: n,
        }
    }

    fn rec(vcpu: u32, time_ns: u64, t: TaskIdentity) -> TaskRecord {
        TaskRecord {
            vcpu,
            time_ns,
            task: Ok(t),
        }
    }

    fn sw(
        vcpu: u32,
        time_ns: u64,
        icount: u64,
        prev: u64,
        next: u64,
        left_as: LeftAs,
    ) -> SwitchRecord {
        SwitchRecord {
            vcpu,
            time_ns,
            icount: Some(icount),
            prev,
            next,
            left_as,
            stop: WalkEnd::new(StopReason::NullFramePointer, Walker::FramePointers, false),
            pc: 0x100,
            frames: vec![0x200 + prev % 7],
        }
    }

    /// A runs, blocks for 1 s while idle runs, runs again, is preempted by B for 0.5 s.
    fn run() -> OffCpu {
        let mut o = OffCpu::default();
        o.task_record(&rec(0, 0, ident(A, 10, "a")));
        o.switch(&sw(0, 100 * MS, 1000, A, IDLE, LeftAs::Blocked));
        o.task_record(&rec(0, 100 * MS, ident(IDLE, 0, "swapper/0")));
        o.switch(&sw(0, 1100 * MS, 1500, IDLE, A, LeftAs::Runnable));
        o.task_record(&rec(0, 1100 * MS, ident(A, 10, "a")));
        o.switch(&sw(0, 1300 * MS, 4500, A, B, LeftAs::Runnable));
        o.task_record(&rec(0, 1300 * MS, ident(B, 20, "b")));
        o.switch(&sw(0, 1800 * MS, 5500, B, A, LeftAs::Blocked));
        o.task_record(&rec(0, 1800 * MS, ident(A, 10, "a")));
        o.saw_time(2000 * MS);
        o.finish();
        o
    }

    fn times(o: &OffCpu, a: u64) -> TaskTimes {
        o.tasks().find(|t| t.0 .0 == a).map(|t| *t.1).unwrap()
    }

    #[test]
    fn intervals_off_split_by_how_the_task_left() {
        let o = run();
        assert_eq!(o.switches, 4);
        let a = times(&o, A);
        assert_eq!(a.blocked_ns, 1000 * MS);
        assert_eq!(a.runnable_ns, 500 * MS);
        // 1.1 s to 1.3 s, then from 1.8 s to the end; before its first switch nothing counts.
        assert_eq!(a.on_ns, 200 * MS + 200 * MS);
        assert_eq!(a.instructions, 3000);
        let b = times(&o, B);
        // B is still off at the end: 1.8 s to 2 s, blocked.
        assert_eq!(
            (b.on_ns, b.blocked_ns, b.instructions),
            (500 * MS, 200 * MS, 1000)
        );
        assert_eq!(o.still_off, 2, "B, and idle");
        assert_eq!(times(&o, IDLE).on_ns, 1000 * MS);
        assert_eq!(o.instructions(), 3000 + 1000 + 500);
        assert!(is_idle(o.identity((IDLE, Some(0))).unwrap()));
        assert_eq!(
            o.identity((A, None)).unwrap().tid,
            10,
            "the only thread at A"
        );
        assert!(o.problems().is_empty(), "{:?}", o.problems());
        let blocked_a: u64 = o
            .stacks()
            .filter(|s| s.task.0 == A && s.left_as == LeftAs::Blocked)
            .map(|s| s.ns)
            .sum();
        assert_eq!(blocked_a, 1000 * MS);
    }

    #[test]
    fn bad_switches_are_counted_not_fatal() {
        let mut o = OffCpu::default();
        // Before any task record; then a prev that is not the vCPU's task; time backwards.
        o.switch(&sw(0, 10 * MS, 0, A, B, LeftAs::Blocked));
        o.switch(&sw(0, 20 * MS, 0, A, B, LeftAs::Blocked));
        o.switch(&sw(1, 5 * MS, 0, B, A, LeftAs::Runnable));
        o.finish();
        o.finish();
        let p = o.problems();
        assert!(p.contains(&(SwitchProblem::BeforeTaskRecord, 2)), "{p:?}");
        assert!(p.contains(&(SwitchProblem::PrevMismatch, 1)), "{p:?}");
        assert!(p.contains(&(SwitchProblem::AlreadyOff, 1)), "{p:?}");
        assert!(p.contains(&(SwitchProblem::TimeBackwards, 1)), "{p:?}");
        assert!(p.contains(&(SwitchProblem::UnknownAddress, 2)), "{p:?}");
        // Nothing without switches.
        let mut none = OffCpu::default();
        none.finish();
        assert!(!none.any() && none.tasks().next().is_none());
    }

    #[test]
    fn a_reused_address_does_not_end_an_exited_tasks_wait() {
        let mut o = OffCpu::default();
        o.task_record(&rec(0, 0, ident(A, 10, "a")));
        // A exits at 100 ms (its last switch out); B runs; at 500 ms a new thread, 11, at
        // A's address, runs.
        o.switch(&sw(0, 100 * MS, 0, A, B, LeftAs::Blocked));
        o.task_record(&rec(0, 100 * MS, ident(B, 20, "b")));
        o.switch(&sw(0, 500 * MS, 0, B, A, LeftAs::Blocked));
        o.task_record(&rec(0, 500 * MS, ident(A, 11, "a2")));
        o.finish();
        assert_eq!(o.exited, 1);
        let of = |tid| o.tasks().find(|t| t.0 == (A, Some(tid))).map(|t| *t.1);
        assert_eq!(
            of(10).map(|t| t.blocked_ns),
            None,
            "no wait closed for thread 10"
        );
        assert_eq!(of(11).map(|t| t.blocked_ns), Some(0));
        assert_eq!(o.identity((A, Some(11))).unwrap().tid, 11);
        // A wait open at the end in the exit path is taken back.
        let mut o = run();
        o.forget_exits(|addrs| addrs[1] == 0x200 + B % 7);
        assert_eq!((o.exited, o.still_off), (1, 1));
        assert_eq!(times(&o, B).blocked_ns, 0);
        assert!(o.stacks().all(|s| s.task.0 != B));
    }

    #[test]
    fn memory_follows_tasks_and_stacks_not_switches() {
        let mut o = OffCpu::default();
        o.task_record(&rec(0, 0, ident(A, 10, "a")));
        for i in 0..10_000u64 {
            let (prev, next) = if i % 2 == 0 { (A, B) } else { (B, A) };
            o.switch(&sw(0, i * MS, i, prev, next, LeftAs::Runnable));
        }
        o.finish();
        // A as its task record named it (thread 10), then by address alone (no records
        // after the switches), and B.
        assert_eq!(o.times.len(), 3);
        assert!(o.folded.len() <= 3);
        assert!(o
            .problems()
            .iter()
            .all(|p| p.0 == SwitchProblem::UnknownAddress));
    }
}
