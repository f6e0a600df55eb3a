//! The CFI step (any architecture): the caller's stack pointer is the CFA (or where an
//! interrupt frame saved it), its frame pointer and return address where the row says.

use kern_profile_arch::guest;
use kern_profile_format::{Arch, StopReason};

use super::{plus, Stack, State, Step};
use crate::tables::{CfaBase, CfiRow, Rule};

/// The step from the frame at `st` by its row `row`.
pub(super) fn cfi_step<R>(arch: Arch, row: CfiRow, st: &State, stack: &mut Stack<'_, R>) -> Step
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
    // An interrupt frame may hold the interrupted stack pointer (x86_64's always does).
    let sp = match row.sp_saved {
        None => cfa,
        Some(o) => match value(Rule::AtCfa(o.get().into()), None) {
            Ok(Some(sp)) => sp,
            _ => return Step::Stop(StopReason::Unreadable),
        },
    };
    Step::Call {
        ret: guest(arch).clean_return_address(ret),
        sp,
        fp,
        exact: row.signal,
        may_switch: row.sp_saved.is_some(),
        from_register: row.ra == Rule::Unchanged,
        entry: row.signal,
    }
}
