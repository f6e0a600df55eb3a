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
    cross_risc(s, Arch::Riscv64, s.risc_at(RET), at, &mut st.reader())
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
    // Before `sepc` is saved the pc is in the CSR alone: no crossing there (the walk hands
    // over); right after, there is.
    assert!(s.risc_at(AT).is_empty());
    assert!(s.risc_at(AT + 0x30).is_empty());
    assert_eq!(s.risc_at(AT + 0x32).len(), 1);
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
    let got = cross_risc(s, Arch::Riscv64, s.risc_at(RET), at, &mut read);
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
    let i = cross_risc(&s, Arch::Riscv64, &layouts, at, &mut read).unwrap();
    assert_eq!((i.ip, i.sp, i.ra), (0x8020_2002, SP + 272, None));
    assert_eq!(reads.first(), Some(&(SP + 16)));
    assert!(reads.iter().all(|&a| a >= SP + 16), "{reads:x?}");
}
