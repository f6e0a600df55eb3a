//! One vCPU's hooked calls, from entry to event: the arguments and the stack are read at the
//! entry; a free becomes an event there, an allocation or reallocation when it returns (its
//! result is the pointer), matched by [`Matcher`]. The plugin supplies QEMU's register and
//! memory readers; the tests fake them, as for samples.
//!
//! A hooked call made *by* a pending reallocation of the same allocator is that
//! reallocation's implementation (Linux's `krealloc` allocates with
//! `__kmalloc_node_track_caller` and frees with `kfree`; some C libraries' `realloc` calls
//! `malloc` and `free`): it is not recorded, only counted, so that the operation is recorded
//! once, by its outermost function. It is recognised by the outer call's return address among
//! the inner call's return addresses, before any boundary marker (an interrupt handler's call,
//! past a kernel-entry marker, is its own operation), or without frame pointers by its SP just
//! below the reallocation's. Calls made inside an allocation or a free are recorded: memory
//! reclaim inside `kmalloc` frees other objects for real.
//!
//! A bulk call (`array=`: Linux's `kmem_cache_alloc_bulk`, `kmem_cache_free_bulk`) is one
//! event per pointer in its array, with the call's stack: a free reads the array at its
//! entry, an allocation when it returns, as many pointers as it returned (at most
//! [`MAX_BULK`]; an array that cannot be read gives no event).

use kern_profile_format::memtrace::Op;
use kern_profile_format::{alloc_flags, frame_marker, AllocEvent, Arch};
use std::sync::Arc;

use kern_profile_unwind::{EntryState, KernelOs, PtrWidth, UnwindTables};

use super::args::{read, return_register, sp_at_return, Location, RegisterFile};
use super::matcher::{Matcher, Pending, WATCH_SLOTS};
use super::resolve::{Hook, HookSet};
use crate::capture::{Capture, Reg, RegisterReader, SampleSite};

/// How far below a pending reallocation's entry SP a call of the same allocator counts as
/// made by it, when the return addresses cannot tell (no frame pointers): a few frames.
const NEST_SP_WINDOW: u64 = 1024;

/// The most pointers one bulk call's array is read for (Linux batches at most a page of them).
pub const MAX_BULK: u64 = 1024;

/// When something happened on the vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    pub vcpu: u32,
    /// Host time since the plugin started.
    pub time_ns: u64,
    /// The vCPU's instruction count (0 when not counted).
    pub icount: u64,
}

/// A call read at its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Call {
    hook: u16,
    size: u64,
    ptr: u64,
    /// A bulk call's array and how many pointers it holds (0 for other calls).
    array: u64,
    entries: u64,
    flags: u8,
    stop: kern_profile_format::WalkEnd,
    frames: Vec<u64>,
}

/// What the hooks of one vCPU did, for the exit line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub events: u64,
    /// Calls that never returned (events flagged so).
    pub unreturned: u64,
    /// Calls made by a pending call of the same allocator (not recorded).
    pub nested: u64,
}

/// One vCPU's hook state.
#[derive(Debug, Clone)]
pub struct VcpuHooks {
    arch: Arch,
    width: PtrWidth,
    matcher: Matcher<Call>,
    capture: Capture,
    given_up: Vec<Call>,
    /// Frame buffers of calls already encoded, reused: no allocation per call.
    spare: Vec<Vec<u64>>,
    counts: CallCounts,
}

/// Frame buffers kept for reuse per vCPU.
const SPARE_FRAMES: usize = 16;

impl VcpuHooks {
    /// Stacks of at most `depth` return addresses.
    pub fn new(arch: Arch, depth: u32) -> Self {
        let width = if arch.ptr_width() == 4 {
            PtrWidth::W4
        } else {
            PtrWidth::W8
        };
        VcpuHooks {
            arch,
            width,
            matcher: Matcher::default(),
            capture: Capture::new(arch, depth).stack_only(),
            given_up: Vec::new(),
            spare: Vec::new(),
            counts: CallCounts::default(),
        }
    }

    /// Stacks walked with the kernel's unwind tables where they cover the pc (see
    /// [`Capture::with_tables`]).
    pub fn with_tables(self, tables: Option<Arc<UnwindTables>>) -> Self {
        VcpuHooks {
            capture: self.capture.with_tables(tables),
            ..self
        }
    }

    /// Stacks walked with Linux's layouts as the kernel `os` allows them (see
    /// [`Capture::with_kernel_os`]).
    pub fn with_kernel_os(self, os: KernelOs) -> Self {
        VcpuHooks {
            capture: self.capture.with_kernel_os(os),
            ..self
        }
    }

    /// The return addresses the plugin must watch for, one per slot (see
    /// [`Matcher::watch`]).
    pub fn watch(&self) -> [u64; WATCH_SLOTS] {
        self.matcher.watch()
    }

    pub fn counts(&self) -> CallCounts {
        self.counts
    }

    /// The vCPU is at `hook`'s entry. A free is encoded into `out` at once; an allocation
    /// waits for its return. Returns the number of events encoded.
    pub fn enter<G, M>(
        &mut self,
        set: &HookSet,
        hook: &Hook,
        at: Moment,
        guest: &mut G,
        mut mem: M,
        out: &mut Vec<u8>,
    ) -> u64
    where
        G: RegisterReader + RegisterFile,
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        // At the entry the caller's return address is at [SP] on x86, whatever the first
        // instruction is; riscv64 and aarch64 have it in ra/x30.
        let x86 = kern_profile_arch::guest(self.arch).return_address_on_stack();
        let site = SampleSite {
            vcpu: at.vcpu,
            pc: hook.entry,
            regs_pc: hook.entry,
            entry: match x86 {
                true => EntryState::BeforePush,
                false => EntryState::Framed,
            },
            icount: at.icount,
            time_ns: at.time_ns,
        };
        let mut frames = self.spare.pop().unwrap_or_default();
        frames.clear();
        let (rec, extras) = self.capture.take(&site, guest, &mut mem);
        let (sp, user, stop) = (rec.sp, rec.user, rec.stop);
        let ret = match x86 {
            true => rec.sp_word,
            false => {
                // Unless a table walk put it first in the frames already.
                if !rec.entry_resolved {
                    frames.extend(extras.return_register);
                }
                extras.return_register
            }
        };
        frames.extend_from_slice(rec.frames);
        if self.is_nested(set, hook, sp, &frames) {
            self.counts.nested += 1;
            self.recycle(frames);
            return 0;
        }
        let mut flags = if user { alloc_flags::USER } else { 0 };
        let mut arg = |loc: Option<Location>| -> Option<u64> {
            let loc = loc?;
            let v = read(loc, self.arch, sp, guest, &mut mem);
            if v.is_none() {
                flags |= alloc_flags::ARG_UNREADABLE;
            }
            Some(v.unwrap_or(0))
        };
        let size = arg(hook.size);
        let count = arg(hook.count).map(|c| c & u32::MAX as u64);
        let order = arg(hook.order).map(|o| o & u32::MAX as u64);
        let ptr = arg(hook.ptr).unwrap_or(0);
        let array = arg(hook.array);
        let size = match (size, count, order) {
            (_, _, Some(o)) => 1u64.checked_shl(o as u32).unwrap_or(0),
            // A bulk call's count is its array's length; each object is of `size`.
            (Some(s), Some(_), _) if array.is_some() => s,
            (Some(s), Some(c), _) => s.saturating_mul(c),
            (Some(s), None, _) => s,
            (None, ..) => 0,
        };
        let call = Call {
            hook: hook.id,
            size,
            ptr,
            array: array.unwrap_or(0),
            entries: array.and(count).unwrap_or(0),
            flags,
            stop,
            frames,
        };
        let mut n = 0;
        match (hook.op, ret) {
            (Op::Free, _) if array.is_some() => {
                n += self.emit_bulk(set, &call, call.entries, at, &mut mem, out);
                self.recycle(call.frames);
            }
            (Op::Free, _) => {
                n += self.emit(set, &call, call.ptr, 0, at, out);
                self.recycle(call.frames);
            }
            (_, Some(ret)) => {
                let p = Pending {
                    ret,
                    sp: sp_at_return(self.arch, sp),
                    call,
                };
                self.matcher.enter(p, &mut self.given_up);
            }
            // No return address to watch for: the result cannot be caught.
            (_, None) => self.given_up.push(call),
        }
        n + self.emit_given_up(set, at, out)
    }

    /// Whether a pending reallocation of `hook`'s allocator made this call (it is that
    /// reallocation's implementation): its return address is among `frames` before the first
    /// boundary marker, or, for kernels without frame pointers, this call's SP (`sp`) lies
    /// just below its entry's, on the same stack.
    fn is_nested(&self, set: &HookSet, hook: &Hook, sp: u64, frames: &[u64]) -> bool {
        let w = self.width.bytes() as u64;
        self.matcher.pending().any(|p| {
            let outer = set.hooks.get(p.call.hook as usize);
            if outer.map(|h| (h.allocator, h.op)) != Some((hook.allocator, Op::Realloc)) {
                return false;
            }
            let outer_sp = p.sp.wrapping_sub(sp_at_return(self.arch, 0));
            let below = outer_sp.wrapping_sub(sp);
            let mut own = frames.iter().take_while(|&&f| f >= frame_marker::LIMIT);
            own.any(|&f| f == p.ret) || (sp < outer_sp && below <= NEST_SP_WINDOW.max(w))
        })
    }

    /// Keeps an encoded call's frame buffer for the next call.
    fn recycle(&mut self, frames: Vec<u64>) {
        if self.spare.len() < SPARE_FRAMES {
            self.spare.push(frames);
        }
    }

    /// The vCPU entered a block at `pc`, one of the watched return addresses; `mem` reads
    /// guest memory (a bulk allocation's array). Returns the number of events encoded into
    /// `out`.
    pub fn reached<G, M>(
        &mut self,
        set: &HookSet,
        pc: u64,
        at: Moment,
        guest: &mut G,
        mut mem: M,
        out: &mut Vec<u8>,
    ) -> u64
    where
        G: RegisterReader + RegisterFile,
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let mask = self.width.max_addr();
        let Some(sp) = guest.read(Reg::StackPointer) else {
            return 0;
        };
        let returned = self.matcher.reached(pc, sp & mask, &mut self.given_up);
        // The calls above it were left before it returned.
        let mut n = self.emit_given_up(set, at, out);
        if let Some(mut c) = returned {
            let result = guest.register(return_register(self.arch)).map(|v| v & mask);
            if result.is_none() {
                c.flags |= alloc_flags::ARG_UNREADABLE;
            }
            let result = result.unwrap_or(0);
            n += match self.op_of(set, &c) {
                Some(Op::Realloc) => self.emit(set, &c, c.ptr, result, at, out),
                // A bulk allocation returns how many of its array's pointers it filled.
                _ if c.array != 0 => {
                    let filled = result.min(c.entries);
                    self.emit_bulk(set, &c, filled, at, &mut mem, out)
                }
                _ => self.emit(set, &c, result, 0, at, out),
            };
            self.recycle(c.frames);
        }
        n
    }

    /// At exit, or when the vCPU is reset: every call still pending never returned.
    pub fn finish(&mut self, set: &HookSet, at: Moment, out: &mut Vec<u8>) -> u64 {
        let pending: Vec<Call> = self.matcher.drain().collect();
        self.given_up.extend(pending);
        self.emit_given_up(set, at, out)
    }

    fn emit_given_up(&mut self, set: &HookSet, at: Moment, out: &mut Vec<u8>) -> u64 {
        let calls = std::mem::take(&mut self.given_up);
        let mut n = 0;
        for mut c in calls {
            c.flags |= alloc_flags::UNRETURNED;
            self.counts.unreturned += 1;
            let old = if self.op_of(set, &c) == Some(Op::Realloc) {
                c.ptr
            } else {
                0
            };
            n += self.emit(set, &c, old, 0, at, out);
            self.recycle(c.frames);
        }
        n
    }

    /// One event per non-null pointer among the first `entries` (at most [`MAX_BULK`]) of
    /// `c`'s array, read through `mem`; none when the array cannot be read.
    fn emit_bulk<M>(
        &mut self,
        set: &HookSet,
        c: &Call,
        entries: u64,
        at: Moment,
        mem: &mut M,
        out: &mut Vec<u8>,
    ) -> u64
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let (width, w) = (self.width, self.width.bytes());
        let mut bytes = vec![0u8; entries.min(MAX_BULK) as usize * w];
        if bytes.is_empty() || !mem(c.array, &mut bytes) {
            return 0;
        }
        let mut n = 0;
        for ptr in bytes.chunks(w).map(|b| width.word(b)) {
            if ptr != 0 {
                n += self.emit(set, c, ptr, 0, at, out);
            }
        }
        n
    }

    fn op_of(&self, set: &HookSet, c: &Call) -> Option<Op> {
        set.hooks.get(c.hook as usize).map(|h| h.op)
    }

    fn emit(
        &mut self,
        set: &HookSet,
        c: &Call,
        ptr: u64,
        new_ptr: u64,
        at: Moment,
        out: &mut Vec<u8>,
    ) -> u64 {
        let Some(hook) = set.hooks.get(c.hook as usize) else {
            return 0;
        };
        AllocEvent {
            vcpu: at.vcpu,
            op: hook.op,
            flags: c.flags,
            function: hook.id,
            allocator: hook.allocator,
            stop: c.stop,
            time_ns: at.time_ns,
            icount: at.icount,
            size: c.size,
            ptr,
            new_ptr,
            frames: &c.frames,
        }
        .encode(self.width.bytes(), out);
        self.counts.events += 1;
        1
    }
}

#[cfg(test)]
mod tests;
