//! `tasks=`: which guest task a sample ran in, read from the guest's memory at each sample:
//! the current-task pointer (a register, or a per-CPU slot a register points to), then the
//! task's ids and names at offsets found once at start (Linux: its BTF and kallsyms; another
//! kernel: a global pointer and a struct's members described by `tasks=POINTER->ID,NAME`,
//! checked against its DWARF, [`dwarf`]). A vCPU
//! writes a task record (format kind 9) only when its task changes, and at the start of each
//! batch, so that a batch the writer drops loses no task change for the batches after it.

use kern_profile_format::{Arch, TaskIdentity, TaskRecord, TaskUnknown, TASK_NAME_LEN};

use crate::capture::{Reg, RegisterReader};

pub mod description;
pub mod dwarf;
mod error;
pub mod linux;

pub use error::TaskDescriptionError;
pub use linux::{describe_linux_spec, linux_image_spec, linux_spec, LayoutSource, LinuxSpecError};

/// Linux's `PF_KTHREAD` in `task_struct.flags` (unchanged since 2.6.26).
pub const PF_KTHREAD: u32 = 0x0020_0000;

/// Where a kernel keeps its current task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Current {
    /// A register holds the task pointer in kernel mode ([`Reg::TaskBase`]: aarch64
    /// `SP_EL0`, riscv64 `tp`), another in user mode where the architecture has one
    /// ([`Reg::TaskBaseUser`]: riscv64 `sscratch`; aarch64's, `TPIDR_EL1`, holds an
    /// offset, [`Current::RegisterElsePerCpu`]).
    InRegister,
    /// The pointer is at this offset from a per-CPU base register ([`Reg::TaskBase`] in kernel
    /// mode, [`Reg::TaskBaseUser`] in user mode: x86_64 `gs_base`, `k_gs_base`; i386 `fs_base`
    /// in kernel mode, itself an offset: the pointer is at the sum, 32 bits wide).
    PerCpu { offset: u64 },
    /// A register holds the task pointer in kernel mode ([`Reg::TaskBase`]: aarch64
    /// `SP_EL0`); in user mode, where that register holds the program's stack pointer, and
    /// in entry code before the kernel loads it, the pointer is in a per-CPU slot: `offset`
    /// (a link address) plus the per-CPU offset in [`Reg::TaskBaseUser`]. aarch64 Linux's
    /// `__entry_task` at `TPIDR_EL1`: what its entry from user mode loads `SP_EL0` from.
    /// Readable where the vCPU runs at EL1 (`trigger=interrupt`'s samples of user mode); a
    /// read at EL0 may be denied, and such a sample then has no task register, as before.
    RegisterElsePerCpu { offset: u64 },
    /// A global variable at this address holds the task pointer (null when no task runs):
    /// one for the whole machine, so one vCPU's task (per-CPU variables: not yet).
    Global { address: u64 },
}

/// How to read a task: where the current one is and its fields' offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSpec {
    pub current: Current,
    /// Byte offsets in the task structure: thread id, process id (Linux `pid`, `tgid`,
    /// 4 bytes each), name (`comm`), group leader (a pointer), flags (4 bytes).
    pub tid: u32,
    pub pid: u32,
    pub name: u32,
    /// The name's length in bytes (at most [`TASK_NAME_LEN`] are read).
    pub name_len: u32,
    pub leader: u32,
    pub flags: u32,
    /// The bit of `flags` that marks a kernel thread; 0 where tasks have no such flag
    /// (`flags` is then not read).
    pub kernel_thread_flag: u32,
    /// The run state (Linux `__state`, 4 bytes: 0 while the task may run), read at task
    /// switches (`switches=`), when the layout has it.
    pub state: Option<u32>,
}

/// What identifies a task between samples: a record is written when this changes.
type Seen = Result<(u64, u32, u32, [u8; TASK_NAME_LEN]), TaskUnknown>;

/// A task seen again at its address in the same address space is taken for the same task
/// without reading its name, but for every this many samples: an exec gives a task a new
/// address space; a rename (`prctl(PR_SET_NAME)`) shows within this many samples.
pub const NAME_CHECK_EVERY: u32 = 64;

/// One vCPU's task reading: the spec and the task last recorded.
#[derive(Debug, Clone)]
pub struct TaskReader {
    spec: TaskSpec,
    width: usize,
    kernel_start: u64,
    /// A task pointer's alignment.
    align: u64,
    last: Option<(Seen, TaskRecord)>,
    /// The address space of the last sample, and the samples since its task's name was read.
    space: Option<u64>,
    unchecked: u32,
    /// Every task switch is seen ([`TaskReader::seeing_switches`]).
    sees_switches: bool,
    /// The task last read or switched to, when it could be.
    known: Option<(u64, u32, u32, [u8; TASK_NAME_LEN])>,
    /// The last task described whole: recorded again (after an unknown stretch) without
    /// reading its memory, which identity-mapped kernel code cannot reach.
    described: Option<TaskIdentity>,
    /// Samples after a switch that may still find the leaving task where the kernel keeps
    /// the current one (see [`STALE_AFTER_SWITCH`]).
    after_switch: u8,
    /// The per-CPU register holds an offset to add, not the area's address (i386).
    base_is_offset: bool,
    /// [`Reg::TaskBaseUser`] holds the task itself under [`Current::InRegister`] (riscv64),
    /// not a per-CPU offset (aarch64).
    user_register_is_task: bool,
}

/// Samples after a switch that take the switch's word over a stale current-task pointer.
const STALE_AFTER_SWITCH: u8 = 2;

impl TaskReader {
    pub fn new(spec: TaskSpec, arch: Arch) -> Self {
        // Linux's kernel half; another kernel's addresses may be anywhere (the example
        // kernels run in low memory), so any non-null pointer goes.
        // A described struct is aligned as its 4-byte ID at least, Linux's as a pointer.
        let (kernel_start, align) = match spec.current {
            Current::Global { .. } => (0, 4),
            _ => (
                kern_profile_arch::guest(arch).kernel_start(),
                arch.ptr_width() as u64,
            ),
        };
        TaskReader {
            spec,
            width: arch.ptr_width() as usize,
            kernel_start,
            align,
            last: None,
            space: None,
            unchecked: 0,
            sees_switches: false,
            known: None,
            described: None,
            after_switch: 0,
            base_is_offset: arch == Arch::I386,
            user_register_is_task: arch != Arch::Aarch64,
        }
    }

    /// A reader told of every task switch ([`TaskReader::switched_to`], `switches=`): where
    /// no register holds the current task (aarch64 user mode), the task last named is.
    pub fn seeing_switches(self) -> Self {
        TaskReader {
            sees_switches: true,
            ..self
        }
    }

    /// Reads the vCPU's current task at a sample at `pc` (`user`: of user mode, in address
    /// space `space`, its page-table base when read) taken at `time_ns`.
    /// Returns the record to write before the sample: when the task changed, or when
    /// `batch_start` (the vCPU's batch is empty: each batch restates its task).
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        &mut self,
        pc: u64,
        user: bool,
        space: Option<u64>,
        time_ns: u64,
        vcpu: u32,
        batch_start: bool,
        regs: &mut impl RegisterReader,
        mut mem: impl FnMut(u64, &mut [u8]) -> bool,
    ) -> Option<TaskRecord> {
        let seen = match !user && pc < self.kernel_start {
            true => Err(TaskUnknown::Boot),
            false => match (self.identify(user, space, regs, &mut mem), self.known) {
                // Every switch seen, the task the last switch (or sample) named is still
                // current where its pointer cannot be read: aarch64 user mode (no register
                // holds it), entry and exit code with the user's stack pointer in `SP_EL0`,
                // the page-table-isolation trampoline before the kernel is mapped.
                (Err(_), Some(known)) if self.sees_switches => Ok(known),
                (seen, _) => seen,
            },
        };
        self.space = space;
        if let Ok(seen) = seen {
            self.known = Some(seen);
        }
        if let Some((last, rec)) = &self.last {
            if *last == seen {
                return batch_start.then_some(*rec);
            }
        }
        let rec = TaskRecord {
            vcpu,
            time_ns,
            task: self.identity_of(seen, &mut mem),
        };
        self.last = Some((seen, rec));
        Some(rec)
    }

    /// The whole identity of the task `seen` names: the last one described when it is the
    /// same task (address, ids, name), else read from its memory.
    fn identity_of(
        &mut self,
        seen: Seen,
        mem: &mut impl FnMut(u64, &mut [u8]) -> bool,
    ) -> Result<TaskIdentity, TaskUnknown> {
        let key = seen?;
        let (address, tid, pid, thread_name) = key;
        let same = |d: &TaskIdentity| (d.address, d.tid, d.pid, d.thread_name) == key;
        if let Some(d) = self.described.filter(same) {
            return Ok(d);
        }
        let task = self.describe(address, tid, pid, thread_name, mem);
        if let Ok(d) = task {
            self.described = Some(d);
        }
        task
    }

    /// The current task's address, ids and name: what tells one task from another.
    fn identify(
        &mut self,
        user: bool,
        space: Option<u64>,
        regs: &mut impl RegisterReader,
        mem: &mut impl FnMut(u64, &mut [u8]) -> bool,
    ) -> Seen {
        let s = &self.spec;
        let task = match s.current {
            Current::InRegister => {
                let reg = match user {
                    true if self.user_register_is_task => Some(Reg::TaskBaseUser),
                    true => None,
                    false => Some(Reg::TaskBase),
                };
                reg.and_then(|r| regs.read(r))
                    .ok_or(TaskUnknown::NoRegister)?
            }
            Current::PerCpu { offset } => {
                let slot = self.per_cpu_slot(offset, user, regs)?;
                self.word(slot, mem).ok_or(TaskUnknown::Unreadable)?
            }
            Current::RegisterElsePerCpu { offset } => {
                let held = match user {
                    true => None,
                    false => regs.read(Reg::TaskBase),
                };
                let mut per_cpu = || {
                    let slot = self.entry_slot(offset, regs)?;
                    self.word(slot, mem).ok_or(TaskUnknown::Unreadable)
                };
                match held {
                    Some(t) if self.check_pointer(t).is_ok() => t,
                    // Entry code with the program's stack pointer still in the register:
                    // the slot, or the register's own fault when the slot fails too.
                    Some(_) => per_cpu().map_err(|_| TaskUnknown::BadPointer)?,
                    // User mode: a slot that cannot be read leaves nothing that names the
                    // task, as without one. A look at EL0 may be denied kernel memory (QEMU
                    // 10.0's gdbstub is at every one; 11.1's is not); an interrupt's sample
                    // reads at EL1.
                    None => per_cpu().map_err(|_| TaskUnknown::NoRegister)?,
                }
            }
            Current::Global { address } => {
                self.word(address, mem).ok_or(TaskUnknown::Unreadable)?
            }
        };
        self.check_pointer(task)?;
        // Just after a switch the kernel has not yet stored the next task where it keeps
        // the current one (x86 does in `__switch_to`, after the hook): the switch said which
        // task runs. A few samples at most, so that a switch the hook missed (the vCPU was
        // busy) does not name the wrong task for long.
        if let Some(known) = self.known.filter(|k| k.0 != task) {
            if self.after_switch > 0 {
                self.after_switch -= 1;
                return Ok(known);
            }
        }
        self.after_switch = 0;
        // The same task as last time, by its address, in the same address space: nothing
        // more to read (see NAME_CHECK_EVERY). A task freed and another made at its address
        // between two samples, with the same name, would keep the old ids.
        let last = match &self.last {
            Some((Ok(last), _)) if last.0 == task => Some(*last),
            _ => None,
        };
        if let Some(last) = last {
            if space.is_some() && space == self.space && self.unchecked < NAME_CHECK_EVERY {
                self.unchecked += 1;
                return Ok(last);
            }
        }
        self.unchecked = 0;
        let name = self.name(task, mem)?;
        if let Some(last) = last.filter(|l| l.3 == name) {
            return Ok(last);
        }
        let (tid, pid) = self.ids(task, mem).ok_or(TaskUnknown::Unreadable)?;
        Ok((task, tid, pid, name))
    }

    /// At a task switch, the task that runs next, `next` (the switch function's argument:
    /// the kernel has not yet made it current). Returns its record, to write after the
    /// switch; the samples after it that see the same task write none.
    pub fn switched_to(
        &mut self,
        next: u64,
        time_ns: u64,
        vcpu: u32,
        mut mem: impl FnMut(u64, &mut [u8]) -> bool,
    ) -> TaskRecord {
        let seen = self.check_pointer(next).and_then(|()| {
            let name = self.name(next, &mut mem)?;
            let (tid, pid) = self.ids(next, &mut mem).ok_or(TaskUnknown::Unreadable)?;
            Ok((next, tid, pid, name))
        });
        let rec = TaskRecord {
            vcpu,
            time_ns,
            task: self.identity_of(seen, &mut mem),
        };
        self.last = Some((seen, rec));
        self.known = seen.ok();
        self.after_switch = STALE_AFTER_SWITCH;
        // The next sample reads the name again: it checks that the kernel did switch.
        self.space = None;
        self.unchecked = 0;
        rec
    }

    /// Where the next [`TaskReader::read`] reads the current-task pointer (a per-CPU slot or
    /// a global), for a source that reads it ahead of the sample (the gdbstub's, in the
    /// round trip that reads the registers); `None` where a register holds the task.
    pub fn current_slot(&self, user: bool, regs: &mut impl RegisterReader) -> Option<u64> {
        match self.spec.current {
            Current::InRegister => None,
            Current::PerCpu { offset } => self.per_cpu_slot(offset, user, regs).ok(),
            // Read ahead in kernel mode too: entry code falls back to it.
            Current::RegisterElsePerCpu { offset } => self.entry_slot(offset, regs).ok(),
            Current::Global { address } => Some(address),
        }
    }

    /// A task pointer must be a kernel address, aligned, not null.
    fn check_pointer(&self, task: u64) -> Result<(), TaskUnknown> {
        match task == 0 || task < self.kernel_start || !task.is_multiple_of(self.align) {
            true => Err(TaskUnknown::BadPointer),
            false => Ok(()),
        }
    }

    /// The run state of `task` (see [`TaskSpec::state`]), when the layout has it and the
    /// guest's memory holds it.
    pub fn state(&self, task: u64, mut mem: impl FnMut(u64, &mut [u8]) -> bool) -> Option<u32> {
        self.check_pointer(task).ok()?;
        self.u32_at(task, self.spec.state?, &mut mem)
    }

    /// Where the per-CPU slot at `offset` is for this vCPU.
    fn per_cpu_slot(
        &self,
        offset: u64,
        user: bool,
        regs: &mut impl RegisterReader,
    ) -> Result<u64, TaskUnknown> {
        if !self.base_is_offset {
            return Ok(self.per_cpu_base(user, regs)?.wrapping_add(offset));
        }
        // i386: the kernel loads its per-CPU segment into FS at entry, and its base is the
        // CPU's `__per_cpu_offset`, added to the symbol's link address (32 bits wrap). In
        // user mode FS is the program's.
        if user {
            return Err(TaskUnknown::NoRegister);
        }
        let base = regs.read(Reg::TaskBase).ok_or(TaskUnknown::NoRegister)?;
        let slot = base.wrapping_add(offset) & 0xffff_ffff;
        match slot >= self.kernel_start {
            true => Ok(slot),
            false => Err(TaskUnknown::BadPointer),
        }
    }

    /// Where [`Current::RegisterElsePerCpu`]'s slot at `offset` is for this vCPU: the
    /// per-CPU offset register is the same in either mode.
    fn entry_slot(&self, offset: u64, regs: &mut impl RegisterReader) -> Result<u64, TaskUnknown> {
        let base = regs
            .read(Reg::TaskBaseUser)
            .ok_or(TaskUnknown::NoRegister)?;
        let slot = base.wrapping_add(offset);
        match slot >= self.kernel_start && slot.is_multiple_of(self.align) {
            true => Ok(slot),
            false => Err(TaskUnknown::BadPointer),
        }
    }

    /// The per-CPU base: the mode's register, or the other one when only it holds a kernel
    /// address (an entry stub samples before its `swapgs`, or after the one of its exit).
    fn per_cpu_base(&self, user: bool, regs: &mut impl RegisterReader) -> Result<u64, TaskUnknown> {
        let (first, second) = match user {
            false => (Reg::TaskBase, Reg::TaskBaseUser),
            true => (Reg::TaskBaseUser, Reg::TaskBase),
        };
        let kernel = |v: &u64| *v >= self.kernel_start;
        match regs.read(first) {
            Some(b) if kernel(&b) => Ok(b),
            got => match regs.read(second) {
                Some(b) if kernel(&b) => Ok(b),
                other => match got.or(other) {
                    Some(_) => Err(TaskUnknown::BadPointer),
                    None => Err(TaskUnknown::NoRegister),
                },
            },
        }
    }

    /// The thread and process ids, in one read where they are neighbours (Linux's are).
    fn ids(&self, task: u64, mem: &mut impl FnMut(u64, &mut [u8]) -> bool) -> Option<(u32, u32)> {
        let s = &self.spec;
        if s.pid == s.tid {
            let id = self.u32_at(task, s.tid, mem)?;
            return Some((id, id));
        }
        if s.pid == s.tid.wrapping_add(4) {
            let mut b = [0u8; 8];
            mem(task.wrapping_add(s.tid as u64), &mut b).then_some(())?;
            let [a, b] = [&b[..4], &b[4..]].map(|x| u32::from_le_bytes(x.try_into().unwrap()));
            return Some((a, b));
        }
        Some((
            self.u32_at(task, s.tid, mem)?,
            self.u32_at(task, s.pid, mem)?,
        ))
    }

    /// The name at `task`: printable bytes up to a NUL; all of its bytes without one.
    fn name(
        &self,
        task: u64,
        mem: &mut impl FnMut(u64, &mut [u8]) -> bool,
    ) -> Result<[u8; TASK_NAME_LEN], TaskUnknown> {
        let len = (self.spec.name_len as usize).clamp(1, TASK_NAME_LEN);
        let mut name = [0u8; TASK_NAME_LEN];
        if !mem(task.wrapping_add(self.spec.name as u64), &mut name[..len]) {
            return Err(TaskUnknown::Unreadable);
        }
        let end = name.iter().position(|&b| b == 0);
        let printable = name[..end.unwrap_or(len)]
            .iter()
            .all(|&b| (0x20..0x7f).contains(&b) || b >= 0x80);
        match (end, printable) {
            (Some(_), true) => Ok(name),
            _ => Err(TaskUnknown::BadName),
        }
    }

    /// The whole identity of a task first seen: its flags and its process's name.
    fn describe(
        &self,
        address: u64,
        tid: u32,
        pid: u32,
        thread_name: [u8; TASK_NAME_LEN],
        mem: &mut impl FnMut(u64, &mut [u8]) -> bool,
    ) -> Result<TaskIdentity, TaskUnknown> {
        let s = &self.spec;
        let flags = match s.kernel_thread_flag {
            0 => 0,
            _ => self
                .u32_at(address, s.flags, mem)
                .ok_or(TaskUnknown::Unreadable)?,
        };
        let process_name = if tid == pid {
            thread_name
        } else {
            let leader = self
                .word(address.wrapping_add(s.leader as u64), mem)
                .ok_or(TaskUnknown::Unreadable)?;
            if leader < self.kernel_start {
                return Err(TaskUnknown::BadPointer);
            }
            self.name(leader, mem)?
        };
        Ok(TaskIdentity {
            address,
            tid,
            pid,
            kernel_thread: flags & s.kernel_thread_flag != 0,
            thread_name,
            process_name,
        })
    }

    fn u32_at(
        &self,
        task: u64,
        offset: u32,
        mem: &mut impl FnMut(u64, &mut [u8]) -> bool,
    ) -> Option<u32> {
        let mut b = [0u8; 4];
        mem(task.wrapping_add(offset as u64), &mut b).then_some(u32::from_le_bytes(b))
    }

    fn word(&self, addr: u64, mem: &mut impl FnMut(u64, &mut [u8]) -> bool) -> Option<u64> {
        let mut b = [0u8; 8];
        mem(addr, &mut b[..self.width]).then_some(u64::from_le_bytes(b))
    }
}

#[cfg(test)]
mod tests;
