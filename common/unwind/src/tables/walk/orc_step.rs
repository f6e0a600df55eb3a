//! The ORC step (x86_64 Linux), after Linux's `unwind_next_frame`
//! (arch/x86/kernel/unwind_orc.c): the caller's stack pointer from the entry's base register
//! and offset, then its return address (CALL), or the interrupted context in the registers
//! entry code saved (REGS: a whole `pt_regs`; REGS_PARTIAL: the hardware's interrupt frame).

use kern_profile_format::StopReason;

use super::{plus, SavedRegs, Stack, State, Step};
use crate::tables::orc::{reg, OrcEntry, OrcKind};

/// `struct pt_regs` on x86_64: its size and where the registers the walk reads lie.
mod pt_regs {
    pub const SIZE: u64 = 168;
    pub const R13: u64 = 16;
    pub const BP: u64 = 32;
    pub const R10: u64 = 56;
    pub const DX: u64 = 96;
    pub const DI: u64 = 112;
    /// The hardware's interrupt frame: `ip, cs, flags, sp, ss`.
    pub const IRET: u64 = 128;
    pub const IRET_SIZE: u64 = 40;
}

/// The step from the frame at `st` by its entry `e`.
#[inline]
pub(super) fn orc_step<R>(e: OrcEntry, st: &State, stack: &mut Stack<'_, R>) -> Step
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    use StopReason::Unreadable;
    if e.kind == OrcKind::EndOfStack {
        return Step::Stop(StopReason::NullFramePointer);
    }
    let sp_off = e.sp_offset as i64;
    // Most frames: a call's, by the stack pointer, the frame pointer kept, saved on this
    // stack, or pushed right below the return address (what the general path below does for
    // them, without its other cases).
    if e.kind == OrcKind::Call && e.sp_reg == reg::SP {
        let sp = match plus(st.sp, sp_off) {
            Some(sp) if sp > st.sp => sp,
            Some(_) => return Step::Stop(StopReason::NotIncreasing),
            None => return Step::Stop(Unreadable),
        };
        let word_below = |stack: &mut Stack<'_, R>| stack.word(sp.wrapping_sub(8));
        let found =
            match e.bp_reg {
                // `push rbp` first thing: {saved fp, return address}, one read.
                reg::PREV_SP if e.bp_offset == -16 => {
                    stack.pair(sp.wrapping_sub(16)).map(|(fp, ret)| (ret, fp))
                }
                reg::PREV_SP => word_below(stack)
                    .zip(plus(sp, e.bp_offset as i64).and_then(|a| stack.any_word(a))),
                reg::UNDEFINED => word_below(stack).map(|ret| (ret, st.fp)),
                reg::BP => word_below(stack)
                    .zip(plus(st.fp, e.bp_offset as i64).and_then(|a| stack.word(a))),
                _ => None,
            };
        let Some((ret, fp)) = found else {
            return Step::Stop(Unreadable);
        };
        return Step::Call {
            ret,
            sp,
            fp,
            exact: e.signal,
            may_switch: false,
            from_register: false,
            entry: false,
            record_at_fp: None,
        };
    }
    // A register saved in the entry code's pt_regs (Linux's get_reg).
    let saved = |stack: &mut Stack<'_, R>, off: u64| -> Option<u64> {
        let at = match st.regs {
            Some(r) if r.full => r.at,
            _ => st.prev_full?,
        };
        stack.any_word(at.checked_add(off)?)
    };
    let (base, indirect) = match e.sp_reg {
        reg::SP => (plus(st.sp, sp_off), false),
        reg::BP => (plus(st.fp, sp_off), false),
        reg::SP_INDIRECT => (Some(st.sp), true),
        reg::BP_INDIRECT => (plus(st.fp, sp_off), true),
        reg::R10 => (saved(stack, pt_regs::R10), false),
        reg::R13 => (saved(stack, pt_regs::R13), false),
        reg::DI => (saved(stack, pt_regs::DI), false),
        reg::DX => (saved(stack, pt_regs::DX), false),
        _ => (None, false),
    };
    let Some(mut sp) = base else {
        return Step::Stop(Unreadable);
    };
    if indirect {
        let Some(v) = stack.word(sp) else {
            return Step::Stop(Unreadable);
        };
        sp = v;
        if e.sp_reg == reg::SP_INDIRECT {
            let Some(v) = plus(sp, sp_off) else {
                return Step::Stop(Unreadable);
            };
            sp = v;
        }
    }
    // What the caller's frame pointer is when the entry does not say.
    let bp_from = |stack: &mut Stack<'_, R>, regs: Option<SavedRegs>, prev: Option<u64>| {
        let at = match regs {
            Some(r) if r.full => Some(r.at),
            _ => prev,
        };
        match at {
            // Checked to fit when the registers were found.
            Some(at) => stack.any_word(at + pt_regs::BP),
            None => Some(st.fp),
        }
    };
    let bp_rule = |stack: &mut Stack<'_, R>, sp: u64, unchanged: Option<u64>| match e.bp_reg {
        reg::UNDEFINED => unchanged,
        reg::PREV_SP => plus(sp, e.bp_offset as i64).and_then(|a| stack.any_word(a)),
        reg::BP => plus(st.fp, e.bp_offset as i64).and_then(|a| stack.word(a)),
        _ => None,
    };
    match e.kind {
        OrcKind::Call => {
            if !indirect && sp <= st.sp {
                return Step::Stop(StopReason::NotIncreasing);
            }
            // The return address lies right below the caller's stack pointer: on this
            // stack, or (after a switch) on the one the stack pointer was read from.
            let ret = match indirect {
                false => stack.word(sp.wrapping_sub(8)),
                true => sp.checked_sub(8).and_then(|a| stack.any_word(a)),
            };
            let Some(ret) = ret else {
                return Step::Stop(Unreadable);
            };
            let Some(fp) = bp_rule(stack, sp, Some(st.fp)) else {
                return Step::Stop(Unreadable);
            };
            Step::Call {
                ret,
                sp,
                fp,
                exact: e.signal,
                may_switch: indirect,
                from_register: false,
                entry: false,
                record_at_fp: None,
            }
        }
        OrcKind::Regs | OrcKind::RegsPartial => {
            let full = e.kind == OrcKind::Regs;
            let (at, len) = match full {
                true => (sp, pt_regs::SIZE),
                false => match sp.checked_sub(pt_regs::IRET) {
                    Some(at) => (at, pt_regs::IRET_SIZE),
                    None => return Step::Stop(Unreadable),
                },
            };
            // The whole pt_regs lies below the end of the address space (every offset
            // into it below is then in range).
            if at.checked_add(pt_regs::SIZE).is_none() {
                return Step::Stop(Unreadable);
            }
            let frame = at + pt_regs::IRET;
            if !indirect && !stack.holds(if full { at } else { frame }, len) {
                return Step::Stop(StopReason::OffStack);
            }
            let (Some(ip), Some(cs), Some(isp)) = (
                stack.any_word(frame),
                stack.any_word(frame + 8),
                stack.any_word(frame + 24),
            ) else {
                return Step::Stop(Unreadable);
            };
            let cs = cs & 0xffff;
            if cs & !3 == 0 || !matches!(cs & 3, 0 | 3) || ip == 0 {
                return Step::Stop(Unreadable);
            }
            let regs = SavedRegs { at, full };
            let prev_full = match (full, st.regs) {
                (false, Some(r)) if r.full => Some(r.at),
                _ => None,
            };
            let unchanged = bp_from(stack, Some(regs), prev_full);
            let Some(fp) = bp_rule(stack, sp, unchanged) else {
                return Step::Stop(Unreadable);
            };
            Step::Entry {
                ip,
                sp: isp,
                fp,
                ra: None,
                user: cs & 3 == 3,
                regs,
                prev_full,
            }
        }
        OrcKind::Undefined | OrcKind::EndOfStack => Step::Stop(StopReason::NullFramePointer),
    }
}
