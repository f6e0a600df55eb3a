//! What an x86 entry stub did to the stack before each of its calls, read from its
//! instructions (iced-x86), as a walk needs it to find the frame the CPU pushed at the entry.
//!
//! The walk from the stub's first instruction tracks the stack pointer against the one the
//! CPU left (`E`, where its frame begins): pushes, pops, `sub`/`add`/`lea` of constants, and
//! a register loaded with the stack pointer. `and sp, -16` (a stub aligning the stack for
//! the ABI) loses `E`'s distance; what the stub pushes afterwards of a register that held
//! `E + k` (the `mov eax, esp; and esp, -16; push eax` of a handler called with a pointer to
//! the saved registers) finds it again, by reading that slot. Unconditional jumps are
//! followed (a per-vector stub that jumps to common code); a conditional branch, a return or
//! an instruction that moves the stack pointer by an amount not known ends the walk. At most
//! [`MAX_INSNS`] instructions and [`MAX_JUMPS`] jumps per stub.
//!
//! A stack pointer loaded with a value not followed (`mov rsp, gs:[kernel_stack]`, `pop rsp`)
//! is a switch to another stack, as a `SYSCALL` entry makes: that instruction pushes nothing
//! and leaves the user's pc in rcx and flags in r11, and the stubs of Linux and of hobby
//! kernels (Redox's among them) switch to the kernel stack and push an interrupt-shaped
//! frame there, `ss, rsp, r11, cs, rcx`, to return by `iretq` or `sysretq`. The first five
//! words pushed on the new stack are taken for that frame; the crossing's check of the
//! frame (a ring-3 code selector, flags) decides whether it is one.

use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic,
    OpAccess, OpKind, Register,
};

use super::{FpAt, FrameAt, Layout};

/// Instructions read per stub, at most.
pub(crate) const MAX_INSNS: usize = 96;
/// Unconditional jumps followed per stub, at most.
pub(crate) const MAX_JUMPS: usize = 4;

/// Where the stack pointer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sp {
    /// `E + k`.
    Entry(i64),
    /// `A + k`, with `A` where an `and` aligned it or a load switched it (unknown against
    /// `E`).
    Aligned(i64),
}

/// Where the interrupted frame pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fp {
    Unchanged,
    /// Pushed at `E + k`.
    Entry(i64),
    /// Pushed at `A + k`, on the stack the stub switched to.
    Switched(i64),
    Lost,
}

/// What a general register holds, as far as the stub's stack is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    Unknown,
    /// `E + k`.
    Entry(i64),
}

struct State {
    sp: Sp,
    regs: [Val; 16],
    /// Words pushed since the last `and`: (`A + k` where it lies, `E + v` it holds).
    slots: Vec<(i64, i64)>,
    /// Whether `A` is where the stack pointer was switched to (a new stack's top), not
    /// where an `and` aligned it.
    switched: bool,
    /// Where the interrupted frame pointer is.
    fp: Fp,
    /// Where a push of the untouched frame pointer put it.
    fp_pushed: Option<Fp>,
}

/// The index (ax 0 to r15 15) of the general register `r` is part of.
fn gpr(r: Register) -> Option<usize> {
    let full = r.full_register();
    full.is_gpr64()
        .then(|| (full as usize).wrapping_sub(Register::RAX as usize))
        .filter(|&i| i < 16)
}

const SP: usize = 4;
const FP: usize = 5;

impl State {
    /// The layout here, for code of `width` bytes a word.
    fn layout(&self, width: i64) -> Option<Layout> {
        // The frame at `E` (`None`: at `A - 5 words`, the frame a switched stub pushed).
        let (frame, at_entry) = match self.sp {
            Sp::Entry(k) if k <= 0 => (FrameAt::Sp(k.unsigned_abs()), true),
            Sp::Entry(_) => return None,
            Sp::Aligned(a) => {
                // The newest push still on the stack of a value `E + v`.
                let saved = self
                    .slots
                    .iter()
                    .filter(|&&(s, _)| s >= a)
                    .min_by_key(|&&(s, _)| s);
                match saved {
                    Some(&(s, v)) => (
                        FrameAt::Saved {
                            slot: (s - a) as u64,
                            add: v.wrapping_neg() as u64,
                        },
                        true,
                    ),
                    None if self.switched && a <= -5 * width => {
                        (FrameAt::Sp((-a - 5 * width) as u64), false)
                    }
                    None => return None,
                }
            }
        };
        let fp = match (self.fp, at_entry) {
            (Fp::Unchanged, _) => FpAt::Unchanged,
            (Fp::Entry(k), true) => FpAt::Saved(k.unsigned_abs()),
            (Fp::Switched(k), false) if k < -5 * width => FpAt::Saved((-5 * width - k) as u64),
            _ => FpAt::Lost,
        };
        Some(Layout { frame, fp })
    }

    /// The register `r` written with something the walk does not follow.
    fn clobber(&mut self, r: usize) {
        self.regs[r] = Val::Unknown;
        if r == FP && self.fp == Fp::Unchanged {
            self.fp = self.fp_pushed.unwrap_or(Fp::Lost);
        }
    }

    /// Writes `v` into register `r`; into the stack pointer, a value not followed switches
    /// to a new stack.
    fn set(&mut self, r: usize, v: Val) {
        if r == SP {
            match v {
                Val::Entry(k) => {
                    self.sp = Sp::Entry(k);
                    self.slots.clear();
                }
                Val::Unknown => self.switch(),
            }
            return;
        }
        self.clobber(r);
        self.regs[r] = v;
    }

    /// The stack pointer loaded with a value not followed: the top of another stack.
    fn switch(&mut self) {
        self.sp = Sp::Aligned(0);
        self.slots.clear();
        self.switched = true;
        self.forget_switched_fp();
    }

    /// `A` moves: a frame pointer pushed relative to it is no longer found.
    fn forget_switched_fp(&mut self) {
        if matches!(self.fp, Fp::Switched(_)) {
            self.fp = Fp::Lost;
        }
        if matches!(self.fp_pushed, Some(Fp::Switched(_))) {
            self.fp_pushed = None;
        }
    }

    fn push(&mut self, width: i64, value: Option<usize>) {
        let first_fp = value == Some(FP) && self.fp == Fp::Unchanged && self.fp_pushed.is_none();
        self.sp = match self.sp {
            Sp::Entry(k) => {
                if first_fp {
                    self.fp_pushed = Some(Fp::Entry(k - width));
                }
                Sp::Entry(k - width)
            }
            Sp::Aligned(a) => {
                if let Some(Val::Entry(v)) = value.map(|r| self.regs[r]) {
                    self.slots.push((a - width, v));
                }
                if first_fp && self.switched {
                    self.fp_pushed = Some(Fp::Switched(a - width));
                }
                Sp::Aligned(a - width)
            }
        };
    }

    fn add_sp(&mut self, d: i64) {
        self.sp = match self.sp {
            Sp::Entry(k) => Sp::Entry(k + d),
            Sp::Aligned(a) => Sp::Aligned(a + d),
        };
        if let Sp::Aligned(a) = self.sp {
            // Words below the stack pointer are gone.
            self.slots.retain(|&(s, _)| s >= a);
        }
    }

    /// The value at the top of the stack, where a push left one.
    fn top(&self) -> Val {
        match self.sp {
            Sp::Aligned(a) => self
                .slots
                .iter()
                .find(|&&(s, _)| s == a)
                .map_or(Val::Unknown, |&(_, v)| Val::Entry(v)),
            Sp::Entry(_) => Val::Unknown,
        }
    }

    fn sp_val(&self) -> Val {
        match self.sp {
            Sp::Entry(k) => Val::Entry(k),
            Sp::Aligned(_) => Val::Unknown,
        }
    }
}

/// Reads the stub at `start` (code of `bitness` 32 or 64, bytes from `code(addr, buf)`), and
/// hands `found(address, layout)` the layout at each of its instructions (before it runs)
/// and at the return address of each of its calls.
pub(crate) fn analyze<C, F>(bitness: u32, start: u64, mut code: C, mut found: F)
where
    C: FnMut(u64, &mut [u8]) -> bool,
    F: FnMut(u64, Layout),
{
    let mut st = State {
        sp: Sp::Entry(0),
        regs: [Val::Unknown; 16],
        slots: Vec::new(),
        switched: false,
        fp: Fp::Unchanged,
        fp_pushed: None,
    };
    let width = i64::from(bitness / 8);
    let mut info = InstructionInfoFactory::new();
    let (mut ip, mut jumps, mut called) = (start, 0, false);
    for _ in 0..MAX_INSNS {
        let mut buf = [0u8; 15];
        // An instruction near the end of readable memory: read what there is.
        let n = (1..=buf.len())
            .rev()
            .find(|&n| code(ip, &mut buf[..n]))
            .unwrap_or(0);
        if n == 0 {
            return;
        }
        let mut d = Decoder::with_ip(bitness, &buf[..n], ip, DecoderOptions::NONE);
        let i = d.decode();
        if i.code() == Code::INVALID {
            return;
        }
        // A call's return address had its layout from the call.
        if !called {
            if let Some(l) = st.layout(width) {
                found(ip, l);
            }
        }
        called = false;
        match i.flow_control() {
            FlowControl::Next => {}
            FlowControl::Call | FlowControl::IndirectCall => {
                if let Some(l) = st.layout(width) {
                    found(i.next_ip(), l);
                }
                // The callee may change the caller-saved registers (both ABIs keep
                // bx, bp, si, di; x86_64's SysV also r12 to r15, and takes si, di).
                let kept: &[usize] = match bitness {
                    64 => &[3, 5, 12, 13, 14, 15],
                    _ => &[3, 5, 6, 7],
                };
                for r in 0..16 {
                    if r != SP && !kept.contains(&r) {
                        st.regs[r] = Val::Unknown;
                    }
                }
                ip = i.next_ip();
                called = true;
                continue;
            }
            FlowControl::UnconditionalBranch
                if i.op0_kind() == OpKind::NearBranch64 || i.op0_kind() == OpKind::NearBranch32 =>
            {
                jumps += 1;
                if jumps > MAX_JUMPS {
                    return;
                }
                ip = i.near_branch_target();
                continue;
            }
            _ => return,
        }
        if !step(&mut st, &i, &mut info) {
            return;
        }
        ip = i.next_ip();
    }
}

/// Applies one straight-line instruction; `false` when the stack pointer is lost.
fn step(st: &mut State, i: &Instruction, info: &mut InstructionInfoFactory) -> bool {
    let reg0 = (i.op_count() > 0 && i.op0_kind() == OpKind::Register).then(|| i.op0_register());
    let reg1 = (i.op_count() > 1 && i.op1_kind() == OpKind::Register).then(|| i.op1_register());
    let imm1 = (i.op_count() > 1).then(|| immediate(i)).flatten();
    let full0 = reg0.and_then(gpr);
    match (i.mnemonic(), full0) {
        // A segment register's push has no general register: a word, nothing followed.
        (Mnemonic::Push, _) => {
            st.push(-i.stack_pointer_increment() as i64, full0);
            return true;
        }
        (Mnemonic::Pop, _) => {
            let v = st.top();
            st.add_sp(i.stack_pointer_increment() as i64);
            if let Some(r) = full0 {
                st.set(r, v);
            }
            return true;
        }
        (Mnemonic::Sub | Mnemonic::Add, Some(SP)) => {
            let Some(d) = imm1 else { return false };
            st.add_sp(if i.mnemonic() == Mnemonic::Sub { -d } else { d });
            return true;
        }
        (Mnemonic::And, Some(SP)) => {
            st.sp = Sp::Aligned(0);
            st.slots.clear();
            st.switched = false;
            st.forget_switched_fp();
            return true;
        }
        (Mnemonic::Mov, Some(dst)) => {
            let v = match reg1.and_then(gpr) {
                Some(SP) => st.sp_val(),
                Some(src) => st.regs[src],
                // A load (or a constant): nothing followed.
                None => Val::Unknown,
            };
            st.set(dst, v);
            return true;
        }
        (Mnemonic::Lea, Some(dst)) if i.memory_index() == Register::None => {
            let base = i.memory_base();
            // 32-bit addressing keeps a negative displacement in 32 bits.
            let d = match base.is_gpr32() {
                true => i.memory_displacement32() as i32 as i64,
                false => i.memory_displacement64() as i64,
            };
            let v = match gpr(base) {
                Some(SP) => st.sp_val(),
                Some(b) => st.regs[b],
                None => Val::Unknown,
            };
            let v = match v {
                Val::Entry(k) => Val::Entry(k + d),
                Val::Unknown => Val::Unknown,
            };
            st.set(dst, v);
            return true;
        }
        _ => {}
    }
    // Anything else: the registers it writes are no longer followed; one that moves the
    // stack pointer as a side effect, or writes it as a result not followed (`xchg`, a
    // conditional move), loses it.
    if i.stack_pointer_increment() != 0 {
        return false;
    }
    for u in info.info(i).used_registers() {
        let write = matches!(
            u.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        );
        if let (true, Some(r)) = (write, gpr(u.register())) {
            if r == SP {
                return false;
            }
            st.clobber(r);
        }
    }
    true
}

/// The second operand's immediate, sign-extended as the instruction extends it (a 32-bit
/// `add esp, -16` encoded with a 32-bit immediate included).
fn immediate(i: &Instruction) -> Option<i64> {
    Some(match i.op1_kind() {
        OpKind::Immediate8 => i.immediate8() as i8 as i64,
        OpKind::Immediate16 => i.immediate16() as i16 as i64,
        OpKind::Immediate32 => i.immediate32() as i32 as i64,
        OpKind::Immediate64 => i.immediate64() as i64,
        OpKind::Immediate8to16 => i.immediate8to16() as i64,
        OpKind::Immediate8to32 => i.immediate8to32() as i64,
        OpKind::Immediate8to64 => i.immediate8to64(),
        OpKind::Immediate32to64 => i.immediate32to64(),
        _ => return None,
    })
}
