//! The entry stubs of riscv64 and aarch64, read as a machine that follows where the
//! interrupted context's registers go: a trap pushes nothing on these architectures, it
//! leaves the interrupted pc in a system register (`sepc`, `ELR_EL1`), and the stub saves
//! what it will clobber (the pc, the stack pointer, the frame pointer, the return address)
//! where it chooses. Each architecture's decoder (`riscv64.rs`, `aarch64.rs`) turns an
//! instruction into a few [`Op`]s; this follows them from the stub's first instruction, on
//! every path of its conditional branches (a stub tests the mode or the cause), and says at
//! each instruction and at each call's return address where those four values are
//! ([`RiscLayout`]). At most [`MAX_INSNS`] instructions, [`MAX_PATHS`] paths and
//! [`MAX_SLOTS`] saved words per stub.

use super::{Loc, Mode, RiscLayout, SysReg};

/// Instructions followed per stub (all paths together), at most.
pub(crate) const MAX_INSNS: usize = 256;
/// Paths (a conditional branch starts one) per stub, at most.
pub(crate) const MAX_PATHS: usize = 8;
/// Saved words followed per path, at most.
const MAX_SLOTS: usize = 64;

/// A system register the stubs read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sys {
    /// The interrupted pc: `sepc`, `ELR_EL1`.
    Pc,
    /// The interrupted mode: `sstatus`, `SPSR_EL1`.
    Status,
    /// riscv64 `sscratch`: the kernel's pointer while user code runs (its stack, a trap
    /// frame), 0 or anything in the kernel.
    Scratch,
    /// aarch64 `SP_EL0`: the user stack pointer while the kernel runs on `SP_EL1`.
    UserSp,
    /// Any other.
    Other,
}

/// One effect of an instruction on the registers and the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `rd = rs + add`.
    Add { rd: u8, rs: u8, add: i64 },
    /// `rd` holds something not followed.
    Clobber(u8),
    /// The word at `base + off` (8 bytes) is `src`'s value.
    Store { base: u8, off: i64, src: u8 },
    /// A store of another width at `base + off`: the words it touches are forgotten.
    StoreOther { base: u8, off: i64 },
    /// `rd` = the word at `base + off`.
    Load { rd: u8, base: u8, off: i64 },
    /// `rd = sys; sys = rs` at once (either may be absent: riscv's `csrrw`, `csrr`, `csrw`;
    /// aarch64's `mrs`, `msr`).
    Sys {
        sys: Sys,
        rd: Option<u8>,
        rs: Option<u8>,
    },
    /// A call: the instruction after it is its return address.
    Call,
    /// An unconditional jump.
    Jump(u64),
    /// A conditional branch: both ways are followed.
    Branch(u64),
    /// The path ends (a return, an indirect jump, an instruction not understood).
    End,
    /// A return from a trap (`sret`, `eret`): the path ends, in an entry stub.
    TrapReturn,
}

/// One instruction: its length and effects (in order).
pub(crate) struct Insn {
    pub len: u64,
    pub ops: Vec<Op>,
}

/// What one architecture's stubs need beyond their instructions.
pub(crate) struct Abi {
    /// Register numbers of the stack pointer, frame pointer and return address.
    pub sp: u8,
    pub fp: u8,
    pub ra: u8,
    /// A register that reads as zero (riscv `x0`), if any.
    pub zero: Option<u8>,
    /// The registers a call keeps (callee-saved), besides the stack pointer.
    pub kept: &'static [u8],
}

/// What a register or a saved word holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    Unknown,
    /// The interrupted context's register `reg`, plus `add`.
    Orig {
        reg: u8,
        add: i64,
    },
    /// A system register's value at the entry.
    Sys(Sys),
    /// A pointer the stub made up (loaded an address, swapped `sscratch` in), plus `add`.
    Base {
        id: u8,
        add: i64,
    },
}

impl Val {
    /// The pointer's base and offset, where it is one.
    fn pointer(self) -> Option<(Val, i64)> {
        match self {
            Val::Orig { reg, add } => Some((Val::Orig { reg, add: 0 }, add)),
            Val::Base { id, add } => Some((Val::Base { id, add: 0 }, add)),
            _ => None,
        }
    }

    fn plus(self, d: i64) -> Val {
        match self {
            Val::Orig { reg, add } => Val::Orig {
                reg,
                add: add.wrapping_add(d),
            },
            Val::Base { id, add } => Val::Base {
                id,
                add: add.wrapping_add(d),
            },
            Val::Sys(_) | Val::Unknown if d == 0 => self,
            _ => Val::Unknown,
        }
    }
}

/// The machine on one path.
#[derive(Clone)]
struct State {
    regs: [Val; 32],
    /// `sscratch` / `SP_EL0` as the stub left them.
    scratch: Val,
    user_sp: Val,
    /// Saved words: (the pointer's base, offset from it, value).
    slots: Vec<(Val, i64, Val)>,
    /// The next made-up base.
    next_base: u8,
    /// The system registers still hold what the trap or the stub left there: no call yet,
    /// and no write that may have re-enabled traps (of the mode register or any other
    /// not followed), after which a nested trap may have overwritten them.
    live: bool,
    /// The trap's pc register is not written yet.
    pc_kept: bool,
}

/// How a stub was entered: riscv64 keeps the interrupted stack pointer whatever the mode
/// (`Mode` unknown: the interrupted pc says), aarch64 switches to `SP_EL1` from EL0 and
/// leaves the user's in `SP_EL0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub mode: Option<Mode>,
    /// The stack pointer is a new one (the user's is in `SP_EL0`).
    pub switched: bool,
}

impl State {
    fn new(abi: &Abi, entry: Entry) -> State {
        let mut regs = [Val::Unknown; 32];
        for (r, v) in regs.iter_mut().enumerate() {
            *v = Val::Orig {
                reg: r as u8,
                add: 0,
            };
        }
        let orig_sp = Val::Orig {
            reg: abi.sp,
            add: 0,
        };
        let mut st = State {
            regs,
            scratch: Val::Base { id: 0, add: 0 },
            user_sp: Val::Unknown,
            slots: Vec::new(),
            next_base: 1,
            live: true,
            pc_kept: true,
        };
        if entry.switched {
            st.regs[abi.sp as usize] = st.fresh();
            st.user_sp = orig_sp;
        }
        st
    }

    fn fresh(&mut self) -> Val {
        let id = self.next_base;
        self.next_base = self.next_base.wrapping_add(1);
        Val::Base { id, add: 0 }
    }

    fn get(&self, abi: &Abi, r: u8) -> Val {
        match abi.zero {
            Some(z) if z == r => Val::Unknown,
            _ => self.regs.get(r as usize).copied().unwrap_or(Val::Unknown),
        }
    }

    fn set(&mut self, abi: &Abi, r: u8, v: Val) {
        if abi.zero == Some(r) {
            return;
        }
        let v = match (r == abi.sp, v) {
            // The stack pointer loaded with what is not followed: a new base, so that what
            // the stub saves from there is still found.
            (true, Val::Unknown | Val::Sys(_)) => self.fresh(),
            _ => v,
        };
        if r == abi.sp {
            // Words below the new stack pointer on its own stack are gone.
            if let Some((base, add)) = v.pointer() {
                self.slots.retain(|&(b, o, _)| b != base || o >= add);
            }
        }
        if let Some(slot) = self.regs.get_mut(r as usize) {
            *slot = v;
        }
    }

    /// The saved word at the address `base + off` is, or is no longer (`None`), `v`.
    fn store(&mut self, abi: &Abi, base: u8, off: i64, v: Option<Val>) {
        let Some((b, add)) = self.get(abi, base).pointer() else {
            // A store through a pointer not followed may hit a saved word: none is lost in
            // practice (stubs save through the stack pointer), and none is believed wrongly
            // either, as the crossing checks what it reads.
            return;
        };
        let at = add.wrapping_add(off);
        self.slots
            .retain(|&(sb, so, _)| sb != b || so.abs_diff(at) >= 8);
        if let Some(v) = v.filter(|v| *v != Val::Unknown) {
            if self.slots.len() < MAX_SLOTS {
                self.slots.push((b, at, v));
            }
        }
    }

    fn load(&self, abi: &Abi, base: u8, off: i64) -> Val {
        let Some((b, add)) = self.get(abi, base).pointer() else {
            return Val::Unknown;
        };
        let at = add.wrapping_add(off);
        self.slots
            .iter()
            .find(|&&(sb, so, _)| sb == b && so == at)
            .map_or(Val::Unknown, |&(_, _, v)| v)
    }

    /// Where `want` is, seen from the stack pointer: in its own register (`reg`), as the
    /// stack pointer plus a constant (the interrupted stack pointer alone), in a saved word.
    fn find(&self, abi: &Abi, want: Val, reg: Option<u8>) -> Loc {
        if let Some(r) = reg {
            if self.get(abi, r) == want {
                return Loc::Reg;
            }
        }
        let sp = self.get(abi, abi.sp);
        let Some((base, sp_add)) = sp.pointer() else {
            return Loc::Lost;
        };
        // A saved word first (the first the stub saved): a stub that saves the interrupted
        // stack pointer on every path then reads the same on all.
        let mut best: Option<Loc> = None;
        for &(b, off, v) in &self.slots {
            if b != base || off < sp_add {
                continue;
            }
            let add = match (want, v) {
                (Val::Orig { reg: w, add: 0 }, Val::Orig { reg, add }) if w == reg => {
                    add.wrapping_neg()
                }
                _ if v == want => 0,
                _ => continue,
            };
            let slot = Loc::Slot {
                off: off.wrapping_sub(sp_add),
                add,
            };
            if best.is_none() {
                best = Some(slot);
            }
        }
        // Else the interrupted stack pointer as `sp + k`.
        if let (None, Val::Orig { reg: w, add: 0 }, Val::Orig { reg, add }) = (best, want, sp) {
            if w == abi.sp && reg == abi.sp {
                return Loc::SpPlus(add.wrapping_neg());
            }
        }
        best.unwrap_or(Loc::Lost)
    }

    fn layout(&self, abi: &Abi, entry: Entry) -> Option<RiscLayout> {
        let orig = |reg| Val::Orig { reg, add: 0 };
        let l = RiscLayout {
            pc: self.find(abi, Val::Sys(Sys::Pc), None),
            sp: self.find(abi, orig(abi.sp), None),
            fp: self.find(abi, orig(abi.fp), Some(abi.fp)),
            ra: self.find(abi, orig(abi.ra), Some(abi.ra)),
            status: self.find(abi, Val::Sys(Sys::Status), None),
            mode: entry.mode,
        };
        // A crossing needs the pc and the stack pointer: the rest may be lost.
        if l.pc != Loc::Lost && l.sp != Loc::Lost {
            return Some(l);
        }
        // Else, while the system registers still hold the entry's values, the layout that
        // reads them at the sample (the stub's first instructions, before it saved the pc;
        // from EL0, the user's stack pointer left in SP_EL0). The mode is then read as well,
        // to check the pc against.
        if !self.live {
            return None;
        }
        let or_sys = |loc: Loc, sys: SysReg, kept: bool| match (loc, kept) {
            (Loc::Lost, true) => Loc::Sys(sys),
            _ => loc,
        };
        let sp = match l.sp {
            Loc::Lost if self.scratch == orig(abi.sp) => Loc::Sys(SysReg::Scratch),
            Loc::Lost if self.user_sp == orig(abi.sp) => Loc::Sys(SysReg::UserSp),
            sp => sp,
        };
        let l = RiscLayout {
            pc: or_sys(l.pc, SysReg::TrapPc, self.pc_kept),
            sp,
            status: or_sys(l.status, SysReg::Status, true),
            ..l
        };
        (l.pc != Loc::Lost && l.sp != Loc::Lost).then_some(l)
    }

    fn apply(&mut self, abi: &Abi, op: Op) {
        match op {
            Op::Add { rd, rs, add } => {
                let v = self.get(abi, rs).plus(add);
                self.set(abi, rd, v);
            }
            Op::Clobber(rd) => self.set(abi, rd, Val::Unknown),
            Op::Store { base, off, src } => {
                let v = self.get(abi, src);
                self.store(abi, base, off, Some(v));
            }
            Op::StoreOther { base, off } => self.store(abi, base, off, None),
            Op::Load { rd, base, off } => {
                let v = self.load(abi, base, off);
                self.set(abi, rd, v);
            }
            Op::Sys { sys, rd, rs } => {
                let new = rs.map(|r| self.get(abi, r));
                let old = match sys {
                    Sys::Scratch => self.scratch,
                    Sys::UserSp => self.user_sp,
                    Sys::Pc | Sys::Status => Val::Sys(sys),
                    Sys::Other => Val::Unknown,
                };
                if let Some(v) = new {
                    match sys {
                        Sys::Scratch => self.scratch = v,
                        Sys::UserSp => self.user_sp = v,
                        // The pc or mode written: the entry's values are no longer there.
                        Sys::Pc => self.pc_kept = false,
                        // The mode, or a register not followed (`sie`, DAIF), may have
                        // re-enabled traps: a nested one would overwrite them all.
                        Sys::Status | Sys::Other => self.live = false,
                    }
                }
                if let Some(rd) = rd {
                    self.set(abi, rd, old);
                }
            }
            Op::Call | Op::Jump(_) | Op::Branch(_) | Op::End | Op::TrapReturn => {}
        }
    }

    /// After a call: what the callee may change is unknown, the system registers included.
    fn called(&mut self, abi: &Abi) {
        self.live = false;
        for r in 0..32u8 {
            if r != abi.sp && !abi.kept.contains(&r) {
                self.regs[r as usize] = Val::Unknown;
            }
        }
    }
}

/// Whether an instruction's `op` is what only a trap entry does: read the interrupted pc,
/// swap `sscratch` with a register, return from the trap.
fn entry_evidence(op: Op) -> bool {
    matches!(
        op,
        Op::Sys {
            sys: Sys::Pc,
            rd: Some(_),
            ..
        } | Op::Sys {
            sys: Sys::Scratch,
            rd: Some(_),
            rs: Some(_),
        } | Op::TrapReturn
    )
}

/// Follows the stub at `start` entered as `entry`, decoding with `decode(addr)`, and hands
/// `found(address, layout)` the layout at each of its instructions (before it runs) and at
/// the return address of each call (after it returned). The layouts that read the system
/// registers are handed over only when some path shows the code is a trap entry
/// ([`entry_evidence`]): at another function's first instruction, `sepc` is a stale trap's.
pub(crate) fn analyze<D, F>(abi: &Abi, entry: Entry, start: u64, mut decode: D, mut found: F)
where
    D: FnMut(u64) -> Option<Insn>,
    F: FnMut(u64, RiscLayout),
{
    let mut from_registers: Vec<(u64, RiscLayout)> = Vec::new();
    let mut is_entry = false;
    let mut put = |a: u64, l: RiscLayout| match l.needs_registers() {
        true => from_registers.push((a, l)),
        false => found(a, l),
    };
    let mut paths = vec![(start, State::new(abi, entry))];
    let (mut budget, mut started) = (MAX_INSNS, 1);
    while let Some((mut pc, mut st)) = paths.pop() {
        let mut called = false;
        while budget > 0 {
            budget -= 1;
            let Some(insn) = decode(pc) else { break };
            // A call's return address had its layout from the call.
            if !called {
                if let Some(l) = st.layout(abi, entry) {
                    put(pc, l);
                }
            }
            called = false;
            let next = pc.wrapping_add(insn.len);
            let mut to = Some(next);
            for op in insn.ops {
                is_entry |= entry_evidence(op);
                st.apply(abi, op);
                match op {
                    Op::Call => {
                        st.called(abi);
                        called = true;
                        if let Some(l) = st.layout(abi, entry) {
                            put(next, l);
                        }
                    }
                    Op::Jump(t) => to = Some(t),
                    // Past the paths' bound, the fall-through alone.
                    Op::Branch(t) if started < MAX_PATHS => {
                        started += 1;
                        paths.push((t, st.clone()));
                    }
                    Op::End | Op::TrapReturn => to = None,
                    _ => {}
                }
            }
            match to {
                Some(t) => pc = t,
                None => break,
            }
        }
    }
    if is_entry {
        for (a, l) in from_registers {
            found(a, l);
        }
    }
}
