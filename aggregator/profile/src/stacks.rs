//! Samples → address stacks (the keys [`crate::counts::StackCounts`] counts), and address
//! stacks → frame names.
//!
//! Reading only interns *address* stacks: a key is `[meta, pc, return addresses…]` (then the
//! address space, when it matters: see `META_SPACE`) and counts go in a hash map keyed by
//! it, so memory grows with the distinct stacks, not the samples. Names come at the end,
//! each distinct address symbolized once.

use std::fmt::Write as _;
use std::ops::Range;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::address_space::{AddressSpaces, Choice, Overlaps};
use crate::boundary;
use crate::filter::{NameRules, SampleFilter};
use crate::input::Sample;
use crate::symbolize::Symbolizer;
use crate::tasks::{TaskId, TaskOf, Tasks};
use crate::unnamed::{self, CpuState, Unnamed};
use crate::user_stack;
use kern_profile_format::{frame_marker, CpuMode};

/// `meta` bit: a user-mode sample.
const META_USER: u64 = 1;
/// `meta` bits 1 to 3: the sample's CPU mode (format's `CpuMode` byte).
const META_MODE_SHIFT: u32 = 1;
/// `meta` bit: a sample at firmware privilege.
const META_FIRMWARE: u64 = 1 << 4;
/// `meta` bit: the key ends with the sample's address space (its page-table base). Only
/// where it matters, so that other stacks stay merged: with `--per-process`, and with
/// `--user` for samples whose addresses a user program may name.
const META_SPACE: u64 = 1 << 5;
/// `meta` bit: a root frame for the address space (`--per-process`).
const META_PROCESS: u64 = 1 << 6;
/// `meta` bits from here up: vCPU + 1 with `--per-cpu` (or hidden, below), else 0.
const META_CPU_SHIFT: u32 = 7;
/// `meta` bit: the vCPU tag is there for counting per vCPU only (name rules are judged per
/// distinct stack, see [`crate::collect::Run::collect`]): no `cpu N` frame.
pub const META_CPU_HIDDEN: u64 = 1 << 62;
/// `meta` bit: the key ends with the sample's task id (after the address space). Only for
/// samples with a task and when something asks for tasks ([`SampleFilter::task_keys`]), so
/// that recordings without task records keep their keys.
const META_TASK: u64 = 1 << 61;
/// `meta` bit: a root frame for the task, `[task NAME TID]` (`--per-task`), `[no task]`
/// for a sample without one.
const META_TASK_ROOT: u64 = 1 << 60;
/// `meta` bit: a root frame for the task's process, `[process NAME PID]` (`--per-process`
/// for a sample with a task: instead of its address space's).
const META_TASK_PROCESS: u64 = 1 << 59;
/// The task bits, above any vCPU tag.
const META_TASK_BITS: u64 = META_TASK | META_TASK_ROOT | META_TASK_PROCESS;

/// The `meta` word of a key: user and firmware bits, CPU mode, and the vCPU tag.
fn meta_of(user: bool, cpu: CpuState, cpu_tag: u64) -> u64 {
    let mut meta = (cpu.mode as u64 & 7) << META_MODE_SHIFT | cpu_tag << META_CPU_SHIFT;
    if user {
        meta |= META_USER;
    }
    if cpu.firmware {
        meta |= META_FIRMWARE;
    }
    meta
}

/// The CPU state a `meta` word holds.
fn cpu_of(meta: u64) -> CpuState {
    CpuState {
        mode: CpuMode::from_u8((meta >> META_MODE_SHIFT & 7) as u8).unwrap_or_default(),
        firmware: meta & META_FIRMWARE != 0,
    }
}

/// The vCPU tag of a `meta` word (vCPU + 1, or 0), hidden or not.
fn meta_tag(meta: u64) -> u64 {
    (meta & !(META_CPU_HIDDEN | META_TASK_BITS)) >> META_CPU_SHIFT
}

/// The vCPU of a key's `meta` word, when tagged.
pub fn meta_vcpu(meta: u64) -> Option<u32> {
    let tag = meta_tag(meta);
    (tag > 0).then(|| (tag - 1) as u32)
}

/// How many root frames naming a key starts with that stand for no code: `cpu N`
/// (`--per-cpu`) and the address space's (`--per-process`). Name rules leave them alone.
pub fn synthetic_roots(key: &[u64]) -> usize {
    let Some(&meta) = key.first() else {
        return 0;
    };
    let cpu = meta & META_CPU_HIDDEN == 0 && meta_vcpu(meta).is_some();
    let process = meta & META_SPACE != 0 && meta & META_PROCESS != 0 && key.len() > 1;
    let task_process = meta & META_TASK_PROCESS != 0;
    let task = meta & META_TASK_ROOT != 0;
    cpu as usize + process as usize + task_process as usize + task as usize
}

/// The task id a key carries (see [`SampleFilter::task_keys`]): `None` for a sample without
/// a task, or keys without tasks.
pub fn key_task(key: &[u64]) -> Option<TaskId> {
    match key {
        [meta, .., task] if meta & META_TASK != 0 => Some(*task as TaskId),
        _ => None,
    }
}

/// Whether a key's `meta` word is of a user-mode sample.
pub fn meta_user(meta: u64) -> bool {
    meta & META_USER != 0
}

/// `meta` without a hidden vCPU tag.
pub fn meta_unhidden(meta: u64) -> u64 {
    if meta & META_CPU_HIDDEN != 0 {
        meta & (((1 << META_CPU_SHIFT) - 1) | META_TASK_BITS)
    } else {
        meta
    }
}

/// The frame user-mode samples are grouped under; with `--user`, followed by the name of
/// the binary (`[user] user.elf`).
pub const USER_FRAME: &str = "[user]";
/// The root frame of samples without a task (`--per-task`), and of those whose task could
/// not be read.
pub const NO_TASK_FRAME: &str = "[no task]";
pub const UNKNOWN_TASK_FRAME: &str = "[task unknown]";
/// The frame of addresses nothing knows (consecutive ones collapse into one).
pub const UNKNOWN_FRAME: &str = "[unknown]";
/// inferno's annotation of an inlined frame.
pub const INLINE_SUFFIX: &str = "_[i]";

/// What building a key told the symbolizer, which counts it (a stack cut at a return
/// address that is no code, a return-address register checked), and whether the word at
/// `[SP]` was asked about and taken for the caller: the key depends on that word only then.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Built {
    pub cut: bool,
    pub register_checked: bool,
    pub sp_word_asked: bool,
    pub sp_word_taken: bool,
}

/// Builds interning keys from samples, applying the filters.
pub struct KeyBuilder<'f> {
    filter: &'f SampleFilter,
    markers: bool,
}

impl<'f> KeyBuilder<'f> {
    pub fn new(filter: &'f SampleFilter) -> Self {
        KeyBuilder {
            filter,
            markers: false,
        }
    }

    /// Whether the recording's frames may hold boundary markers (header flag); otherwise
    /// values that look like markers are garbage return addresses, named `[unknown]`.
    pub fn with_markers(mut self, markers: bool) -> Self {
        self.markers = markers;
        self
    }

    /// Fills `key` for `s`; false when a filter drops the sample.
    ///
    /// The entry fix: when the PC is where the frame-pointer walk misses the caller (a
    /// function's first instruction, before `push ebp`, or a `ret`, after `pop ebp`), the
    /// word at `[SP]` is the caller's return address and goes in as the first return address.
    /// On riscv64 and aarch64 the recorded return-address register does, in leaves,
    /// prologues and epilogues (`symbolize/return_register.rs`).
    pub fn build(&self, s: &Sample<'_>, sym: &mut Symbolizer, key: &mut Vec<u64>) -> bool {
        if !self.keeps(s) {
            return false;
        }
        self.build_kept(s, sym, key);
        true
    }

    /// Whether the filters keep `s` (vCPU, mode, time).
    pub fn keeps(&self, s: &Sample<'_>) -> bool {
        self.filter.keeps(s.vcpu, s.user, s.time_ns) && self.filter.keeps_task(s.task)
    }

    /// Whether keys carry the sample's task (when it has one).
    pub fn by_task(&self) -> bool {
        self.filter.task_keys
    }

    /// Whether keys carry the vCPU (`--per-cpu`, or hidden for name rules).
    pub fn by_vcpu(&self) -> bool {
        self.filter.per_cpu || self.filter.names.is_active()
    }

    /// [`KeyBuilder::build`] of a sample the filters keep; says what it told the symbolizer
    /// (which counts them), for [`crate::key_memo::KeyMemo`] to tell it again.
    pub(crate) fn build_kept(
        &self,
        s: &Sample<'_>,
        sym: &mut Symbolizer,
        key: &mut Vec<u64>,
    ) -> Built {
        let mut built = Built::default();
        key.clear();
        let (cpu_tag, hidden) = if self.filter.per_cpu {
            (s.vcpu as u64 + 1, 0)
        } else if self.filter.names.is_active() {
            (s.vcpu as u64 + 1, META_CPU_HIDDEN)
        } else {
            (0, 0)
        };
        let task = s
            .task
            .filter(|_| self.filter.task_keys)
            .map(|t| t.id as u64);
        let mut task_bits = 0;
        if task.is_some() {
            task_bits |= META_TASK;
        }
        if self.filter.per_task {
            task_bits |= META_TASK_ROOT;
        }
        // --per-process: the task's process, when the sample has a task; else its address
        // space.
        let space_root = self.filter.per_process && task.is_none();
        // A task that could not be read has no process: with --per-task its one root,
        // `[task unknown]`, says so (not twice).
        let unread = s.task.is_some_and(|t| t.state.is_err());
        if self.filter.per_process && !space_root && !(self.filter.per_task && unread) {
            task_bits |= META_TASK_PROCESS;
        }
        let space = self.space_of(s, sym, space_root);
        let space_bits = match (space, space_root) {
            (None, _) => 0,
            (Some(_), false) => META_SPACE,
            (Some(_), true) => META_SPACE | META_PROCESS,
        };
        key.push(meta_of(s.user, s.cpu, cpu_tag) | hidden | space_bits | task_bits);
        let Some((&pc, rets)) = s.addrs.split_first() else {
            key.extend(space);
            key.extend(task);
            return built;
        };
        if s.user && !sym.has_user_binaries() {
            if self.filter.addresses {
                key.extend_from_slice(s.addrs);
            }
            key.extend(space);
            key.extend(task);
            return built;
        }
        key.push(pc);
        if let Some(ra) = s.return_register {
            built.register_checked = true;
            if Self::caller_in_register(s, sym) {
                key.push(ra);
            }
        }
        // (Even when the word equals the first return address: in a recursion the caller
        // and the caller's caller return to the same place.)
        if let Some(w) = s.sp_word {
            built.sp_word_asked = true;
            if Self::caller_skipped(s, sym) {
                built.sp_word_taken = true;
                key.push(w);
            }
        }
        // A kernel stack ends at a return address that is no code: what lies beyond it was
        // read from garbage.
        let rets = if s.user {
            rets
        } else {
            let cut = (0..rets.len()).find(|&i| {
                let after_entry = self.markers
                    && i > 0
                    && rets[i - 1] == kern_profile_format::frame_marker::KERNEL_ENTRY;
                let a = rets[i];
                let probe = if after_entry { a } else { a.wrapping_sub(1) };
                !(self.markers && boundary::is_marker(a)) && sym.no_code(probe)
            });
            match cut {
                Some(i) => {
                    sym.count_no_code_cut();
                    built.cut = true;
                    &rets[..i]
                }
                None => rets,
            }
        };
        key.extend_from_slice(rets);
        if !self.markers {
            for a in &mut key[2..] {
                if boundary::is_marker(*a) {
                    *a = 0;
                }
            }
        }
        // The user program's part ends at its first frame: what a walk read beyond it is
        // garbage (`user_stack`).
        if sym.has_user_binaries() {
            let addrs = &key[1..];
            let into_user = |i, p| leads_into_user(sym, addrs, i, p);
            if let Some(from) = user_stack::start(addrs, s.user, into_user) {
                let end = user_stack::end(addrs, from, |p| sym.user_binary_of(p).is_some());
                key.truncate(1 + end);
            }
        }
        key.extend(space);
        key.extend(task);
        built
    }

    /// Whether the return-address register of `s` (which has one) holds the caller its walk
    /// misses, asked of the program or kernel its PC is in (which counts the answer).
    pub(crate) fn caller_in_register(s: &Sample<'_>, sym: &mut Symbolizer) -> bool {
        let (Some(ra), Some((&pc, rets))) = (s.return_register, s.addrs.split_first()) else {
            return false;
        };
        let first = rets.first().copied();
        if s.user {
            sym.user_binary_of(pc)
                .is_some_and(|i| sym.user_symbolizer(i).caller_in_register(pc, ra, first))
        } else {
            sym.caller_in_register(pc, ra, first)
        }
    }

    /// Whether the word at `[SP]` of a kernel sample like `s` can change its key (a user
    /// sample's program can change with its address space: always).
    pub(crate) fn word_may_matter(s: &Sample<'_>, sym: &mut Symbolizer) -> bool {
        match (s.user, s.addrs.first()) {
            (false, Some(&pc)) => sym.word_may_be_caller(pc),
            (false, None) => false,
            (true, _) => true,
        }
    }

    /// Whether the word at `[SP]` of `s` (which has one) is the caller its walk missed, asked
    /// of the program or kernel its PC is in.
    pub(crate) fn caller_skipped(s: &Sample<'_>, sym: &mut Symbolizer) -> bool {
        let (Some(w), Some(&pc)) = (s.sp_word, s.addrs.first()) else {
            return false;
        };
        if s.user {
            sym.user_binary_of(pc)
                .is_some_and(|i| sym.user_symbolizer(i).caller_skipped(pc, w))
        } else {
            sym.caller_skipped(pc, w)
        }
    }

    /// The address space `s`'s key carries: with `--per-process`, or when user programs may
    /// name its addresses (a user-mode sample, or a kernel one whose walk reached a user
    /// program's addresses or went on past an entry from user space) and so the address
    /// space picks the program.
    fn space_of(&self, s: &Sample<'_>, sym: &mut Symbolizer, root: bool) -> Option<u64> {
        let space = s.page_table?;
        let mut user_code = || {
            sym.has_user_binaries()
                && (s.user
                    || s.addrs.iter().any(|&a| sym.user_binary_of(a).is_some())
                    || (self.markers
                        && user_stack::start(s.addrs, false, |i, p| {
                            leads_into_user(sym, s.addrs, i, p)
                        })
                        .is_some()))
        };
        (root || user_code()).then_some(space)
    }
}

/// How frames are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameStyle {
    /// Expand inlined functions (else only the real function of each address).
    pub inline: bool,
    /// Append ` (file:line)`.
    pub lines: bool,
    /// Unknown addresses as `0x…` rather than `[unknown]`; user addresses shown.
    pub addresses: bool,
    /// Mark inlined frames with inferno's `_[i]`.
    pub inline_suffix: bool,
}

impl NameStyle {
    pub fn from_options(o: &crate::options::Options, inline_suffix: bool) -> Self {
        NameStyle {
            inline: o.inline,
            lines: o.lines,
            addresses: o.addresses,
            inline_suffix,
        }
    }
}

/// Names address stacks, root first; caches the names of each probe address.
pub struct StackNamer<'s> {
    sym: &'s mut Symbolizer,
    style: NameStyle,
    cache: FxHashMap<u64, Rc<[Rc<str>]>>,
    /// (user binary, probe) → names.
    user_cache: FxHashMap<(usize, u64), Rc<[Rc<str>]>>,
    unknown: Rc<str>,
    user: Rc<str>,
    /// `[user] NAME` per user binary.
    user_roots: Vec<Rc<str>>,
    cpus: FxHashMap<u64, Rc<str>>,
    /// Names of addresses no symbol covers, by what they are.
    unnamed: FxHashMap<Unnamed, Rc<str>>,
    /// Which program ran in which address space.
    spaces: AddressSpaces,
    /// Root frames of address spaces (`--per-process`), with their program.
    process_roots: FxHashMap<u64, (Rc<str>, Option<usize>)>,
    /// Addresses named from the first of several programs holding them.
    overlaps: Overlaps,
    /// The recording's tasks, which keys' task ids are of.
    tasks: Tasks,
    /// Root frames of tasks (`--per-task`) and of their processes (`--per-process`), by
    /// (process or not, task id).
    task_roots: FxHashMap<(bool, Option<TaskId>), Rc<str>>,
}

/// The names of an address's frames, outer function first.
pub type Names = Rc<[Rc<str>]>;

/// The address space a stack was sampled in, and its program when the stack has its root
/// frame (`--per-process`) and the program is known.
#[derive(Debug, Clone, Copy)]
struct SpaceCtx {
    space: Option<u64>,
    process: Option<usize>,
}

/// Where an address of a stack belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Kernel,
    User(usize),
    Unknown,
}

impl<'s> StackNamer<'s> {
    pub fn new(sym: &'s mut Symbolizer, style: NameStyle) -> Self {
        StackNamer {
            sym,
            style,
            cache: FxHashMap::default(),
            user_cache: FxHashMap::default(),
            unknown: Rc::from(UNKNOWN_FRAME),
            user: Rc::from(USER_FRAME),
            user_roots: Vec::new(),
            cpus: FxHashMap::default(),
            unnamed: FxHashMap::default(),
            spaces: AddressSpaces::default(),
            process_roots: FxHashMap::default(),
            overlaps: Overlaps::default(),
            tasks: Tasks::default(),
            task_roots: FxHashMap::default(),
        }
    }

    /// Names stacks of `profile`: user programs by address space, tasks by its task table.
    pub fn of_profile(self, profile: &crate::profile::CpuProfile) -> Self {
        self.with_spaces(profile.spaces.clone())
            .with_tasks(profile.summary.tasks.clone())
    }

    /// Names keys' tasks from `tasks` (the recording's).
    pub fn with_tasks(mut self, tasks: Tasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// The root frame of task `task` (`--per-task`: `[task NAME TID]`), or of its process
    /// (`[process NAME PID]`).
    fn task_root(&mut self, process: bool, task: Option<TaskId>) -> Rc<str> {
        if let Some(r) = self.task_roots.get(&(process, task)) {
            return r.clone();
        }
        let state = task.map(|id| self.tasks.get(id).map(TaskOf::of_state));
        let name = match state {
            None => NO_TASK_FRAME.to_string(),
            Some(None) => "[task ?]".to_string(),
            Some(Some(TaskOf::Known(t))) if process => {
                format!("[process {} {}]", t.process(), t.pid)
            }
            Some(Some(TaskOf::Known(t))) => format!("[task {} {}]", t.thread(), t.tid),
            Some(Some(_)) => UNKNOWN_TASK_FRAME.to_string(),
        };
        let r: Rc<str> = Rc::from(name);
        self.task_roots.insert((process, task), r.clone());
        r
    }

    /// Names user addresses by the program each address space ran (a recording's
    /// [`AddressSpaces`]); without, from the first program holding them.
    pub fn with_spaces(mut self, spaces: AddressSpaces) -> Self {
        self.spaces = spaces;
        self
    }

    /// The warning about addresses named from the first of several programs holding them.
    pub fn overlap_warning(&self) -> Option<crate::warning::Warning> {
        self.overlaps.warning(self.sym, &self.spaces)
    }

    pub fn symbolizer(&mut self) -> &mut Symbolizer {
        self.sym
    }

    /// Names a key built by [`KeyBuilder`], root first, into `out` (cleared first).
    pub fn name_key(&mut self, key: &[u64], out: &mut Vec<Rc<str>>) {
        self.name_key_spaces(key, out);
    }

    /// Names a key and applies `rules` to it ([`NameRules::shape`]): `None` when they drop
    /// it, else the user-space range of [`StackNamer::name_key_spaces`] in the shaped
    /// frames.
    pub fn name_key_shaped(
        &mut self,
        key: &[u64],
        rules: &NameRules,
        out: &mut Vec<Rc<str>>,
    ) -> Option<Range<usize>> {
        let user = self.name_key_spaces(key, out);
        if !rules.is_active() {
            return Some(user);
        }
        let skip = synthetic_roots(key);
        let removed = rules.shape(out, skip)?;
        let at = |i: usize| {
            if i < skip {
                i
            } else {
                i.saturating_sub(removed).max(skip)
            }
        };
        Some(at(user.start)..at(user.end))
    }

    /// Like [`StackNamer::name_key`], and returns where the user-space names are in `out`:
    /// the `[user]` root and the user frames after it (empty for a kernel stack). Kernel
    /// frames may follow them: a system call sampled in the kernel, whose walk went on
    /// into the user program's frames (`[user] prog;main;…;syscall_entry;…;sys_work`).
    pub fn name_key_spaces(&mut self, key: &[u64], out: &mut Vec<Rc<str>>) -> Range<usize> {
        out.clear();
        let Some((&meta, rest)) = key.split_first() else {
            return 0..0;
        };
        let (rest, task) = match rest.split_last() {
            Some((&task, rest)) if meta & META_TASK != 0 => (rest, Some(task as TaskId)),
            _ => (rest, None),
        };
        let (addrs, space) = match rest.split_last() {
            Some((&space, addrs)) if meta & META_SPACE != 0 => (addrs, Some(space)),
            _ => (rest, None),
        };
        let cpu_tag = meta_tag(meta);
        let cpu = cpu_of(meta);
        if cpu_tag > 0 && meta & META_CPU_HIDDEN == 0 {
            let n = self
                .cpus
                .entry(cpu_tag)
                .or_insert_with(|| Rc::from(format!("cpu {}", cpu_tag - 1)))
                .clone();
            out.push(n);
        }
        let process = match space {
            Some(s) if meta & META_PROCESS != 0 => {
                let (root, program) = self.process_root(s);
                out.push(root);
                Some(program)
            }
            _ => None,
        };
        if meta & META_TASK_PROCESS != 0 {
            let root = self.task_root(true, task);
            out.push(root);
        }
        if meta & META_TASK_ROOT != 0 {
            let root = self.task_root(false, task);
            out.push(root);
        }
        let user_mode = meta & META_USER != 0;
        if self.sym.has_user_binaries() && !addrs.is_empty() {
            let ctx = SpaceCtx {
                space,
                process: process.flatten(),
            };
            return self.name_spaces(addrs, user_mode, cpu, ctx, out);
        }
        if user_mode {
            let start = out.len();
            out.push(self.user.clone());
            for &a in addrs.iter().rev() {
                out.push(Rc::from(format!("{a:#x}")));
            }
            return start..out.len();
        }
        if addrs.is_empty() {
            out.push(self.unknown.clone());
            return 0..0;
        }
        self.name_addrs_in(addrs, true, cpu, out);
        0..0
    }

    /// Names a stack (PC first) when user programs are known: each address from the kernel
    /// (kernel-mode samples only) or else from the user binary whose segments hold it. A
    /// stack whose outermost known frame is a user program's is rooted at `[user] NAME`;
    /// a user-mode sample always is (`[user]` alone when no binary holds its addresses).
    fn name_spaces(
        &mut self,
        addrs: &[u64],
        user_mode: bool,
        cpu: CpuState,
        ctx: SpaceCtx,
        out: &mut Vec<Rc<str>>,
    ) -> Range<usize> {
        // The user program's part: named from the programs alone, never with kernel symbols.
        let user_from = user_stack::start(addrs, user_mode, |i, p| {
            leads_into_user(self.sym, addrs, i, p)
        });
        let mut resolved: Vec<(Space, Rc<[Rc<str>]>)> = (0..addrs.len())
            .map(|i| match boundary::probe(addrs, i, true) {
                Some(probe) => {
                    let in_user = user_from.is_some_and(|from| i >= from);
                    self.resolve_space(probe, in_user, ctx.space)
                }
                None => (Space::Unknown, Rc::from([])),
            })
            .collect();
        let in_user = |i: usize| user_from.is_some_and(|from| i >= from);
        // The user part's first address stays, named or not: the way into the program.
        let keep = boundary::keep(addrs, |i| resolved[i].0 != Space::Unknown)
            .max(user_from.map_or(0, |from| from + 1));
        resolved.truncate(keep);
        for i in 0..keep {
            if boundary::is_marker(addrs[i]) {
                // The entry's frames, nearest first, up to the next marker inwards.
                let inner: Vec<&[Rc<str>]> = (0..i)
                    .rev()
                    .take_while(|&j| !boundary::is_marker(addrs[j]))
                    .map(|j| &resolved[j].1[..])
                    .collect();
                let name = boundary::name_entry(addrs[i], &inner);
                resolved[i] = (Space::Kernel, Rc::from([Rc::from(name)]));
            }
        }
        // As in `name_addrs_in`: the innermost crossing into the interrupted context.
        let crossing = (0..keep).find(|&j| match addrs[j] {
            frame_marker::KERNEL_ENTRY => true,
            frame_marker::STACK_SWITCH => resolved[j]
                .1
                .first()
                .is_some_and(|n| &**n == boundary::SYSCALL_FRAME),
            _ => false,
        });
        let root = resolved
            .iter()
            .rev()
            .map(|r| r.0)
            .find(|s| *s != Space::Unknown);
        // A stack with a user part is rooted at its program: the one holding its outermost
        // known frame, else the one its address space ran (a stripped program, or a walk
        // whose user addresses are no program's code), else `[user]`.
        let space_program = match self.spaces.choice(ctx.space) {
            Choice::Program(b) => Some(b),
            _ => None,
        };
        let program = match root {
            Some(Space::User(b)) => Some(b),
            _ if user_from.is_some() => space_program,
            _ => None,
        };
        let mut start = out.len();
        match program {
            // The address space's root frame already names the program.
            Some(b) if ctx.process == Some(b) => start -= 1,
            Some(b) => out.push(self.user_root(b)),
            None if user_from.is_some() => out.push(self.user.clone()),
            None => {}
        }
        let mut user_end = out.len();
        for (i, (space, names)) in resolved.iter().enumerate().rev() {
            if !names.is_empty() {
                out.extend(names.iter().cloned());
            } else if in_user(i) && !matches!(space, Space::User(_)) {
                // A user address no program holds: shown as one, never a kernel name.
                self.push_unnamed_user(addrs[i], out);
            } else if in_user(i) {
                // In a program without a symbol there (a stripped one): `[unknown]` under
                // its root.
                self.push_unnamed(addrs[i], false, CpuState::default(), out);
            } else {
                let beyond_entry = crossing.is_some_and(|j| j < i);
                self.push_unnamed(addrs[i], beyond_entry, cpu, out);
            }
            if in_user(i) || matches!(space, Space::User(_)) {
                user_end = out.len();
            }
        }
        if user_end > start {
            start..user_end
        } else {
            0..0
        }
    }

    fn resolve_space(
        &mut self,
        probe: u64,
        user_mode: bool,
        space: Option<u64>,
    ) -> (Space, Rc<[Rc<str>]>) {
        if !user_mode {
            let k = self.probe_names(probe);
            if !k.is_empty() {
                return (Space::Kernel, k);
            }
        }
        match self.program_of(space, probe) {
            Some(b) => (Space::User(b), self.user_probe_names(b, probe)),
            None => (Space::Unknown, Rc::from([])),
        }
    }

    /// The user program naming `probe` in address space `space`: the one found to run
    /// there, else the first whose segments hold it.
    fn program_of(&mut self, space: Option<u64>, probe: u64) -> Option<usize> {
        match self.spaces.choice(space) {
            Choice::Program(b) => self
                .sym
                .user_elf(b)
                .is_some_and(|e| e.loads(probe))
                .then_some(b),
            Choice::Nothing => None,
            Choice::FirstHolding => {
                let holding: Vec<usize> = self.sym.user_binaries_holding(probe).collect();
                if holding.len() > 1 {
                    self.overlaps.add(probe, space, &holding);
                }
                holding.first().copied()
            }
        }
    }

    /// The root frame of address space `space` (`--per-process`) and its program, if known.
    fn process_root(&mut self, space: u64) -> (Rc<str>, Option<usize>) {
        if let Some(r) = self.process_roots.get(&space) {
            return r.clone();
        }
        let what = self.spaces.describe(space);
        let r = match self.spaces.choice(Some(space)) {
            Choice::Program(b) => {
                let name = self.sym.user_binary_name(b);
                (Rc::from(format!("{USER_FRAME} {name} ({what})")), Some(b))
            }
            _ => (Rc::from(format!("[as {what}]")), None),
        };
        self.process_roots.insert(space, r.clone());
        r
    }

    /// `[user] NAME` for user binary `b`.
    fn user_root(&mut self, b: usize) -> Rc<str> {
        while self.user_roots.len() <= b {
            let i = self.user_roots.len();
            let name = self.sym.user_binary_name(i);
            self.user_roots
                .push(Rc::from(format!("{USER_FRAME} {name}")));
        }
        self.user_roots[b].clone()
    }

    /// For an address the kernel does not name: the `[user] NAME` root of the user binary
    /// whose segments hold it, and its frames there (outer first; empty when no symbol
    /// covers it). `None` when no user binary holds it.
    pub fn user_names(&mut self, probe: u64) -> Option<(Rc<str>, Names)> {
        let b = self.sym.user_binary_of(probe)?;
        Some((self.user_root(b), self.user_probe_names(b, probe)))
    }

    fn user_probe_names(&mut self, b: usize, probe: u64) -> Rc<[Rc<str>]> {
        if let Some(n) = self.user_cache.get(&(b, probe)) {
            return n.clone();
        }
        let frames = self.sym.user_symbolizer(b).frames(probe);
        let names = frame_names(&frames, self.style);
        self.user_cache.insert((b, probe), names.clone());
        names
    }

    /// Appends the names of `addrs` (innermost first in the slice) root first. The first
    /// address is looked up as is when `first_is_pc`; return addresses at `addr - 1`.
    pub fn name_addrs(&mut self, addrs: &[u64], first_is_pc: bool, out: &mut Vec<Rc<str>>) {
        self.name_addrs_in(addrs, first_is_pc, CpuState::default(), out);
    }

    /// Like [`StackNamer::name_addrs`], naming what no symbol covers by where the CPU was.
    fn name_addrs_in(
        &mut self,
        addrs: &[u64],
        first_is_pc: bool,
        cpu: CpuState,
        out: &mut Vec<Rc<str>>,
    ) {
        let keep = boundary::keep(addrs, |i| {
            boundary::probe(addrs, i, first_is_pc).is_some_and(|p| !self.probe_names(p).is_empty())
        });
        // The innermost crossing into the interrupted context: a kernel entry, or a stack
        // switch out of system-call entry code (onto the calling program's stack).
        let crossing = (0..keep).find(|&j| match addrs[j] {
            frame_marker::KERNEL_ENTRY => true,
            frame_marker::STACK_SWITCH => {
                self.marker_name(addrs, j, first_is_pc) == boundary::SYSCALL_FRAME
            }
            _ => false,
        });
        for (i, &a) in addrs[..keep].iter().enumerate().rev() {
            let names = match boundary::probe(addrs, i, first_is_pc) {
                Some(probe) => self.probe_names(probe),
                None => Rc::from([Rc::from(self.marker_name(addrs, i, first_is_pc))]),
            };
            if !names.is_empty() {
                out.extend(names.iter().cloned());
            } else {
                let beyond_entry = crossing.is_some_and(|j| j < i);
                self.push_unnamed(a, beyond_entry, cpu, out);
            }
        }
    }

    /// The frame name of marker `addrs[i]`, from its frames, nearest first, up to the next
    /// marker inwards.
    fn marker_name(&mut self, addrs: &[u64], i: usize, first_is_pc: bool) -> &'static str {
        let inner: Vec<Rc<[Rc<str>]>> = (0..i)
            .rev()
            .map_while(|j| boundary::probe(addrs, j, first_is_pc))
            .map(|p| self.probe_names(p))
            .collect();
        let inner: Vec<&[Rc<str>]> = inner.iter().map(|f| &f[..]).collect();
        boundary::name_entry(addrs[i], &inner)
    }

    /// Appends the name of address `a`, which no symbol covers: its address with
    /// `--addresses`, else what it is ([`unnamed`]; `beyond_entry` when a crossing into the
    /// interrupted context lies between it and the sampled PC), a run of the same name
    /// collapsed.
    fn push_unnamed(&mut self, a: u64, beyond_entry: bool, cpu: CpuState, out: &mut Vec<Rc<str>>) {
        if self.style.addresses {
            out.push(Rc::from(format!("{a:#x}")));
            return;
        }
        let kind = unnamed::classify(a, cpu, beyond_entry, &*self.sym);
        let unknown = &self.unknown;
        let name = self
            .unnamed
            .entry(kind)
            .or_insert_with(|| match kind {
                Unnamed::Unknown => unknown.clone(),
                k => Rc::from(k.name(UNKNOWN_FRAME)),
            })
            .clone();
        if out.last() != Some(&name) {
            out.push(name);
        }
    }

    /// An address of a stack's user part that no `--user` program holds: `[user 0x…]`
    /// (`0x…` with `--addresses`).
    fn push_unnamed_user(&mut self, a: u64, out: &mut Vec<Rc<str>>) {
        match self.style.addresses {
            true => out.push(Rc::from(format!("{a:#x}"))),
            false => out.push(Rc::from(format!("[user {a:#x}]"))),
        }
    }

    /// The frame names at one probe address (kernel), outer function first.
    pub fn probe_names(&mut self, probe: u64) -> Rc<[Rc<str>]> {
        if let Some(n) = self.cache.get(&probe) {
            return n.clone();
        }
        let frames = self.sym.frames(probe);
        let names = frame_names(&frames, self.style);
        self.cache.insert(probe, names.clone());
        names
    }
}

/// Whether boundary marker `addrs[i]`, followed by the probe address `probe`, leads into a
/// user program: the address is not the kernel's, and then a kernel entry does; a stack
/// switch must land on a program's return address, or leave system-call entry code (i386
/// Linux's SYSENTER path, whose walk reaches the user stack through the user's frame
/// pointer), not boot code's garbage.
fn leads_into_user(sym: &mut Symbolizer, addrs: &[u64], i: usize, probe: u64) -> bool {
    if sym.kernel_address(probe) {
        return false;
    }
    if addrs[i] == frame_marker::KERNEL_ENTRY || sym.user_binary_of(probe).is_some() {
        return true;
    }
    let inner: Vec<Rc<[crate::symbolize::Frame]>> = (0..i)
        .rev()
        .map_while(|j| boundary::probe(addrs, j, true))
        .map(|p| sym.frames(p))
        .collect();
    let names: Vec<Vec<&str>> = inner
        .iter()
        .map(|f| f.iter().map(|x| &*x.function).collect())
        .collect();
    let names: Vec<&[&str]> = names.iter().map(|v| &v[..]).collect();
    boundary::name_entry(addrs[i], &names) == boundary::SYSCALL_FRAME
}

/// The names of an address's frames (innermost first in `frames`), outer function first.
fn frame_names(frames: &[crate::symbolize::Frame], style: NameStyle) -> Rc<[Rc<str>]> {
    let mut names: Vec<Rc<str>> = Vec::with_capacity(frames.len());
    for f in frames.iter().rev() {
        if f.inlined && !style.inline {
            continue;
        }
        // Each frame's own line: for a function with code inlined at the address, the
        // line of the inlined call, so that it stays a line of that function.
        let (file, line) = (&f.file, f.line);
        let decorated = style.lines || (f.inlined && style.inline_suffix);
        if !decorated {
            names.push(f.function.clone());
            continue;
        }
        let mut s = String::from(&*f.function);
        if style.lines {
            match (file, line) {
                (Some(file), Some(line)) => {
                    let _ = write!(s, " ({}:{line})", short_path(file));
                }
                (Some(file), None) => {
                    let _ = write!(s, " ({})", short_path(file));
                }
                _ => {}
            }
        }
        if f.inlined && style.inline_suffix {
            s.push_str(INLINE_SUFFIX);
        }
        names.push(Rc::from(s));
    }
    names.into()
}

/// Shortens source paths: the Rust standard library's `/rustc/<hash>/library/` and
/// Cargo's registry prefixes go, leaving `core/src/…` or `crate-1.0/src/…`.
pub fn short_path(path: &str) -> &str {
    if let Some(i) = path.find("/rustc/") {
        let rest = &path[i + "/rustc/".len()..];
        if let Some(j) = rest.find('/') {
            let rest = &rest[j + 1..];
            return rest.strip_prefix("library/").unwrap_or(rest);
        }
    }
    if let Some(i) = path.find("/registry/src/") {
        let rest = &path[i + "/registry/src/".len()..];
        if let Some(j) = rest.find('/') {
            return &rest[j + 1..];
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu_list::CpuList;
    use crate::options::{ModeFilter, Options};
    use crate::symbolize::{symbol_map, SymbolTable};
    use std::path::Path;

    fn symbolizer() -> Symbolizer {
        symbolizer_with("")
    }

    /// The test map, then `more` lines.
    fn symbolizer_with(more: &str) -> Symbolizer {
        let text = format!(
            "1000 T root\n1100 T middle\n1200 T leaf\n1300 T entered\n1400 T asm_exc_page_fault\n1500 T end\n{more}"
        );
        let map = SymbolTable::new(symbol_map::parse(&text, Path::new("m")).unwrap(), |_| None);
        Symbolizer::new(None, vec![map]).unwrap()
    }

    /// The names of a kernel sample at `addrs` taken in `mode`, with `sym`.
    fn names_with(mut sym: Symbolizer, opts: &Options, addrs: &[u64], mode: CpuMode) -> String {
        let mut s = sample(addrs);
        s.cpu.mode = mode;
        let mut key = Vec::new();
        let filter = SampleFilter::from_options(opts);
        assert!(KeyBuilder::new(&filter)
            .with_markers(true)
            .build(&s, &mut sym, &mut key));
        let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(opts, true));
        let mut out = Vec::new();
        namer.name_key(&key, &mut out);
        out.iter().map(|s| &**s).collect::<Vec<_>>().join(";")
    }

    fn sample(addrs: &[u64]) -> Sample<'_> {
        Sample::of_addresses(0, addrs)
    }

    fn names(opts: &Options, s: &Sample<'_>) -> Option<String> {
        let mut sym = symbolizer();
        let mut key = Vec::new();
        let filter = SampleFilter::from_options(opts);
        if !KeyBuilder::new(&filter)
            .with_markers(true)
            .build(s, &mut sym, &mut key)
        {
            return None;
        }
        let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(opts, true));
        let mut out = Vec::new();
        namer.name_key(&key, &mut out);
        Some(out.iter().map(|s| &**s).collect::<Vec<_>>().join(";"))
    }

    #[test]
    fn names_root_first_with_return_addresses_minus_one() {
        let o = Options::default();
        // 0x1100 as a return address is the call at its end of `root`.
        assert_eq!(
            names(&o, &sample(&[0x1204, 0x1150, 0x1100])).unwrap(),
            "root;middle;leaf"
        );
    }

    #[test]
    fn entry_fix_inserts_the_sp_word() {
        let o = Options::default();
        let mut s = sample(&[0x1300, 0x1100]);
        s.sp_word = Some(0x1210);
        assert_eq!(names(&o, &s).unwrap(), "root;leaf;entered");
        // Not at an entry: the word at [SP] is ignored.
        s.addrs = &[0x1301, 0x1100];
        assert_eq!(names(&o, &s).unwrap(), "root;entered");
        // Recursion: the caller and its caller return to the same place, both kept.
        s.addrs = &[0x1300, 0x1210, 0x1100];
        assert_eq!(names(&o, &s).unwrap(), "root;leaf;leaf;entered");
    }

    #[test]
    fn unnamed_addresses_are_named_by_cpu_mode_and_side() {
        use kern_profile_format::frame_marker::KERNEL_ENTRY;
        let o = Options::default();
        let in_mode = |addrs: &'static [u64], mode: CpuMode| {
            let mut s = sample(addrs);
            s.cpu.mode = mode;
            names(&o, &s).unwrap()
        };
        assert_eq!(in_mode(&[0x800], CpuMode::Real), "[firmware]");
        assert_eq!(
            in_mode(&[0x800, 0x1100], CpuMode::PagingOff),
            "root;[boot, paging off]"
        );
        assert_eq!(in_mode(&[0x800, 0x900], CpuMode::Long), "[boot]");
        let mut s = sample(&[0x800]);
        s.cpu.firmware = true;
        assert_eq!(names(&o, &s).unwrap(), "[firmware]");
        // Beyond a kernel entry, below the kernel: the interrupted user program, whatever
        // the file recorded of the mode.
        for mode in [CpuMode::Unknown, CpuMode::Paging] {
            assert_eq!(
                in_mode(&[0x1204, 0x1410, KERNEL_ENTRY, 0x500, 0x600], mode),
                "[user];[exception];asm_exc_page_fault;leaf"
            );
        }
        // Beyond a stack switch out of system-call entry code (i386 Linux's SYSENTER path,
        // whose walk reaches the program's stack through its frame pointer, then switches
        // again, as recorded): the program, not boot code. Beyond another switch (an IRQ
        // stack) addresses are named as before.
        use kern_profile_format::frame_marker::STACK_SWITCH;
        assert_eq!(
            in_mode(
                &[0x1204, 0x1110, STACK_SWITCH, 0x1010, 0x800],
                CpuMode::Paging
            ),
            "[boot];root;[stack switch];middle;leaf"
        );
        let syscall = symbolizer_with("1600 T entry_SYSENTER_32\n");
        assert_eq!(
            names_with(
                syscall,
                &o,
                &[0x1204, 0x1610, STACK_SWITCH, 0x800, STACK_SWITCH],
                CpuMode::Paging
            ),
            "[user];[syscall];entry_SYSENTER_32;leaf"
        );
        // Without a recorded mode the rest stays [unknown]; --addresses shows addresses.
        assert_eq!(in_mode(&[0x800], CpuMode::Unknown), "[unknown]");
        let mut s = sample(&[0x800]);
        s.cpu.mode = CpuMode::Real;
        let a = Options {
            addresses: true,
            ..Options::default()
        };
        assert_eq!(names(&a, &s).unwrap(), "0x800");
    }

    #[test]
    fn kernel_entries_and_stack_switches_are_named_frames() {
        use kern_profile_format::frame_marker::{KERNEL_ENTRY, STACK_SWITCH};
        let o = Options::default();
        // leaf <- called from the fault entry code, which interrupted `middle` at 0x1100
        // (looked up as is: 0x10ff would be `root`).
        let s = sample(&[0x1204, 0x1410, KERNEL_ENTRY, 0x1100, 0x1010]);
        assert_eq!(
            names(&o, &s).unwrap(),
            "root;middle;[exception];asm_exc_page_fault;leaf"
        );
        // A switch onto a stack of known code is kept; one into nothing known is cut.
        let s = sample(&[0x1204, 0x1110, STACK_SWITCH, 0x1010]);
        assert_eq!(names(&o, &s).unwrap(), "root;[stack switch];middle;leaf");
        let s = sample(&[0x1204, 0x1110, STACK_SWITCH, 0x9999, 0x8888]);
        assert_eq!(names(&o, &s).unwrap(), "middle;leaf");
        // A recording without the header's marker flag: small values are garbage.
        let mut sym = symbolizer();
        let mut key = Vec::new();
        let s = sample(&[0x1204, 0x1110, STACK_SWITCH, 0x1010]);
        let filter = SampleFilter::from_options(&o);
        assert!(KeyBuilder::new(&filter).build(&s, &mut sym, &mut key));
        let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(&o, true));
        let mut out = Vec::new();
        namer.name_key(&key, &mut out);
        assert_eq!(out.join(";"), "root;[unknown];middle;leaf");
    }

    #[test]
    fn unknowns_collapse_or_show_as_addresses() {
        let o = Options::default();
        let s = sample(&[0x10, 0x20, 0x1050, 0x30, 0x40]);
        assert_eq!(names(&o, &s).unwrap(), "[unknown];root;[unknown]");
        let o = Options {
            addresses: true,
            ..Options::default()
        };
        assert_eq!(names(&o, &s).unwrap(), "0x40;0x30;root;0x20;0x10");
    }

    #[test]
    fn user_samples_group_and_filters_apply() {
        let mut s = sample(&[0x8048000, 0x8048100]);
        s.user = true;
        s.vcpu = 2;
        assert_eq!(names(&Options::default(), &s).unwrap(), "[user]");
        let addrs = Options {
            addresses: true,
            ..Options::default()
        };
        assert_eq!(names(&addrs, &s).unwrap(), "[user];0x8048100;0x8048000");
        let kernel_only = Options {
            mode: ModeFilter::KernelOnly,
            ..Options::default()
        };
        assert!(names(&kernel_only, &s).is_none());
        let user_only = Options {
            mode: ModeFilter::UserOnly,
            ..Options::default()
        };
        assert!(names(&user_only, &s).is_some());
        assert!(names(&user_only, &sample(&[0x1000])).is_none());
        let cpus = Options {
            cpus: Some(CpuList::parse("0-1").unwrap()),
            ..Options::default()
        };
        assert!(names(&cpus, &s).is_none());
        let per_cpu = Options {
            per_cpu: true,
            ..Options::default()
        };
        assert_eq!(names(&per_cpu, &s).unwrap(), "cpu 2;[user]");
    }

    #[test]
    fn task_roots_sit_after_the_cpu_and_keep_its_tag() {
        use crate::tasks::Tasks;
        use kern_profile_format::{TaskIdentity, TaskRecord};
        let mut tasks = Tasks::default();
        let mut thread_name = [0; 16];
        thread_name[..2].copy_from_slice(b"sh");
        tasks.record(&TaskRecord {
            vcpu: 2,
            time_ns: 0,
            task: Ok(TaskIdentity {
                tid: 9,
                pid: 9,
                thread_name,
                process_name: thread_name,
                ..TaskIdentity::default()
            }),
        });
        let opts = Options {
            per_cpu: true,
            per_task: true,
            ..Options::default()
        };
        let filter = SampleFilter::from_options(&opts);
        let mut sym = symbolizer();
        let addrs = [0x1204, 0x1150];
        let mut names_of = |task| {
            let mut s = sample(&addrs);
            s.vcpu = 2;
            s.task = task;
            let mut key = Vec::new();
            assert!(KeyBuilder::new(&filter).build(&s, &mut sym, &mut key));
            let mut namer = StackNamer::new(&mut sym, NameStyle::from_options(&opts, true))
                .with_tasks(tasks.clone());
            let mut out = Vec::new();
            namer.name_key(&key, &mut out);
            assert_eq!(meta_vcpu(key[0]), Some(2));
            assert_eq!(synthetic_roots(&key), 2);
            (out.join(";"), key_task(&key))
        };
        let mut t = tasks.clone();
        let task = t.sample_on(2);
        assert_eq!(
            names_of(task),
            ("cpu 2;[task sh 9];middle;leaf".to_string(), Some(0))
        );
        assert_eq!(
            names_of(None),
            ("cpu 2;[no task];middle;leaf".to_string(), None)
        );
    }

    #[test]
    fn short_paths() {
        assert_eq!(
            short_path(
                "/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/core/src/ptr/mod.rs"
            ),
            "core/src/ptr/mod.rs"
        );
        assert_eq!(
            short_path("/home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/spin-0.9.8/src/mutex.rs"),
            "spin-0.9.8/src/mutex.rs"
        );
        assert_eq!(short_path("src/main.rs"), "src/main.rs");
    }
}
