//! `window=0xSTART-0xEND`: sampling only while that function is on the vCPU's stack
//! (`crate::window_fn`). A callback on the block starting at START and one on each return
//! instruction inside the range keep the per-vCPU depth; nothing else is added to any block.
//! Outside the window the sampler is parked, so it costs what it costs without the window
//! less the samples: with `delay=` the timer skips the vCPU's arm slot; with `period=` the
//! counter is armed with the largest budget (one callback per 2^40 instructions), and the
//! budget left when the window closed is taken up again when it opens.

use std::ffi::{c_uint, c_void};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::trigger::{MAX_BUDGET, THRESHOLD};
use crate::window_fn::{Change, WindowDepth};
use kern_profile_format::Arch;
use kern_profile_unwind::code::is_return;
use qemu_plugin_sys as sys;

use crate::vcpu::Vcpu;
use crate::{guard, lock_now, Plugin, PLUGIN};

/// The `window=` state.
pub struct Window {
    range: Range<u64>,
    arch: Arch,
    depth: WindowDepth,
    /// `period=`: the budget left when each vCPU's window closed (0: none yet).
    left: Box<[AtomicU64]>,
}

impl Window {
    pub fn new(range: Range<u64>, arch: Arch, vcpus: usize) -> Window {
        Window {
            range,
            arch,
            depth: WindowDepth::new(vcpus),
            left: (0..vcpus).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// At translation: the entry and return callbacks of a block of the window function.
///
/// # Safety
/// `tb` is the block QEMU is translating, whose instruction addresses are `insns`.
pub unsafe fn instrument(p: &Plugin, tb: *mut sys::qemu_plugin_tb, insns: &[u64]) {
    let Some(w) = &p.window else { return };
    if insns.first() == Some(&w.range.start) {
        sys::qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(on_enter),
            sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            std::ptr::null_mut(),
        );
    }
    for (i, a) in insns.iter().enumerate() {
        if !w.range.contains(a) {
            continue;
        }
        let insn = sys::qemu_plugin_tb_get_insn(tb, i);
        let mut bytes = [0u8; 4];
        let n = sys::qemu_plugin_insn_data(insn, bytes.as_mut_ptr() as *mut c_void, bytes.len());
        if is_return(w.arch, &bytes[..n.min(bytes.len())]) {
            sys::qemu_plugin_register_vcpu_insn_exec_cb(
                insn,
                Some(on_leave),
                sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                std::ptr::null_mut(),
            );
        }
    }
}

unsafe extern "C" fn on_enter(vcpu: c_uint, _: *mut c_void) {
    guard(|| {
        let Some(p) = PLUGIN.get() else { return };
        if let Some(w) = &p.window {
            if w.depth.enter(vcpu as usize) == Change::Opened {
                set_open(p, w, vcpu, true);
            }
        }
    });
}

unsafe extern "C" fn on_leave(vcpu: c_uint, _: *mut c_void) {
    guard(|| {
        let Some(p) = PLUGIN.get() else { return };
        if let Some(w) = &p.window {
            if w.depth.leave(vcpu as usize) == Change::Closed {
                set_open(p, w, vcpu, false);
            }
        }
    });
}

/// Unparks or parks `vcpu`'s sampler.
fn set_open(p: &Plugin, w: &Window, idx: u32, open: bool) {
    if let Some(t) = &p.timed {
        t.slots.set_parked(idx as usize, !open);
        if !open {
            t.slots.disarm(idx as usize);
        }
        return;
    }
    let Some(mut v) = p.vcpus.get(idx as usize).and_then(lock_now) else {
        return;
    };
    if !v.ready {
        return;
    }
    let score = p.acc.get(idx);
    let icount = v.counter.instructions(score);
    let Some(left) = w.left.get(idx as usize) else {
        return;
    };
    let armed = if open {
        let budget = match left.swap(0, Relaxed) {
            0 => v.trigger.first_budget(),
            b => b,
        };
        v.counter.arm(icount, budget)
    } else {
        left.store(THRESHOLD.saturating_sub(score).max(1), Relaxed);
        v.counter.arm(icount, MAX_BUDGET)
    };
    p.acc.set(idx, armed);
}

/// In the sampling callback: whether `idx` may sample now. Outside the window (a tick armed
/// just before it closed, or the parked budget ran out) it parks again instead.
pub fn admits(p: &Plugin, idx: u32, v: &mut Vcpu) -> bool {
    let Some(w) = &p.window else { return true };
    if w.depth.inside(idx as usize) {
        return true;
    }
    match &p.timed {
        Some(t) => {
            t.slots.disarm(idx as usize);
        }
        None => {
            let icount = v.counter.instructions(p.acc.get(idx));
            p.acc.set(idx, v.counter.arm(icount, MAX_BUDGET));
        }
    }
    false
}

/// Parks every vCPU's host-timer slot until its window opens.
pub fn park_all(p: &Plugin) {
    if let (Some(_), Some(t)) = (&p.window, &p.timed) {
        (0..p.vcpus.len()).for_each(|i| t.slots.set_parked(i, true));
    }
}
