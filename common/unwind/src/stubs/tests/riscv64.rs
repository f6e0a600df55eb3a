//! A riscv64 trap entry as rCore-like kernels write it (assembled with
//! `riscv64-linux-gnu-as -march=rv64gc`): `csrrw sp, sscratch, sp`, a branch on whether the
//! trap came from the kernel (`sscratch` 0), a trap frame on the kernel stack with the
//! interrupted `ra`, `s0`, `sp`, `sstatus` and `sepc`, no frame record, then the handler.
//!
//! ```text
//!  0: csrrw sp,sscratch,sp    1a: addi sp,sp,-272        26: csrr t0,sstatus
//!  4: bnez sp,1a              1c: sd ra,8(sp)            2a: csrr t1,sepc
//!  8: csrrw sp,sscratch,sp    1e: sd s0,64(sp)           2e: sd t0,256(sp)
//!  c: addi sp,sp,-272         20: csrr t0,sscratch       30: sd t1,264(sp)
//!  e: sd ra,8(sp)             24: sd t0,16(sp)           32: mv a0,sp
//! 10: sd s0,64(sp)                                        34: auipc ra,0
//! 12: addi t0,sp,272                                      38: jalr ra
//! 16: sd t0,16(sp)                                        3c: ld t0,256(sp)
//! 18: j 26                                                3e: sret
//! ```

use super::*;

const ALLTRAPS: &[u8] = &[
    0x73, 0x11, 0x01, 0x14, 0x63, 0x1b, 0x01, 0x00, 0x73, 0x11, 0x01, 0x14, 0x6d, 0x71, 0x06, 0xe4,
    0xa2, 0xe0, 0x93, 0x02, 0x01, 0x11, 0x16, 0xe8, 0x39, 0xa0, 0x6d, 0x71, 0x06, 0xe4, 0xa2, 0xe0,
    0xf3, 0x22, 0x00, 0x14, 0x16, 0xe8, 0xf3, 0x22, 0x00, 0x10, 0x73, 0x23, 0x10, 0x14, 0x16, 0xe2,
    0x1a, 0xe6, 0x0a, 0x85, 0x97, 0x00, 0x00, 0x00, 0xe7, 0x80, 0x00, 0x00, 0x92, 0x62, 0x73, 0x00,
    0x20, 0x10,
];
const AT: u64 = 0x8020_1000;
const RET: u64 = AT + 0x3c;

fn text() -> TextRanges {
    TextRanges::new([(0x8020_0000, 0x8030_0000)])
}

fn alltraps() -> EntryStubs {
    stubs(Arch::Riscv64, &[(AT, ALLTRAPS)], text())
}

/// The handler's stack pointer at the call's return, and the trap frame's words above it.
const SP: u64 = 0x8040_0f00;

fn frame(pc: u64, sp: u64, status: u64) -> Stack {
    let mut st = Stack::new(PtrWidth::W8);
    st.put(SP + 8, &[0x8020_4444, sp]);
    st.put(SP + 64, &[0x8040_0ff0]);
    st.put(SP + 256, &[status, pc]);
    st
}

fn cross(s: &EntryStubs, st: &Stack) -> Result<Interrupted, NotCrossed> {
    let at = AtStub {
        sp: SP,
        fp: 0x1234,
        ra: None,
        end: SP + 0x1000,
    };
    cross_risc(s, Arch::Riscv64, s.risc_at(RET), at, &mut st.reader(), None)
}

#[test]
fn both_paths_of_the_trap_entry_agree_on_the_trap_frame() {
    let s = alltraps();
    let slot = |off| Loc::Slot { off, add: 0 };
    assert_eq!(
        s.risc_at(RET),
        &[(
            RET,
            RiscLayout {
                pc: slot(264),
                sp: slot(16),
                // `s0` is kept across the call: the walk's own is the interrupted one.
                fp: Loc::Reg,
                ra: slot(8),
                status: slot(256),
                mode: None,
            }
        )]
    );
    // Before `sepc` is saved the pc is in the CSR alone: a layout that reads it at the
    // sample; right after, one from memory alone.
    let regs_only = |a| s.risc_at(a).iter().all(|(_, l)| l.needs_registers());
    assert!(regs_only(AT) && regs_only(AT + 0x30));
    assert_eq!(s.risc_at(AT + 0x30)[0].1.pc, Loc::Sys(SysReg::TrapPc));
    assert_eq!(s.risc_at(AT + 0x32).len(), 1);
    assert!(!s.risc_at(AT + 0x32)[0].1.needs_registers());
}

#[test]
fn a_trap_of_kernel_code_continues_at_the_interrupted_pc() {
    let s = alltraps();
    let i = cross(&s, &frame(0x8020_2002, SP + 272, 0x120)).unwrap();
    assert_eq!(
        i,
        Interrupted {
            at: SP,
            ip: 0x8020_2002,
            sp: SP + 272,
            fp: 0x1234,
            ra: Some(0x8020_4444),
            user: false,
        }
    );
}

#[test]
fn a_system_call_continues_in_the_program() {
    let s = alltraps();
    let i = cross(&s, &frame(0x1_0a2c, 0x3f_fff0, 0x20)).unwrap();
    assert_eq!((i.ip, i.sp, i.user), (0x1_0a2c, 0x3f_fff0, true));
}

#[test]
fn a_trap_frame_that_lies_is_not_crossed() {
    let s = alltraps();
    // sstatus.SPP says the kernel, the pc is a program's.
    assert_eq!(
        cross(&s, &frame(0x1_0a2c, 0x3f_fff0, 0x120)),
        Err(NotCrossed::NoFrame)
    );
    // A pc not on an instruction boundary; a stack pointer off alignment.
    assert_eq!(
        cross(&s, &frame(0x8020_2001, SP + 272, 0x120)),
        Err(NotCrossed::NoFrame)
    );
    assert_eq!(
        cross(&s, &frame(0x8020_2002, SP + 273, 0x120)),
        Err(NotCrossed::NoFrame)
    );
    // A program's stack pointer on the kernel stack being walked.
    assert_eq!(
        cross(&s, &frame(0x1_0a2c, SP + 512, 0x20)),
        Err(NotCrossed::NoFrame)
    );
    // The trap frame off the stack's span: nothing read.
    let mut st = Stack::new(PtrWidth::W8);
    st.put(SP + 0x2000, &[1]);
    assert_eq!(cross(&s, &st), Err(NotCrossed::Unreadable));
}

/// Memory `[SP, SP + 0x1000)` as `st` holds it (zero elsewhere in it), read through a
/// read-ahead window of 512 bytes as the plugin's: how many fetches a crossing costs.
fn cross_fetched(s: &EntryStubs, st: &Stack) -> (Result<Interrupted, NotCrossed>, usize) {
    let mut mem = vec![0u8; 0x1000];
    for (&a, &w) in &st.words {
        let o = (a - SP) as usize;
        mem[o..o + 8].copy_from_slice(&w.to_le_bytes());
    }
    let (mut window, mut fetches) = (None::<(u64, u64)>, 0);
    let mut read = |a: u64, out: &mut [u8]| {
        let n = out.len() as u64;
        if a < SP || a + n > SP + 0x1000 {
            return false;
        }
        if !window.is_some_and(|(lo, hi)| a >= lo && a + n <= hi) {
            fetches += 1;
            window = Some((a, (a + 512).min(SP + 0x1000)));
        }
        let o = (a - SP) as usize;
        out.copy_from_slice(&mem[o..o + out.len()]);
        true
    };
    let at = AtStub {
        sp: SP,
        fp: 0x1234,
        ra: None,
        end: SP + 0x1000,
    };
    let got = cross_risc(s, Arch::Riscv64, s.risc_at(RET), at, &mut read, None);
    (got, fetches)
}

#[test]
fn the_trap_frame_is_one_fetch_for_a_reader_that_reads_ahead() {
    // The slots at 8, 16, 256 and 264: the lowest read first, the window holds the rest.
    let s = alltraps();
    let st = frame(0x8020_2002, SP + 272, 0x120);
    let (got, fetches) = cross_fetched(&s, &st);
    assert_eq!(got, cross(&s, &st));
    assert_eq!(got.map(|i| i.ip), Ok(0x8020_2002));
    assert_eq!(fetches, 1);
}

#[test]
fn a_trap_frame_readable_in_part_is_read_slot_by_slot() {
    let s = alltraps();
    // The lowest slot (ra, at 8) unreadable: the others are read all the same, and the
    // crossing goes on without the interrupted ra.
    let mut st = Stack::new(PtrWidth::W8);
    st.put(SP + 16, &[SP + 272]);
    st.put(SP + 256, &[0x120, 0x8020_2002]);
    let i = cross(&s, &st).unwrap();
    assert_eq!(
        (i.ip, i.sp, i.ra, i.user),
        (0x8020_2002, SP + 272, None, false)
    );
    // The pc unreadable: no crossing, as before.
    let mut st = Stack::new(PtrWidth::W8);
    st.put(SP + 8, &[0x8020_4444, SP + 272]);
    st.put(SP + 256, &[0x120]);
    assert_eq!(cross(&s, &st), Err(NotCrossed::Unreadable));
    // The lowest slot off the stack's span (the walk's stack pointer above it): the slots
    // on it are read, the lowest of them first, the one below not at all.
    let at = AtStub {
        sp: SP + 16,
        fp: 0x1234,
        ra: None,
        end: SP + 0x1000,
    };
    let mut reads = Vec::new();
    let st = frame(0x8020_2002, SP + 272, 0x120);
    let mut inner = st.reader();
    let mut read = |a: u64, out: &mut [u8]| {
        reads.push(a);
        inner(a, out)
    };
    let layouts = [(
        RET,
        RiscLayout {
            pc: Loc::Slot { off: 248, add: 0 },
            sp: Loc::Slot { off: 0, add: 0 },
            fp: Loc::Reg,
            ra: Loc::Slot { off: -8, add: 0 },
            status: Loc::Slot { off: 240, add: 0 },
            mode: None,
        },
    )];
    let i = cross_risc(&s, Arch::Riscv64, &layouts, at, &mut read, None).unwrap();
    assert_eq!((i.ip, i.sp, i.ra), (0x8020_2002, SP + 272, None));
    assert_eq!(reads.first(), Some(&(SP + 16)));
    assert!(reads.iter().all(|&a| a >= SP + 16), "{reads:x?}");
}

/// The CPU's trap registers at a sample (`None`: QEMU cannot read them), and how many
/// reads were asked.
struct Csrs {
    sepc: Option<u64>,
    sstatus: Option<u64>,
    sscratch: Option<u64>,
    reads: usize,
}

impl Csrs {
    fn new(sepc: u64, sstatus: u64, sscratch: u64) -> Self {
        Csrs {
            sepc: Some(sepc),
            sstatus: Some(sstatus),
            sscratch: Some(sscratch),
            reads: 0,
        }
    }

    fn read(&mut self, r: SysReg) -> Option<u64> {
        self.reads += 1;
        match r {
            SysReg::TrapPc => self.sepc,
            SysReg::Status => self.sstatus,
            SysReg::Scratch => self.sscratch,
            SysReg::UserSp => None,
        }
    }
}

/// The crossing of a sample at `pc` in the stub (its own first frame: the CPU's registers
/// `csrs` are read), on an empty stack at `sp`.
fn cross_at_sample(pc: u64, sp: u64, csrs: &mut Csrs) -> Result<Interrupted, NotCrossed> {
    let s = alltraps();
    let at = AtStub {
        sp,
        fp: 0x8040_0ff0,
        ra: Some(0x8020_4444),
        end: sp + 0x1000,
    };
    let mut sys = |r| csrs.read(r);
    let st = Stack::new(PtrWidth::W8);
    let mut read = st.reader();
    cross_risc(
        &s,
        Arch::Riscv64,
        s.risc_at(pc),
        at,
        &mut read,
        Some(&mut sys),
    )
}

#[test]
fn a_sample_at_the_entry_crosses_from_the_csrs() {
    let s = alltraps();
    // At the first instruction nothing is saved: the pc and mode are in the CSRs, the
    // stack pointer and the rest in their own registers.
    assert_eq!(
        s.risc_at(AT),
        &[(
            AT,
            RiscLayout {
                pc: Loc::Sys(SysReg::TrapPc),
                sp: Loc::SpPlus(0),
                fp: Loc::Reg,
                ra: Loc::Reg,
                status: Loc::Sys(SysReg::Status),
                mode: None,
            }
        )]
    );
    // An interrupt of kernel code (SPP set): its pc, on the stack being walked.
    let mut csrs = Csrs::new(0x8020_2002, 0x120, 0);
    let i = cross_at_sample(AT, SP, &mut csrs).unwrap();
    assert_eq!(
        i,
        Interrupted {
            at: SP,
            ip: 0x8020_2002,
            sp: SP,
            fp: 0x8040_0ff0,
            ra: Some(0x8020_4444),
            user: false,
        }
    );
    assert_eq!(csrs.reads, 2);
    // A system call, after `csrrw sp, sscratch, sp`: the kernel stack in sp, the program's
    // stack pointer in sscratch.
    assert_eq!(s.risc_at(AT + 4)[0].1.sp, Loc::Sys(SysReg::Scratch));
    let mut csrs = Csrs::new(0x1_0a2c, 0x20, 0x3f_fff0);
    let i = cross_at_sample(AT + 4, SP, &mut csrs).unwrap();
    assert_eq!((i.ip, i.sp, i.user), (0x1_0a2c, 0x3f_fff0, true));
}

#[test]
fn csrs_that_lie_or_cannot_be_read_cut() {
    // SPP says the kernel, sepc is a program's; SPP says a program, sepc is kernel text.
    let mut csrs = Csrs::new(0x1_0a2c, 0x120, 0x3f_fff0);
    assert_eq!(
        cross_at_sample(AT + 4, SP, &mut csrs),
        Err(NotCrossed::NoFrame)
    );
    let mut csrs = Csrs::new(0x8020_2002, 0x20, 0);
    assert_eq!(cross_at_sample(AT, SP, &mut csrs), Err(NotCrossed::NoFrame));
    // A pc off an instruction boundary.
    let mut csrs = Csrs::new(0x8020_2001, 0x120, 0);
    assert_eq!(cross_at_sample(AT, SP, &mut csrs), Err(NotCrossed::NoFrame));
    // A program's stack pointer on the kernel stack being walked.
    let mut csrs = Csrs::new(0x1_0a2c, 0x20, SP + 0x100);
    assert_eq!(
        cross_at_sample(AT + 4, SP, &mut csrs),
        Err(NotCrossed::NoFrame)
    );
    // sstatus not readable: the mode cannot be checked, no crossing.
    let mut csrs = Csrs {
        sstatus: None,
        ..Csrs::new(0x8020_2002, 0x120, 0)
    };
    assert!(cross_at_sample(AT, SP, &mut csrs).is_err());
    // sepc not readable.
    let mut csrs = Csrs {
        sepc: None,
        ..Csrs::new(0x8020_2002, 0x120, 0)
    };
    assert!(cross_at_sample(AT, SP, &mut csrs).is_err());
}

#[test]
fn past_the_first_frame_or_after_a_call_the_csrs_are_not_read() {
    let s = alltraps();
    // At the call's return no layout reads them (the handler may have taken a trap).
    assert!(s.risc_at(RET).iter().all(|(_, l)| !l.needs_registers()));
    let mut csrs = Csrs::new(0x8020_2002, 0x120, 0);
    let got = cross_at_sample(RET, SP, &mut csrs);
    assert_eq!((got, csrs.reads), (Err(NotCrossed::Unreadable), 0));
    // Without the sample's registers (a frame further up), a layout that needs them is
    // no crossing.
    let at = AtStub {
        sp: SP,
        fp: 0,
        ra: None,
        end: SP + 0x1000,
    };
    let st = Stack::new(PtrWidth::W8);
    let got = cross_risc(&s, Arch::Riscv64, s.risc_at(AT), at, &mut st.reader(), None);
    assert_eq!(got, Err(NotCrossed::Unreadable));
}

#[test]
fn a_walk_from_the_entry_reads_the_csrs_and_one_elsewhere_reads_none() {
    use crate::{walk_tables, walk_tables_at_sample, Crossings, StartRegs, UnwindTables};
    use kern_profile_format::frame_marker;
    let tables = UnwindTables {
        arch: Arch::Riscv64,
        orc: None,
        cfi: None,
        stubs: alltraps(),
        user: Default::default(),
    };
    let start = |pc| StartRegs {
        pc,
        sp: SP,
        fp: 0,
        ra: Some(0x8020_4444),
    };
    let st = Stack::new(PtrWidth::W8);
    let mut csrs = Csrs::new(0x8020_2002, 0x120, 0);
    let mut out = [0u64; 8];
    let w = walk_tables_at_sample(
        &tables,
        start(AT),
        8,
        Crossings::ALL,
        st.reader(),
        |r| csrs.read(r),
        &mut out,
    )
    .unwrap();
    assert_eq!(&out[..2], &[frame_marker::KERNEL_ENTRY, 0x8020_2002]);
    assert!(w.frames >= 2);
    assert_eq!(csrs.reads, 2);
    // The walk without registers: as before they were read (no table, no layout: the
    // frame-pointer walk's).
    assert!(walk_tables(&tables, start(AT), 8, Crossings::ALL, st.reader(), &mut out).is_none());
    // A sample outside every stub reads no register.
    let mut csrs = Csrs::new(0x8020_2002, 0x120, 0);
    let w = walk_tables_at_sample(
        &tables,
        start(0x8020_2000),
        8,
        Crossings::ALL,
        st.reader(),
        |r| csrs.read(r),
        &mut out,
    );
    assert!(w.is_none());
    assert_eq!(csrs.reads, 0);
}
