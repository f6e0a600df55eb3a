//! The aarch64 example kernel's system-call stub built with `bare_entries`
//! (`objdump -d target/examples/nofp/kernel-aarch64.elf`, `svc_entry`, up to its call's
//! return address): the ESR check, `sub sp, sp, #0x110`, x0 to x29 saved in pairs, then
//! `mrs x9, sp_el0; stp x30, x9, [sp, #240]`, `mrs x10, elr_el1; mrs x11, spsr_el1;
//! stp x10, x11, [sp, #256]`, `bl syscall_dispatch`. No frame record: x29 is the program's.

use super::*;

/// Its instruction words, from 0x40200f84; the call's return address is 0x40200fec.
const SVC_ENTRY: &[u32] = &[
    0xd5385209, 0xd35afd29, 0xf100553f, 0x54000ba1, 0xd10443ff, 0xa90007e0, 0xa9010fe2, 0xa90217e4,
    0xa9031fe6, 0xa90427e8, 0xa9052fea, 0xa90637ec, 0xa9073fee, 0xa90847f0, 0xa9094ff2, 0xa90a57f4,
    0xa90b5ff6, 0xa90c67f8, 0xa90d6ffa, 0xa90e77fc, 0xd5384109, 0xa90f27fe, 0xd538402a, 0xd538400b,
    0xa9102fea, 0x94000f3e, 0xf94007e1,
];
const AT: u64 = 0x4020_0f84;
const RET: u64 = 0x4020_0fec;

fn svc_entry() -> EntryStubs {
    let bytes: Vec<u8> = SVC_ENTRY.iter().flat_map(|w| w.to_le_bytes()).collect();
    let text = TextRanges::new([(0x4020_0000, 0x4030_0000)]);
    stubs(Arch::Aarch64, &[(AT, &bytes)], text)
}

/// The handler's stack pointer at the call's return.
const SP: u64 = 0x4080_0ef0;

fn cross(s: &EntryStubs, pc: u64, sp_el0: u64, spsr: u64) -> Result<Interrupted, NotCrossed> {
    let mut st = Stack::new(PtrWidth::W8);
    st.put(SP + 232, &[0x7fff_0010, 0x4001_2344, sp_el0, pc, spsr]);
    let at = AtStub {
        sp: SP,
        fp: 0x5555,
        ra: None,
        end: SP + 0x110 + 16,
    };
    let mut read = st.reader();
    cross_risc(s, Arch::Aarch64, s.risc_at(RET), at, &mut read, None)
}

#[test]
fn the_system_call_stub_is_read_for_both_modes() {
    let s = svc_entry();
    let slot = |off| Loc::Slot { off, add: 0 };
    let got: Vec<RiscLayout> = s.risc_at(RET).iter().map(|&(_, l)| l).collect();
    // From EL1 the stack pointer would be the interrupted one (0x110 up); from EL0 it is
    // SP_EL0, saved at 248. x29 is kept across the call (the walk's own); x30 at 240.
    let common = RiscLayout {
        pc: slot(256),
        sp: slot(248),
        fp: Loc::Reg,
        ra: slot(240),
        status: slot(264),
        mode: Some(Mode::User),
    };
    assert_eq!(
        got,
        vec![
            RiscLayout {
                sp: Loc::SpPlus(0x110),
                mode: Some(Mode::Kernel),
                ..common
            },
            common,
        ]
    );
}

#[test]
fn a_system_call_from_el0_continues_in_the_program() {
    let s = svc_entry();
    let i = cross(&s, 0x40_1a2c, 0x7fff_0000, 0).unwrap();
    assert_eq!(
        i,
        Interrupted {
            at: SP,
            ip: 0x40_1a2c,
            sp: 0x7fff_0000,
            fp: 0x5555,
            ra: Some(0x4001_2344),
            user: true,
        }
    );
}

#[test]
fn a_saved_spsr_that_disagrees_or_is_no_mode_is_not_crossed() {
    let s = svc_entry();
    // EL1h in SPSR, a program's pc; an AArch32 mode; a pc off alignment.
    assert_eq!(
        cross(&s, 0x40_1a2c, 0x7fff_0000, 5),
        Err(NotCrossed::NoFrame)
    );
    assert_eq!(
        cross(&s, 0x40_1a2c, 0x7fff_0000, 0x10),
        Err(NotCrossed::NoFrame)
    );
    assert_eq!(
        cross(&s, 0x40_1a2e, 0x7fff_0000, 0),
        Err(NotCrossed::NoFrame)
    );
}

/// The crossing of a sample at `pc` in `svc_entry` (its own first frame: `ELR_EL1`,
/// `SPSR_EL1` and `SP_EL0` read as `elr`, `spsr`, `sp_el0`), on an empty stack at `SP`;
/// how many registers were read.
fn cross_at_sample(
    pc: u64,
    elr: u64,
    spsr: u64,
    sp_el0: u64,
) -> (Result<Interrupted, NotCrossed>, usize) {
    let s = svc_entry();
    let at = AtStub {
        sp: SP,
        fp: 0x5555,
        ra: Some(0x4020_1234),
        end: SP + 0x1000,
    };
    let mut reads = 0;
    let mut sys = |r| {
        reads += 1;
        Some(match r {
            SysReg::TrapPc => elr,
            SysReg::Status => spsr,
            SysReg::UserSp => sp_el0,
            SysReg::Scratch => return None,
        })
    };
    let st = Stack::new(PtrWidth::W8);
    let mut read = st.reader();
    let got = cross_risc(
        &s,
        Arch::Aarch64,
        s.risc_at(pc),
        at,
        &mut read,
        Some(&mut sys),
    );
    (got, reads)
}

#[test]
fn a_sample_at_the_entry_crosses_from_the_system_registers() {
    let s = svc_entry();
    // Nothing saved yet: from EL1 the stack pointer is the walk's own, from EL0 in SP_EL0.
    let kernel = RiscLayout {
        pc: Loc::Sys(SysReg::TrapPc),
        sp: Loc::SpPlus(0),
        fp: Loc::Reg,
        ra: Loc::Reg,
        status: Loc::Sys(SysReg::Status),
        mode: Some(Mode::Kernel),
    };
    let user = RiscLayout {
        sp: Loc::Sys(SysReg::UserSp),
        mode: Some(Mode::User),
        ..kernel
    };
    assert_eq!(s.risc_at(AT), &[(AT, kernel), (AT, user)]);
    // A system call from EL0: ELR_EL1 a program's, SPSR EL0t, its stack pointer in SP_EL0.
    let (i, reads) = cross_at_sample(AT, 0x40_1a2c, 0, 0x7fff_0000);
    assert_eq!(
        i,
        Ok(Interrupted {
            at: SP,
            ip: 0x40_1a2c,
            sp: 0x7fff_0000,
            fp: 0x5555,
            ra: Some(0x4020_1234),
            user: true,
        })
    );
    // Each register read once, for both readings.
    assert_eq!(reads, 3);
    // A trap of EL1h code (an exception in the kernel): the stack being walked goes on.
    let (i, _) = cross_at_sample(AT + 4, 0x4020_2000, 0x3c5, 0x7fff_0000);
    assert_eq!(
        i.map(|i| (i.ip, i.sp, i.user)),
        Ok((0x4020_2000, SP, false))
    );
}

#[test]
fn a_spsr_at_the_sample_that_disagrees_cuts() {
    // EL1h with a program's pc; EL0t with the kernel's; an AArch32 mode.
    for (elr, spsr) in [(0x40_1a2c, 5), (0x4020_2000, 0), (0x40_1a2c, 0x10)] {
        let (got, _) = cross_at_sample(AT, elr, spsr, 0x7fff_0000);
        assert_eq!(got, Err(NotCrossed::NoFrame), "{elr:#x} {spsr:#x}");
    }
    // At the call's return the registers are not read.
    let (got, reads) = cross_at_sample(RET, 0x40_1a2c, 0, 0x7fff_0000);
    assert_eq!((got, reads), (Err(NotCrossed::Unreadable), 0));
}

#[test]
fn interrupts_enabled_end_what_the_system_registers_say() {
    // msr daifclr, #2; mrs x0, elr_el1; eret: after the msr a nested interrupt may have
    // overwritten ELR_EL1.
    let words = [0xd503_42ffu32, 0xd538_4020, 0xd69f_03e0];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let s = stubs(
        Arch::Aarch64,
        &[(0x4020_0000, &bytes)],
        TextRanges::unknown(),
    );
    assert_eq!(s.risc_at(0x4020_0000).len(), 2);
    assert!(s.risc_at(0x4020_0004).is_empty());
    // The same code with no sign of a trap entry (a plain function): no layout at all.
    let bytes: Vec<u8> = [0xd503_201fu32, 0xd65f_03c0]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let s = stubs(
        Arch::Aarch64,
        &[(0x4020_0000, &bytes)],
        TextRanges::unknown(),
    );
    assert!(s.is_empty());
}
