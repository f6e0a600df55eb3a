//! The walk with unwind tables: for each frame the best rule there is, ORC where it covers
//! the pc (x86_64 Linux), else DWARF CFI, else the frame-pointer walkers from there on
//! ([`crate::walk_guest`], with their crossings).
//!
//! ORC's entry hints cross into the interrupted context as Linux's own unwinder does
//! (arch/x86/kernel/unwind_orc.c): a REGS frame has a whole `struct pt_regs` at the computed
//! stack pointer, a REGS_PARTIAL frame the hardware's interrupt frame alone. The walk marks
//! the crossing as the frame-pointer walkers do (a [`frame_marker::KERNEL_ENTRY`], then the
//! interrupted instruction's own address) and goes on in the interrupted context: kernel
//! code with the table, a user program's stack by its frame pointers alone, with no stack
//! switch (the user-context rule of [`crate::walk_across`]).
//!
//! Guards, whatever the tables say: every step must raise the stack pointer (a frame that
//! keeps its return address in a register may keep it once, in the innermost frame), and
//! stays within the stack's span; only an ORC rule that reads the stack pointer from memory
//! (Linux's switch off an interrupt stack) may leave the stack, at most
//! `crossings.stack_switches` times, after a [`frame_marker::STACK_SWITCH`]; at most four
//! kernel entries; at most `max_depth` frames. Every read is of one word or one register
//! block on the stack being walked.

use kern_profile_arch::guest;
use kern_profile_format::{frame_marker, Arch, StopReason};

use super::orc::{reg, OrcEntry, OrcKind};
use super::{CfaBase, CfiRow, Rule, UnwindTables};
use crate::cross::{fake_return, span_end, Frames};
use crate::{walk_across, walk_guest, Crossings, PtrWidth, Walk};

/// The registers a walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// The return-address register (riscv64 `ra`, aarch64 `x30`), where there is one.
    pub ra: Option<u64>,
}

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

/// At most this many kernel entries per walk (an exception inside an interrupt inside a
/// system call is three).
const MAX_ENTRIES: u8 = 4;

/// Registers saved by entry code: a whole `pt_regs` at `at`, or only its interrupt frame.
#[derive(Debug, Clone, Copy)]
struct SavedRegs {
    at: u64,
    full: bool,
}

/// Where the walk stands: a frame's registers, and the stack it is on.
#[derive(Debug, Clone, Copy)]
struct State {
    pc: u64,
    sp: u64,
    fp: u64,
    ra: Option<u64>,
    /// `pc` is the instruction itself (the sample's, or an interrupted one), not a return
    /// address (looked up minus 1: a call's last byte).
    exact: bool,
    regs: Option<SavedRegs>,
    /// The whole `pt_regs` before a partial one (Linux's `prev_regs`).
    prev_full: Option<u64>,
    /// Where this stack's walk began: its span ends at `span_end(stack_span, seg_start)`.
    seg_start: u64,
}

/// What one step found.
enum Step {
    /// The caller: its return address and registers.
    Call {
        ret: u64,
        sp: u64,
        fp: u64,
        /// The return address is not a call's (ORC's `signal`).
        exact: bool,
        /// The stack pointer was read from memory: it may lie on another stack.
        may_switch: bool,
        /// The return address came from the return-address register.
        from_register: bool,
    },
    /// The interrupted context behind entry code.
    Entry {
        ip: u64,
        sp: u64,
        fp: u64,
        user: bool,
        regs: SavedRegs,
        prev_full: Option<u64>,
    },
    /// No rule the walk can follow: the frame-pointer walk goes on from here.
    HandOver,
    Stop(StopReason),
}

/// The rule for `addr`: ORC where it covers it, else CFI.
enum FrameRule {
    Orc(OrcEntry),
    Cfi(CfiRow),
}

fn rule_at(tables: &UnwindTables, addr: u64) -> Option<FrameRule> {
    if let Some(e) = tables.orc.as_ref().and_then(|t| t.find(addr)) {
        if e.kind != OrcKind::Undefined {
            return Some(FrameRule::Orc(e));
        }
    }
    tables.cfi.as_ref()?.find(addr).map(FrameRule::Cfi)
}

/// Walks the stack from `start` with `tables`, storing return addresses (and markers) into
/// `out` as [`crate::walk_guest`] does. `None` when the walk is of user mode or no table
/// covers the start pc: the frame-pointer walk is the one to use then.
pub fn walk_tables<R>(
    tables: &UnwindTables,
    start: StartRegs,
    max_depth: usize,
    crossings: Crossings,
    mut read: R,
    out: &mut [u64],
) -> Option<Walk>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    if crossings.user_mode {
        return None;
    }
    // The first frame's rule, looked up once.
    let mut first = Some(rule_at(tables, start.pc)?);
    let arch = tables.arch;
    let width = PtrWidth::from_bytes(arch.ptr_width() as usize).unwrap_or(PtrWidth::W8);
    let mut frames = Frames::new(out, max_depth);
    let mut st = State {
        pc: start.pc,
        sp: start.sp,
        fp: start.fp,
        ra: start.ra,
        exact: true,
        regs: None,
        prev_full: None,
        seg_start: start.sp,
    };
    let (mut switches, mut entries) = (0u8, 0u8);
    let stop = loop {
        if frames.full() {
            break StopReason::DepthLimit;
        }
        let probe = if st.exact {
            st.pc
        } else {
            st.pc.wrapping_sub(1)
        };
        let mut stack = Stack {
            width,
            low: st.sp,
            end: span_end(crossings.stack_span, st.seg_start),
            read: &mut read,
        };
        let rule = first.take().or_else(|| rule_at(tables, probe));
        let step = match rule {
            Some(FrameRule::Orc(e)) if arch == Arch::X86_64 => orc_step(e, &st, &mut stack),
            Some(FrameRule::Cfi(row)) => cfi_step(arch, row, &st, &mut stack),
            _ => Step::HandOver,
        };
        match step {
            Step::Stop(reason) => break reason,
            Step::HandOver => {
                let go_on = Crossings {
                    user_mode: false,
                    ..crossings
                };
                let rest = frames.rest();
                let depth = rest.len();
                let w = walk_guest(arch, st.sp, st.fp, depth, go_on, &mut read, rest);
                frames.advance(w.frames);
                break w.stop;
            }
            Step::Call {
                ret,
                sp,
                fp,
                exact,
                may_switch,
                from_register,
            } => {
                let end = span_end(crossings.stack_span, st.seg_start);
                let upwards = sp > st.sp || (sp == st.sp && from_register && st.ra.is_some());
                let mut seg_start = st.seg_start;
                if !upwards || sp >= end {
                    if !may_switch || switches >= crossings.stack_switches {
                        break match upwards {
                            true => StopReason::OffStack,
                            false => StopReason::NotIncreasing,
                        };
                    }
                    switches += 1;
                    if !frames.push(frame_marker::STACK_SWITCH) {
                        break StopReason::DepthLimit;
                    }
                    seg_start = sp;
                }
                if ret == 0 || fake_return(ret, width) {
                    break StopReason::NullReturnAddress;
                }
                if !frames.push(ret) {
                    break StopReason::DepthLimit;
                }
                st = State {
                    pc: ret,
                    sp,
                    fp,
                    ra: None,
                    exact,
                    regs: None,
                    prev_full: None,
                    seg_start,
                };
            }
            Step::Entry {
                ip,
                sp,
                fp,
                user,
                regs,
                prev_full,
            } => {
                entries += 1;
                if entries > MAX_ENTRIES {
                    break StopReason::NotIncreasing;
                }
                if !frames.push(frame_marker::KERNEL_ENTRY) || !frames.push(ip) {
                    break StopReason::DepthLimit;
                }
                if user {
                    // The program's stack by its frame pointers, and nothing below it.
                    let in_user = Crossings {
                        user_mode: true,
                        ..crossings
                    };
                    let rest = frames.rest();
                    let depth = rest.len();
                    let w = walk_across(sp, fp, width, depth, in_user, &mut read, rest);
                    frames.advance(w.frames);
                    break w.stop;
                }
                st = State {
                    pc: ip,
                    sp,
                    fp,
                    ra: None,
                    exact: true,
                    regs: Some(regs),
                    prev_full,
                    seg_start: sp,
                };
            }
        }
    };
    Some(Walk {
        frames: frames.n,
        stop,
    })
}

/// Reads of the stack being walked: words in `[low, end)`.
struct Stack<'r, R> {
    width: PtrWidth,
    low: u64,
    end: u64,
    read: &'r mut R,
}

impl<R: FnMut(u64, &mut [u8]) -> bool> Stack<'_, R> {
    /// Whether `[addr, addr + len)` lies on the stack.
    fn holds(&self, addr: u64, len: u64) -> bool {
        addr >= self.low && addr.checked_add(len).is_some_and(|e| e <= self.end)
    }

    /// The word at `addr`, if it is on the stack and readable.
    fn word(&mut self, addr: u64) -> Option<u64> {
        let w = self.width.bytes();
        self.holds(addr, w as u64).then_some(())?;
        self.any_word(addr)
    }

    /// The word at `addr` wherever it lies (one read: a pointer the kernel saved itself).
    fn any_word(&mut self, addr: u64) -> Option<u64> {
        let w = self.width.bytes();
        addr.checked_add(w as u64 - 1)
            .filter(|&l| l <= self.width.max_addr())?;
        let mut b = [0u8; 8];
        (self.read)(addr, &mut b[..w]).then(|| self.width.word(&b))
    }
}

/// One word at `addr + off`.
fn plus(addr: u64, off: i64) -> Option<u64> {
    addr.checked_add_signed(off)
}

/// The ORC step (x86_64), after Linux's `unwind_next_frame`.
fn orc_step<R>(e: OrcEntry, st: &State, stack: &mut Stack<'_, R>) -> Step
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    use StopReason::Unreadable;
    if e.kind == OrcKind::EndOfStack {
        return Step::Stop(StopReason::NullFramePointer);
    }
    let sp_off = e.sp_offset as i64;
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
                user: cs & 3 == 3,
                regs,
                prev_full,
            }
        }
        OrcKind::Undefined | OrcKind::EndOfStack => Step::Stop(StopReason::NullFramePointer),
    }
}

/// The CFI step (any architecture): the caller's stack pointer is the CFA.
fn cfi_step<R>(arch: Arch, row: CfiRow, st: &State, stack: &mut Stack<'_, R>) -> Step
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let base = match row.cfa_base {
        CfaBase::StackPointer => st.sp,
        CfaBase::FramePointer => st.fp,
    };
    let Some(cfa) = plus(base, row.cfa_offset as i64) else {
        return Step::Stop(StopReason::Unreadable);
    };
    let mut value = |rule: Rule, unchanged: Option<u64>| match rule {
        Rule::Unchanged => Ok(unchanged),
        Rule::AtCfa(o) => plus(cfa, o as i64)
            .and_then(|a| stack.word(a))
            .map(Some)
            .ok_or(()),
        Rule::CfaPlus(o) => Ok(plus(cfa, o as i64)),
    };
    let in_register = guest(arch).dwarf_fp_ra().is_some();
    let ret = match value(row.ra, st.ra.filter(|_| in_register)) {
        Ok(Some(ret)) => ret,
        // The outermost frame (x86), or a caller in a register not known here.
        Ok(None) if in_register => return Step::HandOver,
        Ok(None) => return Step::Stop(StopReason::NullReturnAddress),
        Err(()) => return Step::Stop(StopReason::Unreadable),
    };
    let fp = match value(row.fp, Some(st.fp)) {
        Ok(fp) => fp.unwrap_or(st.fp),
        Err(()) => return Step::Stop(StopReason::Unreadable),
    };
    Step::Call {
        ret: guest(arch).clean_return_address(ret),
        sp: cfa,
        fp,
        exact: false,
        may_switch: false,
        from_register: row.ra == Rule::Unchanged,
    }
}

#[cfg(test)]
mod tests;
