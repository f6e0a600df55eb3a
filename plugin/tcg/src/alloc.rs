//! `alloc=`: the allocator hooks' QEMU glue. At translation, an instruction callback at each
//! hooked function's entry, and conditional callbacks that fire when the block starts at an
//! address a watch slot holds: each vCPU's [`WATCH_SLOTS`] scoreboard slots hold the return
//! addresses of its newest pending calls, so that a call that never returns does not hide the
//! returns of the calls below it. Every block tests slot 0 (the newest call's return
//! address); only blocks that start at a return address a hooked call has had (a return
//! site, usually translated after the call's entry saw it) test the other slots too, so the
//! extra slots cost nothing in the rest of the code. The logic (arguments, stacks, matching,
//! events) is `kern_profile_sampler::alloc_hooks`.

use std::collections::HashSet;
use std::ffi::{c_uint, c_void};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use crate::config::AllocConfig;
use kern_profile_format::{AllocHookStats, Arch};
use kern_profile_sampler::alloc_hooks::matcher::{NOTHING, WATCH_SLOTS};
use kern_profile_sampler::alloc_hooks::{Hook, HookSet, Moment, Spec, VcpuHooks};
use qemu_plugin_sys as sys;

use crate::qemu::U64Entry;
use crate::vcpu::{send, Vcpu};
use crate::{guard, lock_now, Plugin, PLUGIN};

/// The hooks and each vCPU's watch slots.
pub struct AllocHooks {
    pub set: HookSet,
    /// Per vCPU: the return addresses its conditional callbacks wait for.
    pub watch: [U64Entry; WATCH_SLOTS],
    /// Every return address a hooked call has had (at most [`MAX_RETURN_SITES`]): blocks
    /// starting there test all the watch slots.
    return_sites: Mutex<HashSet<u64>>,
}

/// Return sites remembered; beyond, a new one's block tests slot 0 only (as any block).
const MAX_RETURN_SITES: usize = 1 << 20;

impl AllocHooks {
    /// Loads the SPEC and the symbols; every error names the argument (and SPEC line).
    /// `slot(i)` is the scoreboard entry of watch slot `i`.
    pub fn load(
        cfg: &AllocConfig,
        arch: Arch,
        slot: impl Fn(usize) -> U64Entry,
    ) -> Result<AllocHooks, String> {
        let spec = Spec::load(&cfg.spec).map_err(|e| e.to_string())?;
        let set = HookSet::load(&spec, &cfg.symbols, arch).map_err(|e| e.to_string())?;
        Ok(AllocHooks {
            set,
            watch: std::array::from_fn(slot),
            return_sites: Mutex::new(HashSet::new()),
        })
    }

    fn is_return_site(&self, pc: u64) -> bool {
        self.return_sites.lock().is_ok_and(|s| s.contains(&pc))
    }

    /// Sets vCPU `idx`'s watch slots to `addrs`, and remembers them as return sites; `seen`
    /// is what the vCPU last set and noted, so that a call costs QEMU and the lock nothing
    /// when they have not changed.
    fn set_watch(&self, idx: u32, addrs: [u64; WATCH_SLOTS], seen: &mut WatchCache) {
        for ((slot, held), addr) in self.watch.iter().zip(&mut seen.slots).zip(addrs) {
            if *held != addr {
                slot.set(idx, addr);
                *held = addr;
            }
        }
        for addr in addrs.into_iter().filter(|&a| a != NOTHING) {
            let k = (addr ^ (addr >> 7)) as usize % NOTED_CACHE;
            if seen.noted[k] != addr {
                seen.noted[k] = addr;
                self.note_return_site(addr);
            }
        }
    }

    fn note_return_site(&self, addr: u64) {
        if let Ok(mut sites) = self.return_sites.lock() {
            if sites.len() < MAX_RETURN_SITES {
                sites.insert(addr);
            }
        }
    }
}

/// Return sites a vCPU remembers having noted (direct-mapped).
const NOTED_CACHE: usize = 64;

/// What one vCPU last wrote to its watch slots, and return sites it has noted.
pub struct WatchCache {
    slots: [u64; WATCH_SLOTS],
    noted: [u64; NOTED_CACHE],
}

impl Default for WatchCache {
    /// Slots watching nothing (as [`vcpu_init`] writes them), nothing noted.
    fn default() -> Self {
        WatchCache {
            slots: [NOTHING; WATCH_SLOTS],
            noted: [NOTHING; NOTED_CACHE],
        }
    }
}

/// A vCPU starts, or starts over: nothing to watch (scoreboards start at 0, a possible block
/// address; a reset vCPU's hold its last calls' return addresses), whatever its cache says.
pub fn vcpu_init(a: &AllocHooks, idx: u32, v: &mut Vcpu) {
    for slot in &a.watch {
        slot.set(idx, NOTHING);
    }
    v.watch = WatchCache::default();
}

/// A vCPU is reset: its pending calls never returned (they are reported so), and its slots
/// watch nothing.
pub fn vcpu_reset(p: &Plugin, idx: u32, v: &mut Vcpu) {
    let Some(a) = &p.alloc else { return };
    finish_vcpu(p, idx, v);
    vcpu_init(a, idx, v);
}

/// At translation: the entry hooks of the block's instructions, and the return watches.
///
/// # Safety
/// `tb` is the block QEMU is translating, with `n` instructions.
pub unsafe fn instrument(a: &'static AllocHooks, tb: *mut sys::qemu_plugin_tb, insns: &[u64]) {
    for (i, &addr) in insns.iter().enumerate() {
        if let Some(hook) = a.set.at(addr) {
            sys::qemu_plugin_register_vcpu_insn_exec_cb(
                sys::qemu_plugin_tb_get_insn(tb, i),
                Some(on_entry),
                sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                hook as *const Hook as *mut c_void,
            );
        }
    }
    let start = sys::qemu_plugin_tb_vaddr(tb);
    // Slot 0 everywhere; the others at return sites. A block at a return site translated
    // before a hooked call first had it (reached some other way first) tests slot 0 only:
    // the call's return is caught while it is the newest. A vCPU's slots hold an address at
    // most once: at most one of these fires.
    let slots = match a.is_return_site(start) {
        true => &a.watch[..],
        false => &a.watch[..1],
    };
    for slot in slots {
        sys::qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb,
            Some(on_return),
            sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
            sys::qemu_plugin_cond::QEMU_PLUGIN_COND_EQ,
            slot.0,
            start,
            start as usize as *mut c_void,
        );
    }
}

/// Where the vCPU is, for an event.
fn moment(p: &Plugin, idx: u32, v: &Vcpu) -> Moment {
    Moment {
        vcpu: idx,
        time_ns: p.now_ns(),
        icount: crate::vcpu::counted_instructions(p, idx, v).unwrap_or(0),
    }
}

unsafe extern "C" fn on_entry(vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: userdata is a `&'static Hook` of the plugin's hook set.
    let hook = unsafe { &*(userdata as *const Hook) };
    guard(|| with_hooks(vcpu, |a, v, at, out| v.enter_hook(&a.set, hook, at, out)));
}

unsafe extern "C" fn on_return(vcpu: c_uint, userdata: *mut c_void) {
    let pc = userdata as usize as u64;
    guard(|| with_hooks(vcpu, |a, v, at, out| v.reach_hook(&a.set, pc, at, out)));
}

/// Runs `f` on vCPU `idx`'s hooks, then updates its watch slots and hands over its batch
/// when due.
fn with_hooks(idx: u32, f: impl FnOnce(&AllocHooks, &mut Vcpu, Moment, &mut Vec<u8>) -> u64) {
    let Some(p) = PLUGIN.get() else { return };
    let Some(a) = &p.alloc else { return };
    if p.exiting.load(Ordering::Relaxed) {
        return;
    }
    let Some(mut v) = p.vcpus.get(idx as usize).and_then(lock_now) else {
        return;
    };
    if !v.ready {
        return;
    }
    let v = &mut *v;
    let at = moment(p, idx, v);
    let mut buffer = std::mem::take(&mut v.buffer);
    let due = buffer.push_events(at.time_ns, |out| f(a, v, at, out));
    v.buffer = buffer;
    let watch = v
        .hooks
        .as_ref()
        .map_or([NOTHING; WATCH_SLOTS], VcpuHooks::watch);
    a.set_watch(idx, watch, &mut v.watch);
    if due {
        send(p, &mut v.buffer);
    }
}

/// At exit or reset: vCPU `idx`'s pending calls never returned.
pub fn finish_vcpu(p: &Plugin, idx: u32, v: &mut Vcpu) {
    let (Some(a), Some(hooks)) = (&p.alloc, v.hooks.as_mut()) else {
        return;
    };
    let at = Moment {
        vcpu: idx,
        time_ns: p.now_ns(),
        icount: 0,
    };
    v.buffer
        .push_events(at.time_ns, |out| hooks.finish(&a.set, at, out));
}

/// The hooks' record at exit, from the writer's counts.
pub fn stats(events_written: u64, events_lost: u64) -> AllocHookStats {
    AllocHookStats {
        events: events_written,
        dropped: events_lost,
    }
}
