//! At translation: what each block registers (the sampler: an arm-slot test with `delay=`,
//! the instruction count and a budget test with `period=`; and with `exact=on` its execution
//! counter).

use std::cell::RefCell;
use std::ffi::c_void;

use crate::arm_slots::ARMED;
use crate::blocks::BlockInfo;
use crate::trigger::THRESHOLD;
use kern_profile_format::SamplingMode;
use kern_profile_unwind::EntryState;
use qemu_plugin_sys as sys;

use crate::{vcpu, Plugin, PLUGIN};

/// QEMU's translation callback.
///
/// # Safety
/// `tb` is the block QEMU is translating.
pub unsafe fn tb_trans(tb: *mut sys::qemu_plugin_tb) {
    let Some(p) = PLUGIN.get() else { return };
    let n = sys::qemu_plugin_tb_n_insns(tb);
    // One buffer per translating thread: Linux guests translate hundreds of thousands of
    // blocks, and this runs for each.
    thread_local!(static INSNS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) });
    INSNS.with_borrow_mut(|insns| {
        insns.clear();
        insns.extend(
            (0..n).map(|i| sys::qemu_plugin_insn_vaddr(sys::qemu_plugin_tb_get_insn(tb, i))),
        );
        let (first, len) = first_bytes(tb, n);
        let entry = EntryState::classify_on(p.arch, &first[..len]);
        let Some(info) = p.blocks.lock().ok().map(|mut t| t.intern(insns, entry)) else {
            return;
        };
        instrument_sampling(p, tb, n, info);
        crate::window::instrument(p, tb, insns);
        count_exactly(p, tb, insns);
        if let Some(a) = &p.alloc {
            crate::alloc::instrument(a, tb, insns);
        }
        if let Some(s) = &p.switches {
            crate::switches::instrument(s, tb, insns);
        }
        if !p.flight_triggers.is_empty() {
            crate::flight::instrument(&p.flight_triggers, tb, insns);
        }
    });
}

/// The sampler's per-block instrumentation. With `period=`, the count first, then the
/// sampler: the callback sees the block's instructions counted and works out which of them
/// the budget ran out at. With `delay=`, only the test of the arm slot; with
/// `trigger=interrupt` or `exact=only`, nothing.
///
/// # Safety
/// `tb` is the block QEMU is translating, with `n` instructions.
unsafe fn instrument_sampling(
    p: &Plugin,
    tb: *mut sys::qemu_plugin_tb,
    n: usize,
    info: &BlockInfo,
) {
    let threshold = match p.cfg.sampling {
        SamplingMode::Off => return,
        // Sampled at interrupts: no block carries anything.
        SamplingMode::DelayMicros(_) if p.cfg.at_interrupts => return,
        SamplingMode::DelayMicros(_) => ARMED,
        SamplingMode::PeriodInstructions(_) => {
            sys::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
                tb,
                sys::qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
                p.acc.0,
                n as u64,
            );
            THRESHOLD
        }
    };
    sys::qemu_plugin_register_vcpu_tb_exec_cond_cb(
        tb,
        Some(vcpu::on_sample),
        sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
        sys::qemu_plugin_cond::QEMU_PLUGIN_COND_GE,
        p.acc.0,
        threshold,
        info as *const BlockInfo as *mut c_void,
    );
}

/// Up to the first 4 bytes of the block's first instruction (enough to classify its entry),
/// and how many there are.
///
/// # Safety
/// `tb` is the block QEMU is translating, with `n` instructions.
unsafe fn first_bytes(tb: *mut sys::qemu_plugin_tb, n: usize) -> ([u8; 4], usize) {
    let mut first = [0u8; 4];
    let got = if n > 0 {
        let insn = sys::qemu_plugin_tb_get_insn(tb, 0);
        sys::qemu_plugin_insn_data(insn, first.as_mut_ptr() as *mut c_void, first.len())
    } else {
        0
    };
    (first, got.min(first.len()))
}

/// With `exact=on`, an inline add of 1 into the block's own counter slot.
///
/// # Safety
/// `tb` is the block QEMU is translating.
unsafe fn count_exactly(p: &Plugin, tb: *mut sys::qemu_plugin_tb, insns: &[u64]) {
    let Some(exact) = &p.exact else { return };
    let Some(entry) = exact.lock().ok().and_then(|mut e| e.counter_for(insns)) else {
        return;
    };
    sys::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
        tb,
        sys::qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
        entry.0,
        1,
    );
}
