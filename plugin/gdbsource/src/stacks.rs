//! One look at every vCPU: stop the guest, read each vCPU's registers and walk its stack
//! with the plugin's unwinders over `m` reads (one per window of stack), resume. Given the
//! kernel's unwind tables (ORC, DWARF CFI), the walk follows them where they cover the pc,
//! as the plugin's does: whole stacks of a kernel without frame pointers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kern_profile_arch::registers::{clean_return_address, cpu_mode, privilege};
use kern_profile_arch::{guest, CoreRegs};
use kern_profile_format::{
    Arch, CpuMode, Privilege, StopReason, TaskIdentity, TaskUnknown, WalkEnd,
};
use kern_profile_sampler::capture::{Reg, RegisterReader};
use kern_profile_sampler::task::{TaskReader, TaskSpec};
use kern_profile_unwind::{
    walk_guest, walk_tables, Crossings, KernelOs, PtrWidth, StartRegs, UnwindTables,
};

use crate::client::{stop_thread, Client, Limits, ThreadId};
use crate::{target, GdbError};

/// How much one look may read, and how it walks.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Return addresses per vCPU at most.
    pub depth: usize,
    /// Bytes one `m` asks for (up to the end of the page it starts in).
    pub window: usize,
    /// `m` requests per vCPU at most.
    pub max_reads: u32,
    /// The kernel's unwind tables (`kern_profile_unwind::tables::load_kernel_tables`), when
    /// it has some: walked first, frame pointers where they do not cover the pc.
    pub tables: Option<Arc<UnwindTables>>,
    /// Which kernel it is (kern-profile-symbols' `KernelFile::kernel_os`), for Linux's
    /// layouts in the walks: taken on Linux, never on another kernel, and only with Linux's
    /// own selectors when unknown (no kernel file).
    pub kernel_os: KernelOs,
    /// Where the kernel's tasks are (Linux: `kern_profile_sampler::task::linux_spec`): each
    /// look then also reads every vCPU's task, as the plugin's `tasks=` does.
    pub tasks: Option<TaskSpec>,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            depth: 64,
            window: 4096,
            max_reads: 32,
            tables: None,
            kernel_os: KernelOs::Unknown,
            tasks: None,
        }
    }
}

/// One vCPU's state and stack.
#[derive(Debug, Clone)]
pub struct VcpuStack {
    pub thread: ThreadId,
    pub regs: CoreRegs,
    pub privilege: Privilege,
    /// From x86 `cr0`/`efer`, riscv `satp` or aarch64 `SCTLR_EL1`.
    pub mode: CpuMode,
    /// x86 `cr3`, riscv `satp`, aarch64 `TTBR0_EL1`, when the stub has it.
    pub page_table_base: Option<u64>,
    /// The word at the stack pointer: the caller, where a function has no frame yet.
    pub sp_word: Option<u64>,
    /// riscv `ra`, aarch64 `x30`, with pointer authentication bits cleared.
    pub return_register: Option<u64>,
    /// Return addresses (and the unwinder's boundary markers), innermost first.
    pub frames: Vec<u64>,
    /// Walked by the kernel's unwind tables, which found every caller themselves (no `[SP]`
    /// or return-register fix applies).
    pub by_tables: bool,
    /// How the walk ended: reason, walker, and whether it crossed from user space.
    pub stop: WalkEnd,
    /// The first read the stub refused: address and its reply.
    pub refused: Option<(u64, String)>,
    /// `m` requests made.
    pub reads: u32,
    /// With [`StackOptions::tasks`], the vCPU's task when it changed since the last look (or
    /// at the first): the task record to write before this sample.
    pub task: Option<Result<TaskIdentity, TaskUnknown>>,
}

/// Every vCPU at one stop.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub arch: Arch,
    pub vcpus: Vec<VcpuStack>,
    /// From connecting (QEMU stops the guest) to the detach's reply (it runs again).
    pub stopped: Duration,
    /// Requests sent while stopped.
    pub requests: u32,
    /// Whether the stub took `QStartNoAckMode`.
    pub no_ack: bool,
}

/// Connects to the stub at `addr`, takes every vCPU's stack and detaches, which leaves the
/// guest running, on error too where the connection still works.
pub fn stacks(addr: &str, limits: Limits, opts: StackOptions) -> Result<Snapshot, GdbError> {
    let start = Instant::now();
    let mut c = Client::connect(addr, limits)?;
    let mut pid = None;
    let result = take(&mut c, &opts, &mut pid);
    let detached = c.detach(pid);
    let mut snap = result?;
    detached?;
    snap.stopped = start.elapsed();
    snap.requests = c.requests();
    snap.no_ack = !c.acks();
    Ok(snap)
}

fn take(c: &mut Client, opts: &StackOptions, pid: &mut Option<u64>) -> Result<Snapshot, GdbError> {
    let (stop_pid, threads) = Target::stopped(c)?;
    // Known before the rest can fail: the detach names it.
    *pid = stop_pid;
    let mut target = Target::describe(c, stop_pid, threads)?;
    let vcpus = target.look(c, opts, Stop::Already)?;
    Ok(Snapshot {
        arch: target.arch,
        vcpus,
        stopped: Duration::ZERO,
        requests: 0,
        no_ack: false,
    })
}

/// What one connection learns once, the guest stopped: the architecture, where the extra
/// registers are, the vCPUs and the pid a detach names.
#[derive(Debug, Clone)]
pub struct Target {
    pub arch: Arch,
    pub threads: Vec<ThreadId>,
    pub pid: Option<u64>,
    priv_reg: Option<u32>,
    base_reg: Option<u32>,
    /// aarch64 `SCTLR_EL1`: the CPU mode.
    ctrl_reg: Option<u32>,
    /// Where `current` is, read with `p` when samples name their task (aarch64 `SP_EL0`,
    /// riscv64 `sscratch` in user mode).
    task_reg: Option<u32>,
    task_user_reg: Option<u32>,
    /// Samples name their task: the looks read `task_reg` and `task_user_reg`.
    want_tasks: bool,
    /// Per vCPU, the stack its last walk read (lowest address, end): the next look reads
    /// it ahead, in the write that stops the guest, as the stack mostly stays put.
    spans: Vec<Option<(u64, u64)>>,
    /// Per vCPU, with [`StackOptions::tasks`]: its task reader, which keeps the task last
    /// read, and where its current-task pointer was (read ahead as the stack is).
    tasks: Vec<Option<TaskReader>>,
    task_slots: Vec<Option<u64>>,
    /// The vCPU the stub's last stop reply named: it selects that one at a stop.
    stopped_vcpu: usize,
}

/// The most bytes a look reads ahead of its walk, per vCPU.
const MAX_AHEAD: u64 = 16 << 10;
/// Bytes read ahead below the last walk's lowest address: the stack may be deeper now.
const AHEAD_BELOW: u64 = 256;

/// Whether a look stops the guest itself, or finds it stopped (just connected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Already,
    Interrupt,
}

/// What one vCPU's part of a look asks, in order.
struct Plan {
    vcpu: usize,
    /// `Hg` first (the stub has another thread selected).
    select: bool,
    /// `m` requests of the stack read ahead.
    ahead: Vec<String>,
}

impl Target {
    /// Asks the stopped stub (just connected, or after an interrupt) what it serves.
    pub fn open(c: &mut Client) -> Result<Target, GdbError> {
        let (pid, threads) = Self::stopped(c)?;
        Self::describe(c, pid, threads)
    }

    /// The pid a detach names and the threads, from the stop reply and the thread list.
    fn stopped(c: &mut Client) -> Result<(Option<u64>, Vec<ThreadId>), GdbError> {
        // The stop reply names the stopped thread, whose pid the detach needs.
        let stop = c.halt_reason()?;
        let threads = c.threads()?;
        let pid = stop_pid(&stop).or(threads[0].pid);
        Ok((pid, threads))
    }

    /// The architecture and where its extra registers are, from the target description.
    fn describe(
        c: &mut Client,
        pid: Option<u64>,
        threads: Vec<ThreadId>,
    ) -> Result<Target, GdbError> {
        let desc = target::read(c, false)?;
        let arch =
            target::arch_of(&desc.architecture).ok_or_else(|| GdbError::UnsupportedArch {
                addr: c.addr().to_string(),
                arch: desc.architecture.clone(),
            })?;
        let extra = guest(arch).gdb_extra_registers();
        let desc = match extra == Default::default() {
            true => desc,
            false => target::read(c, true)?,
        };
        let regnum = |names: &[&str]| names.iter().find_map(|n| desc.regnum(n));
        let stopped_vcpu = vcpu_of(&threads, c.selected()).unwrap_or(0);
        Ok(Target {
            arch,
            spans: vec![None; threads.len()],
            tasks: vec![None; threads.len()],
            task_slots: vec![None; threads.len()],
            threads,
            pid,
            priv_reg: regnum(extra.privilege),
            base_reg: regnum(extra.page_table_base),
            ctrl_reg: regnum(extra.control),
            task_reg: regnum(extra.task_base),
            task_user_reg: regnum(extra.task_base_user),
            want_tasks: false,
            stopped_vcpu,
        })
    }

    /// The task registers a look reads with `p`, when samples name their task.
    fn task_regs(&self) -> impl Iterator<Item = u32> {
        let want = self.want_tasks;
        [self.task_reg, self.task_user_reg]
            .into_iter()
            .flatten()
            .filter(move |_| want)
    }

    /// Every vCPU's registers and stack. The requests of every vCPU (its registers, and the
    /// stack its last walk read) go in one write, after the 0x03 that stops the guest with
    /// `Stop::Interrupt`: one round trip, and more only where a walk leaves what was read.
    pub fn look(
        &mut self,
        c: &mut Client,
        opts: &StackOptions,
        stop: Stop,
    ) -> Result<Vec<VcpuStack>, GdbError> {
        // The stub selects the thread it names at a stop: that vCPU first, without `Hg`.
        let first = match stop {
            Stop::Interrupt => self.stopped_vcpu,
            Stop::Already => vcpu_of(&self.threads, c.selected()).unwrap_or(usize::MAX),
        };
        self.want_tasks = opts.tasks.is_some();
        let (plans, reqs) = self.batch(c, first);
        let replies = match stop {
            Stop::Interrupt => {
                let (stopped, replies) = c.interrupt_with(&reqs)?;
                let named = vcpu_of(&self.threads, stop_thread(&stopped).as_ref());
                if let Some(v) = named {
                    self.stopped_vcpu = v;
                }
                if first < self.threads.len() && named != Some(first) {
                    // The first vCPU's requests went, without `Hg`, to another one: ask
                    // again, selecting each.
                    let (again, reqs) = self.batch(c, usize::MAX);
                    return self.finish_look(c, opts, again, &reqs, None);
                }
                replies
            }
            Stop::Already => c.pipeline(&reqs)?,
        };
        self.finish_look(c, opts, plans, &reqs, Some(replies))
    }

    /// The requests of a look, `first` (the stub's selected vCPU) first without `Hg`.
    fn batch(&self, c: &Client, first: usize) -> (Vec<Plan>, Vec<String>) {
        let mut order: Vec<usize> = (0..self.threads.len()).collect();
        if first < order.len() {
            order.remove(first);
            order.insert(0, first);
        }
        let mut reqs = Vec::new();
        let plans: Vec<Plan> = order
            .into_iter()
            .map(|v| {
                let select = v != first;
                if select {
                    reqs.push(format!("Hg{}", self.threads[v].raw));
                }
                reqs.push("g".into());
                reqs.extend(self.priv_reg.map(|n| format!("p{n:x}")));
                reqs.extend(self.base_reg.map(|n| format!("p{n:x}")));
                reqs.extend(self.ctrl_reg.map(|n| format!("p{n:x}")));
                reqs.extend(self.task_regs().map(|n| format!("p{n:x}")));
                let mut ahead = self.spans[v].map_or(Vec::new(), |span| ahead_requests(c, span));
                // The current-task pointer: at the same place while the vCPU runs.
                if let Some(slot) = self.task_slots[v] {
                    ahead.extend(c.memory_requests(slot, self.arch.ptr_width() as usize));
                }
                reqs.extend(ahead.iter().cloned());
                Plan {
                    vcpu: v,
                    select,
                    ahead,
                }
            })
            .collect();
        (plans, reqs)
    }

    /// Reads the replies of `plans` (`replies`, or sends `reqs` first when `None`), then
    /// walks each vCPU's stack over what was read ahead, reading the rest.
    fn finish_look(
        &mut self,
        c: &mut Client,
        opts: &StackOptions,
        plans: Vec<Plan>,
        reqs: &[String],
        replies: Option<Vec<Vec<u8>>>,
    ) -> Result<Vec<VcpuStack>, GdbError> {
        let replies = match replies {
            Some(r) => r,
            None => c.pipeline(reqs)?,
        };
        let arch = self.arch;
        let mut replies = reqs.iter().zip(replies);
        let mut next = || replies.next().expect("a reply for every request");
        let mut read = Vec::with_capacity(plans.len());
        for p in plans {
            let t = &self.threads[p.vcpu];
            if p.select {
                let (_, r) = next();
                c.select_reply(t, &r)?;
            }
            let (req, g) = next();
            let g = c.hex_reply(req, &g)?;
            let mut regs = guest(arch)
                .gdb_core_regs(&g)
                .ok_or_else(|| GdbError::Malformed {
                    addr: c.addr().to_string(),
                    request: "g".into(),
                    detail: format!(
                        "{} bytes of registers, too few for {}",
                        g.len(),
                        arch.name()
                    ),
                })?;
            if self.priv_reg.is_some() {
                let (req, r) = next();
                regs.privilege = c.register_reply(req, &r)?.map(|b| le_bytes(&b));
            }
            if self.base_reg.is_some() {
                let (req, r) = next();
                regs.page_table_base = c.register_reply(req, &r)?.map(|b| le_bytes(&b));
            }
            if self.ctrl_reg.is_some() {
                let (req, r) = next();
                regs.control = c.register_reply(req, &r)?.map(|b| le_bytes(&b));
            }
            if self.want_tasks && self.task_reg.is_some() {
                let (req, r) = next();
                regs.task_base = c.register_reply(req, &r)?.map(|b| le_bytes(&b));
            }
            if self.want_tasks && self.task_user_reg.is_some() {
                let (req, r) = next();
                regs.task_base_user = c.register_reply(req, &r)?.map(|b| le_bytes(&b));
            }
            let mut windows: Vec<(u64, Vec<u8>)> = Vec::new();
            for _ in &p.ahead {
                let (req, r) = next();
                // Read ahead: a page the stub refuses now is read (or not) by the walk.
                let Ok((at, _, bytes)) = c.memory_reply(req, &r) else {
                    continue;
                };
                match windows.last_mut() {
                    Some((b, w)) if b.wrapping_add(w.len() as u64) == at => w.extend(bytes),
                    _ => windows.push((at, bytes)),
                }
            }
            read.push((p.vcpu, regs, windows));
        }
        let mut vcpus = Vec::with_capacity(read.len());
        for (v, regs, windows) in read {
            let t = self.threads[v].clone();
            if self.tasks[v].is_none() {
                self.tasks[v] = opts.tasks.map(|s| TaskReader::new(s, arch));
            }
            let task = self.tasks[v].as_mut().map(|r| (r, v as u32));
            let (stack, span) = walk_vcpu(c, arch, t, regs, opts, windows, task)?;
            self.spans[v] = span;
            if let Some(r) = &self.tasks[v] {
                let user = stack.privilege == Privilege::User;
                self.task_slots[v] = r.current_slot(user, &mut TaskRegs(regs));
            }
            vcpus.push((v, stack));
        }
        // In the threads' order, whatever order they were read in.
        vcpus.sort_by_key(|(v, _)| *v);
        Ok(vcpus.into_iter().map(|(_, s)| s).collect())
    }
}

/// The `m` requests that read `span` (and a little below it) again: a page at a time (the
/// stub refuses a read that crosses into an unmapped page), at most [`MAX_AHEAD`] bytes.
fn ahead_requests(c: &Client, (lo, end): (u64, u64)) -> Vec<String> {
    let start = lo.saturating_sub(AHEAD_BELOW) & !0xf;
    let end = end.min(start.saturating_add(MAX_AHEAD));
    let mut reqs = Vec::new();
    let mut at = start;
    while at < end {
        let page_end = (at | 0xfff).saturating_add(1).min(end);
        reqs.extend(c.memory_requests(at, (page_end - at) as usize));
        at = page_end;
    }
    reqs
}

/// The index in `threads` of thread `t`.
fn vcpu_of(threads: &[ThreadId], t: Option<&ThreadId>) -> Option<usize> {
    threads.iter().position(|x| t.is_some_and(|t| x.same(t)))
}

/// The pid in a stop reply's `thread:pPID.TID;`.
fn stop_pid(reply: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(reply).ok()?;
    let t = &s[s.find("thread:")? + 7..];
    let rest = t.strip_prefix('p')?;
    u64::from_str_radix(rest.split('.').next()?, 16).ok()
}

fn le_bytes(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

/// The stack read so far (windows of guest memory, read ahead or by the walk), and the
/// reads' outcome.
struct Reader<'c> {
    c: &'c mut Client,
    thread: &'c ThreadId,
    windows: Vec<(u64, Vec<u8>)>,
    window: usize,
    reads: u32,
    max_reads: u32,
    refused: Option<(u64, String)>,
    /// A failure of the connection itself: the walk stops, the look fails.
    fatal: Option<GdbError>,
    /// The lowest address read and the end of the highest: what the next look reads ahead.
    span: Option<(u64, u64)>,
}

impl Reader<'_> {
    fn read(&mut self, addr: u64, out: &mut [u8]) -> bool {
        let ok = self.read_from_windows(addr, out) || self.read_from_stub(addr, out);
        if ok {
            let end = addr.saturating_add(out.len() as u64);
            self.span = Some(match self.span {
                Some((lo, hi)) => (lo.min(addr), hi.max(end)),
                None => (addr, end),
            });
        }
        ok
    }

    /// A read that is no part of the stack (a task's fields): not in the span read ahead.
    fn read_other(&mut self, addr: u64, out: &mut [u8]) -> bool {
        self.read_from_windows(addr, out) || self.read_from_stub(addr, out)
    }

    fn read_from_windows(&self, addr: u64, out: &mut [u8]) -> bool {
        for (base, bytes) in &self.windows {
            let off = addr.wrapping_sub(*base);
            if off < bytes.len() as u64 && off as usize + out.len() <= bytes.len() {
                out.copy_from_slice(&bytes[off as usize..off as usize + out.len()]);
                return true;
            }
        }
        false
    }

    fn read_from_stub(&mut self, addr: u64, out: &mut [u8]) -> bool {
        if self.fatal.is_some() || self.reads >= self.max_reads {
            return false;
        }
        if let Err(e) = self.c.select(self.thread) {
            self.fatal = Some(e);
            return false;
        }
        // To the end of the page: the next page may be unmapped, and then the stub refuses
        // the whole read.
        let to_page_end = (0x1000 - (addr & 0xfff)) as usize;
        let len = self.window.min(to_page_end).max(out.len());
        for len in [len, out.len()] {
            self.reads += 1;
            match self.c.read_memory(addr, len) {
                Ok(b) if b.len() >= out.len() => {
                    out.copy_from_slice(&b[..out.len()]);
                    // The newest window first: the walk goes on from it.
                    self.windows.insert(0, (addr, b));
                    return true;
                }
                Ok(_) => return false,
                Err(GdbError::Refused { reply, .. }) => {
                    if len == out.len() || self.reads >= self.max_reads {
                        self.refused.get_or_insert((addr, reply));
                        return false;
                    }
                }
                Err(e) => {
                    self.fatal = Some(e);
                    return false;
                }
            }
        }
        false
    }
}

/// `m` requests one vCPU's task may take beyond its walk's: its pointer, name, ids, flags,
/// and its process leader's pointer and name.
const TASK_READS: u32 = 8;

/// The registers a task is found through, from the `g` reply (x86_64 `gs_base`, `k_gs_base`).
struct TaskRegs(CoreRegs);

impl RegisterReader for TaskRegs {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        match reg {
            Reg::TaskBase => self.0.task_base,
            Reg::TaskBaseUser => self.0.task_base_user,
            _ => None,
        }
    }
}

/// Walks one vCPU's stack over `windows` (read ahead) and what it reads itself; also returns
/// the span of stack it read.
fn walk_vcpu(
    c: &mut Client,
    arch: Arch,
    thread: ThreadId,
    regs: CoreRegs,
    opts: &StackOptions,
    windows: Vec<(u64, Vec<u8>)>,
    task: Option<(&mut TaskReader, u32)>,
) -> Result<(VcpuStack, Option<(u64, u64)>), GdbError> {
    let width = PtrWidth::from_bytes(arch.ptr_width() as usize).unwrap_or(PtrWidth::W8);
    let mask = width.max_addr();
    let (sp, fp) = (regs.sp & mask, regs.fp & mask);
    let privilege = regs
        .privilege
        .map_or(Privilege::Unknown, |v| privilege(arch, v));
    let kernel_cs = regs.privilege.and_then(|v| guest(arch).kernel_selector(v));
    // riscv's mode register is its page-table register, read with `p`.
    let mode = match arch {
        Arch::Riscv64 => cpu_mode(arch, regs.page_table_base, None),
        _ => cpu_mode(arch, regs.control, regs.extended),
    };
    let crossings = Crossings {
        kernel_cs: kernel_cs.unwrap_or(0) as u16,
        user_mode: privilege == Privilege::User,
        ..Crossings::ALL.for_kernel(opts.kernel_os)
    };
    let mut r = Reader {
        c,
        thread: &thread,
        windows,
        window: opts.window.max(16),
        reads: 0,
        max_reads: opts.max_reads.max(2),
        refused: None,
        fatal: None,
        span: None,
    };
    let mut word = [0u8; 8];
    let sp_word = r
        .read(sp, &mut word[..width.bytes()])
        .then(|| width.word(&word));
    let mut frames = vec![0u64; opts.depth.max(1)];
    let start = StartRegs {
        pc: regs.pc & mask,
        sp,
        fp,
        ra: regs.ra.map(|ra| ra & mask),
    };
    let depth = frames.len();
    let by_tables = opts.tables.as_deref().and_then(|t| {
        walk_tables(
            t,
            start,
            depth,
            crossings,
            |a, out| r.read(a, out),
            &mut frames,
        )
    });
    // A walk by the tables found the callers itself: no [SP] or return-register fix after it.
    let tabled = by_tables.is_some();
    let walk = match by_tables {
        Some(w) => w,
        None => walk_guest(
            arch,
            sp,
            fp,
            depth,
            crossings,
            |a, out| r.read(a, out),
            &mut frames,
        ),
    };
    if let Some(e) = r.fatal {
        return Err(e);
    }
    frames.truncate(walk.frames);
    let stop = match walk.stop {
        StopReason::Unreadable if r.refused.is_none() && r.reads >= r.max_reads => {
            walk.end().with_reason(StopReason::ReadBudget)
        }
        _ => walk.end(),
    };
    let (span, refused) = (r.span, r.refused.take());
    // The task's fields, exactly as long as asked (they are few and small), beyond the
    // walk's budget; the time is the writer's (the look's).
    let task = task.and_then(|(reader, vcpu)| {
        r.window = 0;
        r.max_reads = r.reads.saturating_add(TASK_READS);
        let user = privilege == Privilege::User;
        let space = regs.page_table_base;
        let mut task_regs = TaskRegs(regs);
        reader
            .read(
                regs.pc & mask,
                user,
                space,
                0,
                vcpu,
                false,
                &mut task_regs,
                |a, out| r.read_other(a, out),
            )
            .map(|rec| rec.task)
    });
    if let Some(e) = r.fatal {
        return Err(e);
    }
    let reads = r.reads;
    Ok((
        VcpuStack {
            thread,
            regs,
            privilege,
            mode,
            page_table_base: regs.page_table_base,
            sp_word: sp_word.filter(|_| !tabled),
            return_register: regs
                .ra
                .filter(|_| !tabled)
                .map(|ra| clean_return_address(arch, ra & mask)),
            frames,
            by_tables: tabled,
            stop,
            refused,
            reads,
            task,
        },
        span,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_of_stop_reply() {
        assert_eq!(stop_pid(b"T05thread:p01.01;"), Some(1));
        assert_eq!(stop_pid(b"T05thread:02;"), None);
        assert_eq!(stop_pid(b"S05"), None);
    }
}
