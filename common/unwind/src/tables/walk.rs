//! The walk with unwind tables: for each frame the best rule there is, ORC where it covers
//! the pc (x86_64 Linux), else DWARF CFI, else the frame-pointer walkers from there on
//! ([`crate::walk_guest`], with their crossings).
//!
//! ORC's entry hints cross into the interrupted context as Linux's own unwinder does
//! (arch/x86/kernel/unwind_orc.c): a REGS frame has a whole `struct pt_regs` at the computed
//! stack pointer, a REGS_PARTIAL frame the hardware's interrupt frame alone. The walk marks
//! the crossing as the frame-pointer walkers do (a [`frame_marker::KERNEL_ENTRY`], then the
//! interrupted instruction's own address) and goes on in the interrupted context: kernel
//! code with the table, a user program's stack by the program's own CFI where it was given
//! (`user=`, [`super::UserTables`]: its code at the pc is the program's), else by its frame
//! pointers alone, with no stack switch (the user-context rule of [`crate::walk_guest`]).
//! A user-mode sample is walked the same way in a given program. A CFI signal frame (entry code
//! annotated with `.cfi_signal_frame`, as Linux's x86 entry code was before ORC) is crossed
//! the same way: the marker, then the interrupted instruction, looked up as it is.
//!
//! Guards, whatever the tables say: every step must raise the stack pointer (a frame that
//! keeps its return address in a register may keep it once, in the innermost frame), and
//! stays within the stack's span; only a rule that reads the stack pointer from memory
//! (ORC: Linux's switch off an interrupt stack; CFI: an interrupt frame's saved stack
//! pointer) may leave the stack, at most
//! `crossings.stack_switches` times, after a [`frame_marker::STACK_SWITCH`]; at most four
//! kernel entries; at most `max_depth` frames. Reads stay on the stack being walked but for
//! what the kernel saved itself there: an interrupt stack's saved stack pointer, after which
//! the return address below it, and a `pt_regs`' registers.

use kern_profile_format::{frame_marker, Arch, StopReason, Walker};

use super::orc::{OrcEntry, OrcKind};
use super::{CfiRow, UnwindTables};
use crate::cross::{fake_return, span_end, Frames};
use crate::stubs;
use crate::{walk_guest, Crossings, PtrWidth, Walk};

/// The registers a walk starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// The return-address register (riscv64 `ra`, aarch64 `x30`), where there is one.
    pub ra: Option<u64>,
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
    /// Where this stack's span ends (`span_end(stack_span, where its walk began)`): nothing
    /// at or beyond it is read.
    end: u64,
    /// The callee's stack pointer and frame pointer, when its step read the frame record
    /// its frame pointer points to. Where no table covers this frame, the frame-pointer walk
    /// takes over at that record, not after it: its crossings read the record's
    /// surroundings (i386 Linux's SYSENTER registers lie right above `do_SYSENTER_32`'s
    /// record, whose CFI step returns into entry code with no CFI).
    record_at_fp: Option<(u64, u64)>,
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
        /// The frame was an interrupt's (CFI's signal frame): the caller is the interrupted
        /// context, marked as a kernel entry.
        entry: bool,
        /// The callee's stack and frame pointers, when the step read a frame record at that
        /// frame pointer (see [`State::record_at_fp`]).
        record_at_fp: Option<(u64, u64)>,
    },
    /// The interrupted context behind entry code.
    Entry {
        ip: u64,
        sp: u64,
        fp: u64,
        /// The return-address register, where the entry code saved it.
        ra: Option<u64>,
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

#[inline(always)]
fn rule_at(tables: &UnwindTables, addr: u64) -> Option<FrameRule> {
    if let Some(e) = tables.orc.as_ref().and_then(|t| t.find(addr)) {
        if e.kind != OrcKind::Undefined {
            return Some(FrameRule::Orc(e));
        }
    }
    tables.cfi.as_ref()?.find(addr).map(FrameRule::Cfi)
}

/// Walks the stack from `start` with `tables`, storing return addresses (and markers) into
/// `out` as [`crate::walk_guest`] does. `None` when no table covers the start pc (of user
/// mode: no `user=` program's): the frame-pointer walk is the one to use then.
pub fn walk_tables<R>(
    tables: &UnwindTables,
    start: StartRegs,
    max_depth: usize,
    crossings: Crossings,
    read: R,
    out: &mut [u64],
) -> Option<Walk>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    walk(tables, start, max_depth, crossings, read, None, out)
}

/// [`walk_tables`] from a sample, whose system registers `sysregs(reg)` reads (`None`: not
/// readable): where the sampled pc is in an entry stub that has not saved the interrupted
/// context yet, they give it ([`stubs::Loc::Sys`]). Called only then, at most once a
/// register: a sample elsewhere reads none.
pub fn walk_tables_at_sample<R, S>(
    tables: &UnwindTables,
    start: StartRegs,
    max_depth: usize,
    crossings: Crossings,
    read: R,
    mut sysregs: S,
    out: &mut [u64],
) -> Option<Walk>
where
    R: FnMut(u64, &mut [u8]) -> bool,
    S: FnMut(stubs::SysReg) -> Option<u64>,
{
    walk(
        tables,
        start,
        max_depth,
        crossings,
        read,
        Some(&mut sysregs),
        out,
    )
}

fn walk<R>(
    tables: &UnwindTables,
    start: StartRegs,
    max_depth: usize,
    crossings: Crossings,
    mut read: R,
    mut sysregs: Option<stubs::SysRegs<'_>>,
    out: &mut [u64],
) -> Option<Walk>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    // A user-mode sample is walked here only in a `user=` program; a kernel one where the
    // tables cover its pc or it is in an entry stub whose layout is known.
    let mut in_program = crossings.user_mode;
    let mut first = match in_program {
        true => Some(user_rule(tables, start.pc, &mut read)?),
        false => rule_at(tables, start.pc),
    };
    // The stub's layouts at the start pc, looked up once: the first step crosses by them.
    let mut first_stub = None;
    if first.is_none() {
        let found = tables.stubs.find(start.pc)?;
        // Layouts that need the registers, with none to read: as if there were none.
        if sysregs.is_none() && registers_only(found) {
            return None;
        }
        first_stub = Some(found);
    }
    let arch = tables.arch;
    let width = PtrWidth::from_bytes(arch.ptr_width() as usize).unwrap_or(PtrWidth::W8);
    let cfi_arch = cfi_step::CfiArch::new(arch);
    let mut frames = Frames::new(out, max_depth);
    let mut st = State {
        pc: start.pc,
        sp: start.sp,
        fp: start.fp,
        ra: start.ra,
        exact: true,
        regs: None,
        prev_full: None,
        end: span_end(crossings.stack_span, start.sp),
        record_at_fp: None,
    };
    let (mut switches, mut entries) = (0u8, 0u8);
    // The rule that found the last frame, and whether the walk went on into a user program.
    let mut walker = Walker::Cfi;
    let mut from_user = false;
    let stop = loop {
        if frames.full() {
            break StopReason::DepthLimit;
        }
        let probe = if st.exact {
            st.pc
        } else {
            st.pc.wrapping_sub(1)
        };
        // The first step's stub, where the walk starts in one (`None` past it): no rule there.
        let known = first_stub.take();
        let rule = match known {
            Some(_) => None,
            None => first.take().or_else(|| match in_program {
                true => user_rule(tables, probe, &mut read),
                false => rule_at(tables, probe),
            }),
        };
        let mut stack = Stack {
            width,
            low: st.sp,
            end: st.end,
            read: &mut read,
        };
        let step = match rule {
            Some(FrameRule::Orc(e)) if arch == Arch::X86_64 => {
                walker = Walker::Orc;
                orc_step::orc_step(e, &st, &mut stack)
            }
            Some(FrameRule::Cfi(row)) => {
                walker = Walker::Cfi;
                cfi_step::cfi_step(&cfi_arch, row, &st, &mut stack)
            }
            // A program's code its table does not cover: its frame pointers.
            _ if in_program => Step::HandOver,
            // A pc no table covers: an entry stub's crossing, or the frame-pointer walk.
            // The sample's registers are the entry's only at its own pc (the first step).
            _ => {
                let sys = match known {
                    Some(_) => sysregs.take(),
                    None => None,
                };
                let found = known.or_else(|| tables.stubs.find(st.pc));
                stub_step(tables, found, &st, width, crossings, &mut read, sys)
            }
        };
        match step {
            Step::Stop(reason) => break reason,
            // Nothing walked yet: the caller's frame-pointer walk, which knows where the
            // sampled function's return address is before its frame record is made.
            Step::HandOver if known.is_some() => return None,
            Step::HandOver => {
                let go_on = Crossings {
                    user_mode: in_program,
                    ..crossings
                };
                let (sp, fp) = match st.record_at_fp.filter(|_| !in_program) {
                    Some(record) => {
                        // The walk reads the record again, and pushes its return address.
                        frames.pop();
                        record
                    }
                    None => (st.sp, st.fp),
                };
                let rest = frames.rest();
                let depth = rest.len();
                let w = walk_guest(arch, sp, fp, depth, go_on, &mut read, rest);
                frames.advance(w.frames);
                (walker, from_user) = (
                    w.walker,
                    w.from_user || (in_program && !crossings.user_mode),
                );
                break w.stop;
            }
            Step::Call {
                ret,
                sp,
                fp,
                exact,
                may_switch,
                from_register,
                entry,
                record_at_fp,
            } => {
                let upwards = sp > st.sp || (sp == st.sp && from_register && st.ra.is_some());
                let mut end = st.end;
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
                    end = span_end(crossings.stack_span, sp);
                }
                if ret == 0 || fake_return(ret, width) {
                    break StopReason::NullReturnAddress;
                }
                // A program's signal frame is no kernel entry: its return address is the
                // interrupted instruction, in the same program.
                if entry && !in_program {
                    entries += 1;
                    if entries > MAX_ENTRIES {
                        break StopReason::NotIncreasing;
                    }
                    if !frames.push(frame_marker::KERNEL_ENTRY) {
                        break StopReason::DepthLimit;
                    }
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
                    end,
                    // A step onto another stack leaves the record's stack behind.
                    record_at_fp: record_at_fp.filter(|_| end == st.end),
                };
            }
            Step::Entry {
                ip,
                sp,
                fp,
                ra,
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
                let found = match user {
                    true => user_rule(tables, ip, &mut read),
                    false => None,
                };
                if let Some(rule) = found {
                    // The program's own table, from the interrupted instruction.
                    (in_program, walker, from_user) = (true, Walker::Cfi, true);
                    first = Some(rule);
                    st = State {
                        pc: ip,
                        sp,
                        fp,
                        ra,
                        exact: true,
                        regs: None,
                        prev_full: None,
                        end: span_end(crossings.stack_span, sp),
                        record_at_fp: None,
                    };
                    continue;
                }
                if user {
                    // The program's stack by its frame pointers (its architecture's records), and nothing below it.
                    let in_user = Crossings {
                        user_mode: true,
                        ..crossings
                    };
                    let rest = frames.rest();
                    let depth = rest.len();
                    let w = walk_guest(arch, sp, fp, depth, in_user, &mut read, rest);
                    frames.advance(w.frames);
                    (walker, from_user) = (w.walker, true);
                    break w.stop;
                }
                st = State {
                    pc: ip,
                    sp,
                    fp,
                    ra,
                    exact: true,
                    regs: Some(regs),
                    prev_full,
                    end: span_end(crossings.stack_span, sp),
                    record_at_fp: None,
                };
            }
        }
    };
    Some(Walk {
        frames: frames.n,
        stop,
        walker,
        from_user,
    })
}

/// The rule at `addr` of the `user=` program whose code is there, looked up for each frame:
/// programs linked at one address may share a function there and differ in its callers.
#[inline]
fn user_rule<R>(tables: &UnwindTables, addr: u64, read: &mut R) -> Option<FrameRule>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    tables.user.find(addr, read).map(FrameRule::Cfi)
}

/// At a pc no table covers: an entry stub's crossing into the interrupted context, when the
/// stub's instructions say where the CPU's frame is ([`crate::stubs`]) and the frame there
/// is one the CPU could have pushed; a cut when it is not. Elsewhere the frame-pointer walk
/// goes on.
fn stub_step<R>(
    tables: &UnwindTables,
    found: Option<stubs::StubAt>,
    st: &State,
    width: PtrWidth,
    crossings: Crossings,
    read: &mut R,
    sysregs: Option<stubs::SysRegs<'_>>,
) -> Step
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let at = stubs::AtStub {
        sp: st.sp,
        fp: st.fp,
        ra: st.ra,
        end: st.end,
    };
    let crossed = match (tables.arch, found) {
        (Arch::I386 | Arch::X86_64, Some(stubs::StubAt::X86(layout))) => {
            let cs = crossings.kernel_cs;
            stubs::cross_x86(&tables.stubs, layout, at, width, cs, read)
        }
        (Arch::I386 | Arch::X86_64, _) | (_, None | Some(stubs::StubAt::X86(_))) => {
            return Step::HandOver;
        }
        // Past the first frame, layouts that need the registers are none (as before they
        // were read).
        (_, Some(found)) if sysregs.is_none() && registers_only(found) => return Step::HandOver,
        (arch, Some(stubs::StubAt::Risc(layouts))) => {
            stubs::cross_risc(&tables.stubs, arch, layouts, at, read, sysregs)
        }
    };
    // No frame the CPU could have pushed, under a frame pointer into the stack being
    // walked: code with no table that makes frame records (a stub that makes one as well;
    // i386 Linux's `__switch_to_asm`, its string functions, which are no entry). The
    // frame-pointer walk follows them, as before stubs were read.
    if crossed.is_err() && (st.sp..st.end).contains(&st.fp) {
        return Step::HandOver;
    }
    match crossed {
        Ok(i) => Step::Entry {
            ip: i.ip,
            sp: i.sp,
            fp: i.fp,
            ra: i.ra,
            user: i.user,
            regs: SavedRegs {
                at: i.at,
                full: false,
            },
            prev_full: None,
        },
        Err(_) => Step::Stop(StopReason::EntryNotCrossed),
    }
}

/// Whether every layout `found` holds reads the registers at the sample.
fn registers_only(found: stubs::StubAt<'_>) -> bool {
    match found {
        stubs::StubAt::Risc(l) => l.iter().all(|(_, l)| l.needs_registers()),
        stubs::StubAt::X86(_) => false,
    }
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
    #[inline]
    fn holds(&self, addr: u64, len: u64) -> bool {
        addr >= self.low && addr.checked_add(len).is_some_and(|e| e <= self.end)
    }

    /// The word at `addr`, if it is on the stack and readable.
    #[inline]
    fn word(&mut self, addr: u64) -> Option<u64> {
        let w = self.width.bytes();
        self.holds(addr, w as u64).then_some(())?;
        self.any_word(addr)
    }

    /// The two words at `addr`, if they are on the stack and readable (one read: a frame
    /// record).
    #[inline]
    fn pair(&mut self, addr: u64) -> Option<(u64, u64)> {
        let w = self.width.bytes();
        self.holds(addr, 2 * w as u64).then_some(())?;
        let mut b = [0u8; 16];
        (self.read)(addr, &mut b[..2 * w]).then(|| (self.width.word(&b), self.width.word(&b[w..])))
    }

    /// The word at `addr` wherever it lies (one read: a pointer the kernel saved itself).
    #[inline]
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

mod cfi_step;
mod orc_step;

#[cfg(test)]
mod tests;
