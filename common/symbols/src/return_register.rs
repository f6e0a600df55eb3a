//! The leaf and prologue correction of riscv64 and aarch64 samples.
//!
//! The plugin walks the frame-pointer chain from the registers at the entry of the block it
//! samples in. A function without a frame record of its own there (a leaf, a prologue before
//! the record is made, an epilogue after it is taken down) runs with its caller's frame
//! pointer, so the walk starts at the caller's caller; the caller is then only in the
//! return-address register (`ra` / `x30`), which the plugin records with each sample. It goes
//! in as the first return address when:
//!
//! 1. the function has no record of its own where the block started, as the ELF's call-frame
//!    information says (`.debug_frame` / `.eh_frame`), or, for code it does not cover,
//!    prologue analysis (unwind's `FunctionCode::facts_at`). QEMU starts a block after a
//!    control transfer or at a jump target, so every place the block holding the PC may have
//!    started at is asked (`FunctionCode::block_starts`). When they disagree (a loop head
//!    right after the prologue, a shared `ret` that a shrink-wrapped early exit jumps to),
//!    the registers decide. A return address outside the function means it has made no call
//!    since its entry (or has reloaded its own return address): then the walk starts with
//!    that same address exactly when the function's record is up. One inside it means the
//!    function has called, so it is past its prologue: its record is up where a possible
//!    start says so;
//! 2. the register holds a return address: the instruction before it is a call.
//!
//! [`Corrections`] counts what was inserted, how it was decided, and the callers lost.

use std::rc::Rc;

use kern_profile_format::Arch;
use kern_profile_unwind::code::{call_before, FunctionCode, CALL_LOOKBEHIND};
use kern_profile_unwind::frame_state::{FrameState, Phase};
use rustc_hash::FxHashMap;

use super::Symbolizer;

/// What decided a function's frame state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    CallFrameInfo = 0,
    PrologueAnalysis = 1,
}

/// What the correction did over a run's samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Corrections {
    /// Samples with a recorded return-address register, in a function of a known ELF.
    pub checked: u64,
    /// Return addresses inserted, by [`Source`] and by [`Phase`] (in `Phase::ALL` order).
    pub inserted: [[u64; 3]; 2],
    /// Of those, decided by the registers where the block's start was ambiguous.
    pub by_registers: u64,
    /// The walk missed the caller, but the register no longer held it (saved, then
    /// overwritten by a call).
    pub lost_overwritten: u64,
    /// The walk missed the caller, but the register held no return address.
    pub lost_not_return: u64,
}

impl Corrections {
    pub fn add(&mut self, o: &Corrections) {
        self.checked += o.checked;
        for (a, b) in self.inserted.iter_mut().zip(&o.inserted) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        self.by_registers += o.by_registers;
        self.lost_overwritten += o.lost_overwritten;
        self.lost_not_return += o.lost_not_return;
    }

    /// Return addresses inserted in all.
    pub fn inserted_total(&self) -> u64 {
        self.inserted.iter().flatten().sum()
    }

    /// The text report's line; `None` when no sample had a return-address register.
    pub fn describe(&self) -> Option<String> {
        if self.checked == 0 {
            return None;
        }
        let by_phase: Vec<String> = Phase::ALL
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{} {}", p.name(), self.inserted[0][i] + self.inserted[1][i]))
            .collect();
        let by_source = |s: Source| self.inserted[s as usize].iter().sum::<u64>();
        Some(format!(
            "leaf and prologue correction: {} of {} samples took their caller from the \
             return-address register ({}; by call-frame information {}, by prologue analysis \
             {}, by the registers where the block's start was ambiguous {}); callers lost: {} \
             (register overwritten), {} (no return address in it)",
            self.inserted_total(),
            self.checked,
            by_phase.join(", "),
            by_source(Source::CallFrameInfo),
            by_source(Source::PrologueAnalysis),
            self.by_registers,
            self.lost_overwritten,
            self.lost_not_return
        ))
    }
}

/// The correction's caches and counts, one per symbolizer.
#[derive(Default)]
pub(super) struct ReturnRegisterFix {
    plans: FxHashMap<u64, Plan>,
    /// Function start → its decoded code (`None`: not decodable).
    functions: FxHashMap<u64, Option<Rc<FunctionCode>>>,
    /// Address → whether a call ends there.
    returns: FxHashMap<u64, bool>,
    pub(super) counts: Corrections,
}

/// What the code says at one PC, before the registers are seen.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// Not in a known function of a riscv64 or aarch64 ELF.
    Unknown,
    /// The same state wherever the block started.
    Known {
        func: (u64, u64),
        state: FrameState,
        source: Source,
    },
    /// The places disagree: `missing` is a state where the walk misses the caller; `called`
    /// is what holds once the function has made a call (its record is up if any place says
    /// so).
    Ambiguous {
        func: (u64, u64),
        missing: (FrameState, Source),
        called: (FrameState, Source),
    },
}

impl Symbolizer {
    /// Whether `ra`, the return-address register recorded with a sample at `pc` whose walk
    /// starts with `first`, is the caller the walk misses (see the module doc); counts it.
    pub fn caller_in_register(&mut self, pc: u64, ra: u64, first: Option<u64>) -> bool {
        let (func, (state, source), by_registers) = match self.ra_plan(pc) {
            Plan::Unknown => return false,
            Plan::Known {
                func,
                state,
                source,
            } => (func, (state, source), false),
            Plan::Ambiguous {
                func,
                missing,
                called,
            } => {
                if !contains(func, ra.wrapping_sub(1)) && self.is_return_address(ra) {
                    let state = if first == Some(ra) {
                        FrameState::Framed
                    } else {
                        missing.0
                    };
                    (func, (state, missing.1), true)
                } else {
                    (func, called, false)
                }
            }
        };
        let counts = &mut self.ra_fix.counts;
        counts.checked += 1;
        let phase = match state {
            FrameState::Framed => return false,
            FrameState::InRegister(p) => p,
            // Saved, but no call yet: the register still holds it.
            FrameState::Saved if !contains(func, ra.wrapping_sub(1)) => Phase::Prologue,
            FrameState::Saved => {
                counts.lost_overwritten += 1;
                return false;
            }
        };
        if !self.is_return_address(ra) {
            self.ra_fix.counts.lost_not_return += 1;
            return false;
        }
        let counts = &mut self.ra_fix.counts;
        let p = Phase::ALL.iter().position(|&x| x == phase).unwrap_or(0);
        counts.inserted[source as usize][p] += 1;
        counts.by_registers += by_registers as u64;
        true
    }

    /// What the correction did so far, the user programs' included.
    pub fn corrections(&self) -> Corrections {
        let mut c = self.ra_fix.counts.clone();
        for u in &self.users {
            c.add(&u.sym.corrections());
        }
        c
    }

    fn ra_plan(&mut self, pc: u64) -> Plan {
        if let Some(p) = self.ra_fix.plans.get(&pc) {
            return *p;
        }
        let p = self.make_plan(pc).unwrap_or(Plan::Unknown);
        self.ra_fix.plans.insert(pc, p);
        p
    }

    fn make_plan(&mut self, pc: u64) -> Option<Plan> {
        let elf = self.elf.as_ref()?;
        let arch = elf.arch?;
        let sym = elf.symbols.lookup(pc)?;
        let func = (sym.start, sym.end);
        let code = self.function_code(arch, func)?;
        let elf = self.elf.as_ref()?;
        let states: Vec<(FrameState, Source)> = code
            .block_starts(pc)
            .into_iter()
            .map(|at| match elf.cfi.as_ref().and_then(|c| c.facts_at(at)) {
                Some(f) => (FrameState::from_facts(f), Source::CallFrameInfo),
                None => (
                    FrameState::from_facts(code.facts_at(at)),
                    Source::PrologueAnalysis,
                ),
            })
            .collect();
        let last = *states.last()?;
        if states.iter().all(|s| s.0 == last.0) {
            return Some(Plan::Known {
                func,
                state: last.0,
                source: states[0].1,
            });
        }
        let find = |want: fn(FrameState) -> bool| states.iter().copied().find(|s| want(s.0));
        let missing = find(FrameState::misses_caller).unwrap_or(last);
        let called = find(|s| s == FrameState::Framed)
            .or_else(|| find(|s| s == FrameState::Saved))
            .unwrap_or(missing);
        Some(Plan::Ambiguous {
            func,
            missing,
            called,
        })
    }

    fn function_code(&mut self, arch: Arch, (start, end): (u64, u64)) -> Option<Rc<FunctionCode>> {
        if let Some(c) = self.ra_fix.functions.get(&start) {
            return c.clone();
        }
        let elf = self.elf.as_ref()?;
        let len = usize::try_from(end.saturating_sub(start)).ok()?;
        let code = elf
            .code_at(start, len)
            .and_then(|bytes| FunctionCode::new(arch, start, bytes))
            .map(Rc::new);
        self.ra_fix.functions.insert(start, code.clone());
        code
    }

    /// Whether a call instruction of the ELF's code ends at `addr`.
    fn is_return_address(&mut self, addr: u64) -> bool {
        if let Some(&r) = self.ra_fix.returns.get(&addr) {
            return r;
        }
        let r = self.elf.as_ref().is_some_and(|elf| {
            let Some(arch) = elf.arch else { return false };
            // The most bytes before `addr` that one section holds.
            let before = [CALL_LOOKBEHIND, 4, 2].into_iter().find_map(|n| {
                let at = addr.checked_sub(n as u64)?;
                elf.code_at(at, n).filter(|b| b.len() == n)
            });
            before.is_some_and(|b| call_before(arch, b, addr).is_some())
        });
        self.ra_fix.returns.insert(addr, r);
        r
    }
}

/// Whether `probe` (a return address minus one: its call) lies in the function.
fn contains((start, end): (u64, u64), probe: u64) -> bool {
    (start..end).contains(&probe)
}
