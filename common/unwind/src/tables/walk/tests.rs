use super::*;
use crate::tables::orc::reg;
use crate::tables::orc::tests::{ip_section, typed};
use crate::tables::{CfaBase, CfiTable, OrcLayout, OrcTable, Rule};
use kern_profile_format::frame_marker::{KERNEL_ENTRY as KE, STACK_SWITCH as SW};
use kern_profile_format::{Outcome, WalkEnd};

/// Guest memory: regions of bytes at addresses.
#[derive(Default)]
struct Mem(Vec<(u64, Vec<u8>)>);

impl Mem {
    fn put(&mut self, at: u64, words: &[u64]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.0.push((at, bytes));
    }

    /// 4-byte words (i386).
    fn put32(&mut self, at: u32, words: &[u32]) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.0.push((at.into(), bytes));
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> bool {
        for (at, b) in &self.0 {
            if addr >= *at && addr - at + out.len() as u64 <= b.len() as u64 {
                let o = (addr - at) as usize;
                out.copy_from_slice(&b[o..o + out.len()]);
                return true;
            }
        }
        false
    }
}

/// `arch`'s tables of CFI rows alone.
fn cfi_only(arch: Arch, cfi: CfiTable) -> UnwindTables {
    UnwindTables {
        arch,
        orc: None,
        cfi: Some(cfi),
        stubs: Default::default(),
        user: Default::default(),
    }
}

/// An x86_64 row that leaves the return address undefined: the outermost frame.
fn outermost() -> Option<CfiRow> {
    Some(CfiRow::call(
        CfaBase::StackPointer,
        8,
        Rule::Unchanged,
        Rule::Unchanged,
    ))
}

/// x86_64 tables of `(address, entry)` in the 6.4 layout.
fn orc(entries: &[(u64, [u8; 6])]) -> UnwindTables {
    let ip_addr = 0xffff_ffff_8200_0000;
    let addrs: Vec<u64> = entries.iter().map(|e| e.0).collect();
    let bytes: Vec<u8> = entries.iter().flat_map(|e| e.1).collect();
    let t = OrcTable::parse(
        ip_addr,
        &ip_section(ip_addr, &addrs),
        &bytes,
        OrcLayout::Typed,
        1000,
    );
    UnwindTables {
        arch: Arch::X86_64,
        orc: Some(t.unwrap()),
        cfi: None,
        stubs: Default::default(),
        user: Default::default(),
    }
}

const K: u64 = 0xffff_ffff_8100_0000;
/// A kernel stack's lowest word in the tests.
const S: u64 = 0xffff_c900_0001_0000;
/// The entries of the ORC test kernel: `a` and `b` ordinary functions (frames of 16 and 8
/// bytes), `root` a kernel thread's start, `entry` code with a whole pt_regs at its stack
/// pointer, `iret` code with the interrupt frame alone, `irq` a function that switched
/// stacks (the previous stack pointer saved at its stack pointer).
const A: u64 = K + 0x1000;
const B: u64 = K + 0x2000;
const ROOT: u64 = K + 0x3000;
const ENTRY: u64 = K + 0x4000;
const IRET: u64 = K + 0x5000;
const IRQ: u64 = K + 0x6000;
const END: u64 = K + 0x7000;

fn kernel() -> UnwindTables {
    orc(&[
        (A, typed(reg::SP, 16, reg::UNDEFINED, 0, 2)),
        (B, typed(reg::SP, 8, reg::UNDEFINED, 0, 2)),
        (ROOT, typed(0, 0, 0, 0, 1)),
        (ENTRY, typed(reg::SP, 0, reg::UNDEFINED, 0, 3)),
        (IRET, typed(reg::SP, 0, reg::UNDEFINED, 0, 4)),
        (IRQ, typed(reg::SP_INDIRECT, 8, reg::UNDEFINED, 0, 2)),
        (END, typed(0, 0, 0, 0, 0)),
    ])
}

fn walk(
    t: &UnwindTables,
    pc: u64,
    sp: u64,
    fp: u64,
    mem: &Mem,
    depth: usize,
) -> Option<(Vec<u64>, StopReason)> {
    let mut out = vec![0; 64];
    let w = walk_tables(
        t,
        StartRegs {
            pc,
            sp,
            fp,
            ra: None,
        },
        depth,
        Crossings::ALL,
        |a, b| mem.read(a, b),
        &mut out,
    )?;
    out.truncate(w.frames);
    Some((out, w.stop))
}

#[test]
fn orc_call_frames_up_to_the_end_of_the_stack() {
    let mut mem = Mem::default();
    // a's frame: a local, the return into b; b's: the return into root.
    mem.put(S, &[0x1111, B + 0x10, ROOT + 0x10]);
    let (frames, stop) = walk(&kernel(), A + 0x10, S, 0xdead, &mem, 64).unwrap();
    assert_eq!(frames, [B + 0x10, ROOT + 0x10]);
    assert_eq!(stop, StopReason::NullFramePointer);
    // The depth cap.
    let (frames, stop) = walk(&kernel(), A + 0x10, S, 0, &mem, 1).unwrap();
    assert_eq!((frames, stop), (vec![B + 0x10], StopReason::DepthLimit));
    // A pc no table covers: the frame-pointer walk's.
    assert_eq!(walk(&kernel(), K, S, 0, &mem, 64), None);
    assert_eq!(walk(&kernel(), END + 1, S, 0, &mem, 64), None);
    // A user-mode sample: the frame-pointer walk's too.
    let mut out = [0; 4];
    let user = Crossings {
        user_mode: true,
        ..Crossings::ALL
    };
    let start = StartRegs {
        pc: A,
        sp: S,
        fp: 0,
        ra: None,
    };
    assert!(walk_tables(&kernel(), start, 4, user, |a, b| mem.read(a, b), &mut out).is_none());
}

#[test]
fn orc_frame_pointer_rules_carry_the_callers_frame_pointer() {
    // h: a 24-byte frame, the caller's frame pointer saved at its own frame pointer (the
    // step's fast path); g: its frame from the frame pointer, the caller's frame pointer
    // saved 16 bytes below its stack pointer.
    let (g, h) = (K + 0x1000, K + 0x2000);
    let t = orc(&[
        (g, typed(reg::BP, 16, reg::PREV_SP, -16, 2)),
        (h, typed(reg::SP, 24, reg::BP, 0, 2)),
        (ROOT, typed(0, 0, 0, 0, 1)),
        (END, typed(0, 0, 0, 0, 0)),
    ]);
    let mut mem = Mem::default();
    mem.put(S, &[0x1111, S + 24, g + 0x10, 0xabc, ROOT + 0x10]);
    let (frames, stop) = walk(&t, h + 4, S, S + 8, &mem, 64).unwrap();
    assert_eq!(
        (frames, stop),
        (vec![g + 0x10, ROOT + 0x10], StopReason::NullFramePointer)
    );
    // h's caller's frame pointer where no stack is: unreadable, no frame.
    let (frames, stop) = walk(&t, h + 4, S, S - 8, &mem, 64).unwrap();
    assert_eq!((frames, stop), (vec![], StopReason::Unreadable));
    // A frame that does not raise the stack pointer.
    let t = orc(&[
        (h, typed(reg::SP, 0, reg::UNDEFINED, 0, 2)),
        (END, typed(0, 0, 0, 0, 0)),
    ]);
    let (frames, stop) = walk(&t, h + 4, S, 0, &mem, 64).unwrap();
    assert_eq!((frames, stop), (vec![], StopReason::NotIncreasing));
}

#[test]
fn a_return_address_is_looked_up_inside_its_call() {
    let mut mem = Mem::default();
    // Returning to the first byte of root: its call was the last instruction of b.
    mem.put(S, &[ROOT]);
    let (frames, stop) = walk(&kernel(), B, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [ROOT]);
    // b's rule again at ROOT - 1, one word up: no return address readable there.
    assert_eq!(stop, StopReason::Unreadable);
}

/// A pt_regs with `ip`, `cs`, `sp` and `bp`.
fn pt_regs(ip: u64, cs: u64, sp: u64, bp: u64) -> Vec<u64> {
    let mut r = vec![0u64; 21];
    r[4] = bp;
    r[16] = ip;
    r[17] = cs;
    r[18] = 0x246;
    r[19] = sp;
    r[20] = if cs & 3 == 3 { 0x2b } else { 0x18 };
    r
}

#[test]
fn regs_cross_into_user_space_and_walk_its_frame_pointers() {
    let mut mem = Mem::default();
    let user_sp = 0x7ffc_0000_1000;
    let user_bp = user_sp + 0x20;
    // b returns into the entry code, whose pt_regs lie right above.
    let mut stack = vec![ENTRY + 0x10];
    stack.extend(pt_regs(0x40_1234, 0x33, user_sp, user_bp));
    mem.put(S, &stack);
    // The user program's frame records: its caller, then the first frame.
    mem.put(user_bp, &[user_bp + 0x40, 0x40_5678]);
    mem.put(user_bp + 0x40, &[0, 0x40_9abc]);
    let (frames, stop) = walk(&kernel(), B + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [ENTRY + 0x10, KE, 0x40_1234, 0x40_5678, 0x40_9abc]);
    assert_eq!(stop, StopReason::NullFramePointer);
    // In user context no switch: a frame pointer that leads down ends the walk.
    mem.0.pop();
    mem.put(user_bp + 0x40, &[user_bp - 0x1000, 0x40_9abc]);
    mem.put(user_bp - 0x1000, &[0, 0x40_0000]);
    let (frames, stop) = walk(&kernel(), B + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [ENTRY + 0x10, KE, 0x40_1234, 0x40_5678, 0x40_9abc]);
    assert_eq!(stop, StopReason::NotIncreasing);
}

#[test]
fn regs_and_partial_regs_cross_into_interrupted_kernel_code() {
    let mut mem = Mem::default();
    // Interrupted in a, on another stack: a's frame there returns to root.
    let other = S + 0x10_0000;
    mem.put(other, &[0x2222, ROOT + 8]);
    // Sampled in the entry code (no call yet): pt_regs at the stack pointer.
    mem.put(S, &pt_regs(A + 0x20, 0x10, other, 0xbbbb));
    let (frames, stop) = walk(&kernel(), ENTRY + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [KE, A + 0x20, ROOT + 8]);
    assert_eq!(stop, StopReason::NullFramePointer);
    // Only the interrupt frame, at the stack pointer: the same crossing.
    let mut mem = Mem::default();
    mem.put(other, &[0x2222, ROOT + 8]);
    mem.put(S, &[A + 0x20, 0x10, 0x246, other, 0x18]);
    let (frames, stop) = walk(&kernel(), IRET + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [KE, A + 0x20, ROOT + 8]);
    assert_eq!(stop, StopReason::NullFramePointer);
    // A null code selector is no interrupt frame.
    let mut mem = Mem::default();
    mem.put(S, &[A + 0x20, 0, 0x246, other, 0x18]);
    let (frames, stop) = walk(&kernel(), IRET + 4, S, 0, &mem, 64).unwrap();
    assert_eq!((frames, stop), (vec![], StopReason::Unreadable));
}

#[test]
fn an_indirect_stack_pointer_switches_stacks_once_per_allowance() {
    let mut mem = Mem::default();
    let task = S + 0x40_0000;
    // irq's stack pointer holds the task stack's; the return address lies below it there.
    mem.put(S, &[task]);
    mem.put(task, &[ROOT + 4]);
    let (frames, stop) = walk(&kernel(), IRQ + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [SW, ROOT + 4]);
    assert_eq!(stop, StopReason::NullFramePointer);
    // A loop of switches ends at the allowance.
    let mut mem = Mem::default();
    mem.put(S - 8, &[IRQ + 4, S - 8]);
    let (frames, stop) = walk(&kernel(), IRQ + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [SW, IRQ + 4, SW, IRQ + 4]);
    assert_eq!(stop, StopReason::NotIncreasing);
}

#[test]
fn hostile_rules_cannot_loop() {
    // A frame that does not raise the stack pointer, one that lowers it, one far above.
    for (sp_off, want) in [
        (0, StopReason::NotIncreasing),
        (-8, StopReason::NotIncreasing),
        (i16::MAX, StopReason::Unreadable),
    ] {
        let t = orc(&[
            (A, typed(reg::SP, sp_off, 0, 0, 2)),
            (B, typed(0, 0, 0, 0, 0)),
        ]);
        let mut mem = Mem::default();
        mem.put(S - 8, &[A + 4, A + 4]);
        let (_, stop) = walk(&t, A + 4, S, 0, &mem, 64).unwrap();
        assert_eq!(stop, want, "sp_offset {sp_off}");
    }
    // A recursion with a real frame each time ends at the depth cap.
    let t = orc(&[(A, typed(reg::SP, 8, 0, 0, 2)), (B, typed(0, 0, 0, 0, 0))]);
    let mut mem = Mem::default();
    mem.put(S, &[A + 4; 100]);
    let (frames, stop) = walk(&t, A + 4, S, 0, &mem, 10).unwrap();
    assert_eq!((frames.len(), stop), (10, StopReason::DepthLimit));
    // Random tables over random memory: every walk ends within its depth.
    let mut rng = fastrand::Rng::with_seed(28);
    for _ in 0..2000 {
        let entries: Vec<(u64, [u8; 6])> = (0..8)
            .map(|i| {
                let mut e = [0u8; 6];
                rng.fill(&mut e);
                (K + i * 0x100, e)
            })
            .collect();
        let t = orc(&entries);
        let mut mem = Mem::default();
        let words: Vec<u64> = (0..64)
            .map(|_| match rng.u8(..4) {
                0 => K + rng.u64(..0x800),
                1 => S + rng.u64(..0x200),
                _ => rng.u64(..),
            })
            .collect();
        mem.put(S, &words);
        if let Some((frames, _)) = walk(&t, K + rng.u64(..0x800), S, S + 16, &mem, 16) {
            assert!(frames.len() <= 16);
        }
    }
}

#[test]
fn cfi_rows_walk_an_aarch64_leaf_and_its_callers() {
    // f: a leaf (CFA = sp, caller in x30); g: a frame of 32 with fp and lr at its bottom.
    let f = 0xffff_8000_0801_0000;
    let g = f + 0x100;
    let h = f + 0x200;
    let row = |cfa_base, cfa_offset, fp, ra| Some(CfiRow::call(cfa_base, cfa_offset, fp, ra));
    let cfi = CfiTable::from_rows(&[
        (
            f,
            row(CfaBase::StackPointer, 0, Rule::Unchanged, Rule::Unchanged),
        ),
        (
            g,
            row(
                CfaBase::FramePointer,
                32,
                Rule::AtCfa(-32),
                Rule::AtCfa(-24),
            ),
        ),
        (h, None),
    ]);
    let t = cfi_only(Arch::Aarch64, cfi);
    let sp = 0xffff_8000_0a00_0000u64;
    let mut mem = Mem::default();
    // g's record at sp: the caller's fp (an h frame's, garbage-free: 0) and lr into h.
    mem.put(sp, &[0, h + 8, 0, 0]);
    let mut out = [0; 8];
    let start = StartRegs {
        pc: f + 4,
        sp,
        fp: sp,
        ra: Some(g + 0x10),
    };
    let read = |a: u64, b: &mut [u8]| mem.read(a, b);
    let w = walk_tables(&t, start, 8, Crossings::ALL, read, &mut out).unwrap();
    // f's caller from x30, g's from its record; h has no rule: the frame-record walk
    // goes on from its fp (0: the end).
    assert_eq!(&out[..w.frames], [g + 0x10, h + 8]);
    assert_eq!(w.stop, StopReason::NullFramePointer);
    // Without the register there is no caller to give for the leaf: the frame records'.
    let start = StartRegs { ra: None, ..start };
    let read = |a: u64, b: &mut [u8]| mem.read(a, b);
    let w = walk_tables(&t, start, 8, Crossings::ALL, read, &mut out).unwrap();
    assert_eq!(&out[..w.frames], [h + 8]);
}

#[test]
fn cfi_on_x86_64_reads_the_return_address_at_the_cfa() {
    let f = 0xffff_ffff_8100_0000u64;
    let row = |cfa_offset, fp| {
        Some(CfiRow::call(
            CfaBase::StackPointer,
            cfa_offset,
            fp,
            Rule::AtCfa(-8),
        ))
    };
    let cfi = CfiTable::from_rows(&[
        (f, row(16, Rule::AtCfa(-16))),
        (f + 0x100, row(8, Rule::Unchanged)),
        (f + 0x200, outermost()),
    ]);
    let t = cfi_only(Arch::X86_64, cfi);
    let mut mem = Mem::default();
    mem.put(S, &[0x5555, f + 0x110, f + 0x210]);
    let (frames, stop) = walk(&t, f + 4, S, 0, &mem, 64).unwrap();
    // The last rule leaves the return address undefined: the outermost frame.
    assert_eq!(
        (frames, stop),
        (vec![f + 0x110, f + 0x210], StopReason::NullReturnAddress)
    );
}

#[test]
fn registers_at_the_end_of_the_address_space_are_unreadable() {
    let t = orc(&[
        (A, typed(reg::SP, 0, 0, 0, 3)),
        (B, typed(reg::SP, 0, 0, 0, 4)),
        (END, typed(0, 0, 0, 0, 0)),
    ]);
    let mem = Mem::default();
    for pc in [A, B] {
        let mut out = [0; 8];
        let start = StartRegs {
            pc,
            sp: u64::MAX - 16,
            fp: 0,
            ra: None,
        };
        let w = walk_tables(
            &t,
            start,
            8,
            Crossings::ALL,
            |a, b| mem.read(a, b),
            &mut out,
        )
        .unwrap();
        assert_eq!(w.frames, 0);
        assert!(
            matches!(w.stop, StopReason::Unreadable | StopReason::OffStack),
            "{w:?}"
        );
    }
}

#[test]
fn a_cfi_signal_frame_crosses_into_the_interrupted_context() {
    // x86_64 entry code annotated as Linux's INTR_FRAME was: the stub's CFA is above the
    // hardware frame (RIP, CS, RFLAGS, RSP, SS), RIP and RSP saved in it, rbp below it.
    let handler = 0xffff_ffff_8100_0000u64;
    let stub = handler + 0x100;
    let leaf = handler + 0x200;
    let caller = handler + 0x300;
    let root = handler + 0x400;
    let call = |cfa_offset| {
        Some(CfiRow::call(
            CfaBase::StackPointer,
            cfa_offset,
            Rule::Unchanged,
            Rule::AtCfa(-8),
        ))
    };
    let signal = CfiRow {
        sp_saved: std::num::NonZeroI16::new(-16),
        signal: true,
        ..CfiRow::call(
            CfaBase::StackPointer,
            56,
            Rule::AtCfa(-48),
            Rule::AtCfa(-40),
        )
    };
    let cfi = CfiTable::from_rows(&[
        (handler, call(8)),
        (handler + 0x80, None),
        (stub, Some(signal)),
        (stub + 0x80, None),
        // Nothing covers leaf - 1: a walk that took the interrupted RIP for a return
        // address would look there.
        (leaf, call(8)),
        (leaf + 0x80, None),
        (caller, call(16)),
        (caller + 0x80, None),
        (root, outermost()),
    ]);
    let t = cfi_only(Arch::X86_64, cfi);
    let interrupted_sp = S + 0x100;
    let mut mem = Mem::default();
    // The handler's return into the stub, a word the stub pushed, its rbp, then the CPU's
    // frame.
    let frame = [
        stub + 0x10,
        0x5555,
        0xdead,
        leaf,
        0x10,
        0x246,
        interrupted_sp,
        0x18,
    ];
    mem.put(S, &frame);
    // The interrupted leaf's return into its caller, the caller's local and return.
    mem.put(interrupted_sp, &[caller + 0x20, 0x1111, root + 8]);
    let (frames, stop) = walk(&t, handler + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(
        (frames, stop),
        (
            vec![stub + 0x10, KE, leaf, caller + 0x20, root + 8],
            StopReason::NullReturnAddress
        )
    );
    // The saved stack pointer must be readable.
    let mut cut = Mem::default();
    cut.put(S, &frame[..6]);
    let (frames, stop) = walk(&t, handler + 4, S, 0, &cut, 64).unwrap();
    assert_eq!((frames, stop), (vec![stub + 0x10], StopReason::Unreadable));
}

/// How a walk ended, with its walker and crossing.
fn end_of(t: &UnwindTables, pc: u64, sp: u64, fp: u64, mem: &Mem) -> Option<WalkEnd> {
    let mut out = vec![0; 64];
    let start = StartRegs {
        pc,
        sp,
        fp,
        ra: None,
    };
    walk_tables(
        t,
        start,
        64,
        Crossings::ALL,
        |a, b| mem.read(a, b),
        &mut out,
    )
    .map(|w| w.end())
}

#[test]
fn walks_say_which_walker_ended_them_and_whether_they_crossed_from_user() {
    let mut mem = Mem::default();
    mem.put(S, &[0x1111, B + 0x10, ROOT + 0x10]);
    let end = end_of(&kernel(), A + 0x10, S, 0xdead, &mem).unwrap();
    assert_eq!(end.walker(), Some(Walker::Orc));
    assert!(!end.from_user());
    assert_eq!(end.outcome(), Outcome::Root);
    assert_eq!(end.name(), "ORC end of stack");
    // Into a user program, whose frame pointers lead down: cut in the program, but the
    // kernel's part is whole.
    let user_sp = 0x7ffc_0000_1000;
    let user_bp = user_sp + 0x20;
    let mut stack = vec![ENTRY + 0x10];
    stack.extend(pt_regs(0x40_1234, 0x33, user_sp, user_bp));
    let mut mem = Mem::default();
    mem.put(S, &stack);
    mem.put(user_bp, &[user_bp - 0x1000, 0x40_5678]);
    let end = end_of(&kernel(), B + 4, S, 0, &mem).unwrap();
    assert_eq!(end.walker(), Some(Walker::FramePointers));
    assert_eq!(end.reason(), Some(StopReason::NotIncreasing));
    assert!(end.from_user());
    assert_eq!(end.outcome(), Outcome::FromUser);
}

/// A user program at `PROG` (x86_64): `_start` (outermost), `main` (the return address
/// alone on the stack), `f` (one word more), its code bytes a pattern.
const PROG: u64 = 0x40_0000;
const START_FN: u64 = PROG;
const MAIN: u64 = PROG + 0x1800;
const F: u64 = PROG + 0x1000;

fn program_code() -> Vec<u8> {
    (0..0x2000u32).map(|i| (i as u8) ^ 0x5a).collect()
}

fn with_program(mut t: UnwindTables) -> UnwindTables {
    let rows = CfiTable::from_rows(&[
        (START_FN, outermost()),
        (START_FN + 0x100, None),
        (
            F,
            Some(CfiRow::call(
                CfaBase::StackPointer,
                16,
                Rule::Unchanged,
                Rule::AtCfa(-8),
            )),
        ),
        (
            MAIN,
            Some(CfiRow::call(
                CfaBase::StackPointer,
                8,
                Rule::Unchanged,
                Rule::AtCfa(-8),
            )),
        ),
        (PROG + 0x2000, None),
    ]);
    t.user.push("prog", rows, PROG, program_code()).unwrap();
    t
}

impl Mem {
    fn put_bytes(&mut self, at: u64, bytes: &[u8]) {
        self.0.push((at, bytes.to_vec()));
    }
}

#[test]
fn regs_cross_into_a_user_program_and_walk_its_cfi() {
    let t = with_program(kernel());
    let (ip, user_sp) = (F + 0x234, 0x7ffc_0000_1000u64);
    let mut mem = Mem::default();
    let mut stack = vec![ENTRY + 0x10];
    // No frame pointer in the program: rbp holds data.
    stack.extend(pt_regs(ip, 0x33, user_sp, 0x1234_5678));
    mem.put(S, &stack);
    // f's frame: a local, the return into main; main's: the return into _start.
    mem.put(user_sp, &[0x1111, MAIN + 0x10, START_FN + 0x10]);
    mem.put_bytes(PROG, &program_code());
    let (frames, stop) = walk(&t, B + 4, S, 0, &mem, 64).unwrap();
    assert_eq!(frames, [ENTRY + 0x10, KE, ip, MAIN + 0x10, START_FN + 0x10]);
    assert_eq!(stop, StopReason::NullReturnAddress);
    // A user-mode sample in the program: the same frames, no entry crossed.
    let mut out = [0; 8];
    let user = Crossings {
        user_mode: true,
        ..Crossings::ALL
    };
    let start = StartRegs {
        pc: ip,
        sp: user_sp,
        fp: 0x1234_5678,
        ra: None,
    };
    let w = walk_tables(&t, start, 8, user, |a, b| mem.read(a, b), &mut out).unwrap();
    assert_eq!(&out[..w.frames], [MAIN + 0x10, START_FN + 0x10]);
    assert_eq!(w.stop, StopReason::NullReturnAddress);
    assert!(!w.from_user, "a user-mode sample crossed no entry");
    // Other code at that address (another program linked there): not this program's table,
    // the frame-pointer walk's.
    let other_at = |patch: u64| {
        let mut m = Mem::default();
        m.put(S, &stack);
        m.put(user_sp, &[0x1111, MAIN + 0x10, START_FN + 0x10]);
        // Found before the program's code: read first.
        m.put_bytes(patch, &[0x90; 8]);
        m.put_bytes(PROG, &program_code());
        m
    };
    let other = other_at(ip);
    let (frames, _) = walk(&t, B + 4, S, 0, &other, 64).unwrap();
    assert_eq!(frames, [ENTRY + 0x10, KE, ip]);
    let w = walk_tables(&t, start, 8, user, |a, b| other.read(a, b), &mut out);
    assert!(w.is_none(), "{w:?}");
    // The same function at the pc, another caller (programs that share their first
    // functions): the caller's frame is not walked by this program's rows.
    let other = other_at(MAIN + 0xf);
    let (frames, _) = walk(&t, B + 4, S, 0, &other, 64).unwrap();
    assert_eq!(frames[..4], [ENTRY + 0x10, KE, ip, MAIN + 0x10]);
    assert!(!frames.contains(&(START_FN + 0x10)), "{frames:x?}");
    // Code that cannot be read: the frame-pointer walk's.
    let mut unreadable = Mem::default();
    unreadable.put(S, &stack);
    unreadable.put(user_sp, &[0x1111, MAIN + 0x10, START_FN + 0x10]);
    let (frames, _) = walk(&t, B + 4, S, 0, &unreadable, 64).unwrap();
    assert_eq!(frames, [ENTRY + 0x10, KE, ip]);
}

/// i386 CFI for a function at `f` (0x100 bytes) that made its frame record: the CFA 8 above
/// `ebp`, the saved `ebp` and the return address just below it.
fn i386_framed_function(f: u64) -> CfiTable {
    CfiTable::from_rows(&[
        (
            f,
            Some(CfiRow::call(
                CfaBase::FramePointer,
                8,
                Rule::AtCfa(-8),
                Rule::AtCfa(-4),
            )),
        ),
        (f + 0x100, None),
    ])
}

/// i386 Linux from its -dbg vmlinux: `do_SYSENTER_32` has CFI (its frame record at `ebp`),
/// `entry_SYSENTER_32` has none. The frame-pointer walk takes over at the record, where it
/// finds the user's registers right above, and crosses into the vDSO's caller; taking over
/// after it, it would read the user stack pointer (the record's saved `ebp`) as a frame.
#[test]
fn a_cfi_frame_record_hands_over_at_the_record_so_sysenter_crosses() {
    let f = 0xc100_0000u64;
    let stub_return = 0xc191_a0a8u32;
    let cfi = i386_framed_function(f);
    let t = cfi_only(Arch::I386, cfi);
    let mut mem = Mem::default();
    let kstack = 0xc2a0_1f00u32;
    let rec = kstack + 0x20;
    let regs = rec + 8;
    let (user_sp, user_bp) = (0xbfff_f000u32, 0xbfff_f100u32);
    // pt_regs: bx cx dx si di bp ax ds es fs gs orig_ax ip cs flags sp ss.
    let mut pt = [0u32; 17];
    (pt[5], pt[12], pt[13], pt[14], pt[15], pt[16]) =
        (user_bp, 0xb7ff_0429, 0x73, 0x246, user_sp, 0x7b);
    mem.put32(kstack, &[0; 8]);
    mem.put32(rec, &[user_sp, stub_return]);
    mem.put32(regs, &pt);
    mem.put32(user_sp, &[user_bp, 0x1_0000, 3, 0x0805_1234]);
    mem.put32(user_bp, &[0, 0x0804_9000]);
    let (frames, stop) = walk(&t, f + 0x10, kstack.into(), rec.into(), &mem, 64).unwrap();
    assert_eq!(
        frames,
        [
            stub_return.into(),
            KE,
            0xb7ff_0429,
            0x0805_1234,
            0x0804_9000
        ]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
}

/// i386 Linux's `__switch_to_asm` (no CFI, so a stub candidate, but no entry: it only pushes
/// registers), where the plugin walks a task's stack at a switch: its "CPU frame" is none,
/// and under a frame pointer into the stack the frame-pointer walk takes the sample (from
/// the first step: the caller's, which knows the return address is at the stack pointer).
/// A frame pointer off the stack is still the cut it was.
#[test]
fn code_with_no_table_that_is_no_entry_is_walked_by_frame_pointers() {
    use crate::stubs::EntryStubs;
    use crate::tables::TextRanges;
    let f = 0xc100_0000u64;
    let switch_to_asm = 0xc100_1000u64;
    // push ebp; push ebx; push edi; push esi; pushf; mov [eax+0x5a0], esp
    let code: &[u8] = &[0x55, 0x53, 0x57, 0x56, 0x9c, 0x89, 0xa0, 0xa0, 0x05, 0, 0];
    let read_code = |addr: u64, buf: &mut [u8]| {
        let Some(off) = addr.checked_sub(switch_to_asm).map(|o| o as usize) else {
            return false;
        };
        match code.get(off..off + buf.len()) {
            Some(b) => {
                buf.copy_from_slice(b);
                true
            }
            None => false,
        }
    };
    let stubs = EntryStubs::read(
        Arch::I386,
        [switch_to_asm],
        read_code,
        TextRanges::unknown(),
    );
    assert!(stubs.covers(switch_to_asm), "a stub candidate");
    let cfi = i386_framed_function(f);
    let t = UnwindTables {
        stubs,
        ..cfi_only(Arch::I386, cfi)
    };
    let mut mem = Mem::default();
    let kstack = 0xc2a0_1f00u32;
    let rec = kstack + 0x20;
    // At the switch: the return into __schedule at the stack pointer, __schedule's record
    // above.
    mem.put32(kstack, &[(f + 0x40) as u32, 0, 0, 0, 0, 0, 0, 0]);
    mem.put32(rec, &[0, (f + 0x80) as u32]);
    let mut out = vec![0; 64];
    let start = StartRegs {
        pc: switch_to_asm,
        sp: kstack.into(),
        fp: rec.into(),
        ra: None,
    };
    let read = |a: u64, b: &mut [u8]| mem.read(a, b);
    assert!(walk_tables(&t, start, 64, Crossings::ALL, read, &mut out).is_none());
    // The frame pointer off the stack (below it): no frame-pointer walk, the stub's cut.
    let off = StartRegs {
        fp: 0x1000,
        ..start
    };
    let read = |a: u64, b: &mut [u8]| mem.read(a, b);
    let w = walk_tables(&t, off, 64, Crossings::ALL, read, &mut out).unwrap();
    assert_eq!(w.stop, StopReason::EntryNotCrossed);
}
