//! The CFI step (any architecture): the caller's stack pointer is the CFA (or where an
//! interrupt frame saved it), its frame pointer and return address where the row says.

use kern_profile_arch::{guest, Guest};
use kern_profile_format::{Arch, StopReason};

use super::{plus, Stack, State, Step};
use crate::tables::{CfaBase, CfiRow, Rule};

/// What the step needs of the architecture, looked up once a walk.
pub(super) struct CfiArch {
    guest: &'static dyn Guest,
    /// Calls leave the return address in a register.
    ra_in_register: bool,
}

impl CfiArch {
    pub fn new(arch: Arch) -> CfiArch {
        let guest = guest(arch);
        CfiArch {
            guest,
            ra_in_register: guest.dwarf_fp_ra().is_some(),
        }
    }
}

/// The step from the frame at `st` by its row `row`.
#[inline]
pub(super) fn cfi_step<R>(arch: &CfiArch, row: CfiRow, st: &State, stack: &mut Stack<'_, R>) -> Step
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
    let in_register = arch.ra_in_register;
    // A frame record (the frame pointer saved right below the return address): one read.
    let w = stack.width.bytes() as i64;
    let record = match (row.fp, row.ra) {
        (Rule::AtCfa(f), Rule::AtCfa(r)) if r as i64 == f as i64 + w => Some(f),
        _ => None,
    };
    let (ret, fp) = match record {
        Some(f) => match plus(cfa, f as i64).and_then(|a| stack.pair(a)) {
            Some((fp, ret)) => (ret, fp),
            None => return Step::Stop(StopReason::Unreadable),
        },
        None => {
            let mut value = |rule: Rule, unchanged: Option<u64>| match rule {
                Rule::Unchanged => Ok(unchanged),
                Rule::AtCfa(o) => plus(cfa, o as i64)
                    .and_then(|a| stack.word(a))
                    .map(Some)
                    .ok_or(()),
                Rule::CfaPlus(o) => Ok(plus(cfa, o as i64)),
            };
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
            (ret, fp)
        }
    };
    // An interrupt frame may hold the interrupted stack pointer (x86_64's always does).
    let sp = match row.sp_saved {
        None => cfa,
        Some(o) => match plus(cfa, i64::from(o.get())).and_then(|a| stack.word(a)) {
            Some(sp) => sp,
            None => return Step::Stop(StopReason::Unreadable),
        },
    };
    // The record the frame pointer points to: a frame-pointer walk would read the same.
    let at_fp = record
        .and_then(|f| plus(cfa, f as i64))
        .filter(|&a| a == st.fp && !row.signal)
        .map(|_| (st.sp, st.fp));
    Step::Call {
        ret: arch.guest.clean_return_address(ret),
        sp,
        fp,
        exact: row.signal,
        may_switch: row.sp_saved.is_some(),
        from_register: row.ra == Rule::Unchanged,
        entry: row.signal,
        record_at_fp: at_fp,
    }
}
