//! The stubs of the example kernels built with `bare_entries` (their bytes as the linker
//! placed them, `objdump -d target/examples/nofp/kernel.elf`), over fake stacks laid out as
//! the CPU and the stub leave them.

use super::*;
use std::collections::BTreeMap;

/// i386 `syscall_entry` at 0x1004d2, up to the return address of its call (0x1004f3).
const I386_SYSCALL: &[u8] = &[
    0x55, 0x1e, 0x06, 0x57, 0x56, 0x52, 0x51, 0x53, 0x50, 0x66, 0xb8, 0x10, 0x00, 0x66, 0x8e, 0xd8,
    0x66, 0x8e, 0xc0, 0x89, 0xe0, 0x83, 0xe4, 0xf0, 0x83, 0xec, 0x0c, 0x50, 0xe8, 0x7d, 0x39, 0x00,
    0x00, 0x5c, 0x89, 0x04, 0x24, 0x58, 0x5b, 0x59, 0x5a, 0x5e, 0x5f, 0x07, 0x1f, 0x5d, 0xcf,
];
const I386_SYSCALL_AT: u64 = 0x1004d2;
const I386_SYSCALL_RET: u64 = 0x1004f3;

/// x86_64 `isr_timer` at 0xffffffff80107e32 (return address 0xffffffff80107e44).
const X86_64_TIMER: &[u8] = &[
    0x50, 0x51, 0x52, 0x56, 0x57, 0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, 0xe8, 0xac, 0x2d,
    0x00, 0x00, 0xb0, 0x20, 0xe6, 0x20, 0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x5f, 0x5e,
    0x5a, 0x59, 0x58, 0x48, 0xcf,
];
const X86_64_TIMER_AT: u64 = 0xffff_ffff_8010_7e32;
const X86_64_TIMER_RET: u64 = 0xffff_ffff_8010_7e44;

/// Code at fixed addresses.
fn code<'a>(parts: &'a [(u64, &'a [u8])]) -> impl FnMut(u64, &mut [u8]) -> bool + 'a {
    move |addr, buf| {
        parts.iter().any(|&(base, bytes)| {
            let Some(off) = addr.checked_sub(base).map(|o| o as usize) else {
                return false;
            };
            match bytes.get(off..off + buf.len()) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                None => false,
            }
        })
    }
}

fn stubs(arch: Arch, parts: &[(u64, &[u8])], text: TextRanges) -> EntryStubs {
    EntryStubs::read(arch, parts.iter().map(|p| p.0), code(parts), text)
}

/// A fake stack: words of `width` at addresses.
struct Stack {
    words: BTreeMap<u64, u64>,
    width: PtrWidth,
}

impl Stack {
    fn new(width: PtrWidth) -> Self {
        Stack {
            words: BTreeMap::new(),
            width,
        }
    }

    fn put(&mut self, at: u64, words: &[u64]) {
        for (k, &w) in words.iter().enumerate() {
            self.words
                .insert(at + k as u64 * self.width.bytes() as u64, w);
        }
    }

    fn reader(&self) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        move |addr, buf| {
            let w = self.width.bytes();
            if buf.len() != w {
                return false;
            }
            match self.words.get(&addr) {
                Some(v) => {
                    buf.copy_from_slice(&v.to_le_bytes()[..w]);
                    true
                }
                None => false,
            }
        }
    }
}

#[test]
fn the_i386_system_call_stub_finds_the_frame_through_the_pointer_it_pushed() {
    let s = stubs(
        Arch::I386,
        &[(I386_SYSCALL_AT, I386_SYSCALL)],
        TextRanges::unknown(),
    );
    // Nine pushes, then `mov eax, esp; and esp, -16; sub esp, 12; push eax`: the frame is
    // 36 bytes above the pointer the handler got.
    let at_ret = s.at(I386_SYSCALL_RET).unwrap();
    assert_eq!(at_ret.frame, FrameAt::Saved { slot: 0, add: 36 });
    assert_eq!(at_ret.fp, FpAt::Unchanged);
    // At its first instruction the frame is at the stack pointer, after three pushes 12 up.
    assert_eq!(s.at(I386_SYSCALL_AT).unwrap().frame, FrameAt::Sp(0));
    assert_eq!(s.at(I386_SYSCALL_AT + 3).unwrap().frame, FrameAt::Sp(12));

    let (st, at, e) = i386_syscall_stack(&[0x400_0123, 0x1b, 0x202, 0x4ff_fff0, 0x23], 0x4ff_fff8);
    let i = cross_x86(&s, at_ret, at, PtrWidth::W4, 8, &mut st.reader()).unwrap();
    assert_eq!(
        i,
        Interrupted {
            at: e,
            ip: 0x400_0123,
            sp: 0x4ff_fff0,
            fp: 0x4ff_fff8,
            ra: None,
            user: true
        }
    );
}

/// The stack `int 0x80` from ring 3 and the i386 system-call stub leave: `frame` (the CPU's
/// words) at the top of the kernel stack, the stub's nine pushes, the stack aligned, and the
/// pointer it pushed for its handler; where the walk stands at the stub's call return (with
/// `fp`), and where the frame is.
fn i386_syscall_stack(frame: &[u64], fp: u64) -> (Stack, AtStub, u64) {
    let top = 0x600_0000u64;
    let e = top - 20;
    let pointer = e - 36;
    let handler_sp = ((pointer & !15) - 12) - 4;
    let mut st = Stack::new(PtrWidth::W4);
    st.put(e, frame);
    st.put(handler_sp, &[pointer]);
    let at = AtStub {
        sp: handler_sp,
        fp,
        ra: None,
        end: top + 0x1000,
    };
    (st, at, e)
}

#[test]
fn a_frame_the_cpu_could_not_have_pushed_is_not_crossed() {
    let s = stubs(
        Arch::I386,
        &[(I386_SYSCALL_AT, I386_SYSCALL)],
        TextRanges::unknown(),
    );
    let at_ret = s.at(I386_SYSCALL_RET).unwrap();
    for lie in [
        [0x400_0123, 0x1b, 0x8202, 0x4ff_fff0, 0x23], // flags with bit 15
        [0x400_0123, 0x1b, 0x200, 0x4ff_fff0, 0x23],  // flags without bit 1
        [0x400_0123, 0x1a, 0x202, 0x4ff_fff0, 0x23],  // ring 2
        [0x400_0123, 0x1b, 0x202, 0x4ff_fff0, 0x20],  // a ring-0 stack for ring 3
        [0, 0x1b, 0x202, 0x4ff_fff0, 0x23],           // no pc
        [0x400_0123, 0x10, 0x202, 0x4ff_fff0, 0x23],  // not the kernel's selector (8)
    ] {
        let (st, at, _) = i386_syscall_stack(&lie, 0);
        let got = cross_x86(&s, at_ret, at, PtrWidth::W4, 8, &mut st.reader());
        assert_eq!(got, Err(NotCrossed::NoFrame), "{lie:x?}");
    }
    // The pointer the stub pushed leads off the stack, or nowhere readable.
    let (mut st, at, _) = i386_syscall_stack(&[], 0);
    st.put(at.sp, &[0x10]);
    let got = cross_x86(&s, at_ret, at, PtrWidth::W4, 8, &mut st.reader());
    assert_eq!(got, Err(NotCrossed::Unreadable));
}

#[test]
fn the_x86_64_timer_stub_crosses_into_interrupted_kernel_code() {
    let text = TextRanges::new([(0xffff_ffff_8010_0000, 0xffff_ffff_8020_0000)]);
    let s = stubs(Arch::X86_64, &[(X86_64_TIMER_AT, X86_64_TIMER)], text);
    let at_ret = s.at(X86_64_TIMER_RET).unwrap();
    assert_eq!(at_ret.frame, FrameAt::Sp(72));
    let (e, ip) = (0xffff_8000_0001_ff00u64, 0xffff_ffff_8010_1234u64);
    let interrupted_sp = e + 40 + 24;
    let sp = e - 72;
    let at = AtStub {
        sp,
        fp: 7,
        ra: None,
        end: sp + 0x2000,
    };
    let cross = |frame: &[u64]| {
        let mut st = Stack::new(PtrWidth::W8);
        st.put(e, frame);
        let mut read = st.reader();
        cross_x86(&s, at_ret, at, PtrWidth::W8, 8, &mut read)
    };
    let i = cross(&[ip, 0x08, 0x246, interrupted_sp, 0]).unwrap();
    assert_eq!(
        (i.at, i.ip, i.sp, i.fp, i.user),
        (e, ip, interrupted_sp, 7, false)
    );
    // An interrupted pc outside the kernel's text, or a stack pointer below the frame.
    for bad in [
        [0x1234, 0x08, 0x246, interrupted_sp, 0],
        [ip, 0x08, 0x246, e - 8, 0],
    ] {
        assert_eq!(cross(&bad), Err(NotCrossed::NoFrame));
    }
}

#[test]
fn negative_displacements_and_immediates_keep_their_sign_in_32_bit_code() {
    // The frame-pointer build's i386 system-call stub (target/examples/kernel.elf, at
    // 0x100503): `push ebp; mov ebp, esp`, eight pushes, ..., the call, then
    // `lea esp, [ebp - 0x20]` and nine pops before `iretd`.
    let framed: &[u8] = &[
        0x55, 0x89, 0xe5, 0x1e, 0x06, 0x57, 0x56, 0x52, 0x51, 0x53, 0x50, 0x66, 0xb8, 0x10, 0x00,
        0x66, 0x8e, 0xd8, 0x66, 0x8e, 0xc0, 0x89, 0xe0, 0x83, 0xe4, 0xf0, 0x83, 0xec, 0x0c, 0x50,
        0xe8, 0x8a, 0x38, 0x00, 0x00, 0x8d, 0x65, 0xe0, 0x89, 0x04, 0x24, 0x58, 0x5b, 0x59, 0x5a,
        0x5e, 0x5f, 0x07, 0x1f, 0x5d, 0xcf,
    ];
    let s = stubs(Arch::I386, &[(0x100503, framed)], TextRanges::unknown());
    // The caller's frame pointer was pushed before `mov ebp, esp`: 4 below the frame.
    let at_ret = s.at(0x100526).unwrap();
    assert_eq!(at_ret.fp, FpAt::Saved(4));
    // After `lea esp, [ebp - 0x20]`: 36 bytes below the frame; at `iretd`, at it.
    assert_eq!(s.at(0x10052c).unwrap().frame, FrameAt::Sp(36));
    assert_eq!(s.at(0x100535).unwrap().frame, FrameAt::Sp(0));
    // `sub esp, 8` then `add esp, -8` with a 32-bit immediate: 16 below the frame.
    let stub: &[u8] = &[0x83, 0xec, 0x08, 0x81, 0xc4, 0xf8, 0xff, 0xff, 0xff, 0xcf];
    let s = stubs(Arch::I386, &[(0x4000, stub)], TextRanges::unknown());
    assert_eq!(s.at(0x4009).unwrap().frame, FrameAt::Sp(16));
}

#[test]
fn an_error_code_above_the_stub_is_stepped_over() {
    // A page fault's stub pushes nothing of its own: `call` right away.
    let stub: &[u8] = &[0xe8, 0, 0, 0, 0, 0xcf];
    let s = stubs(Arch::I386, &[(0x2000, stub)], TextRanges::unknown());
    let at_ret = s.at(0x2005).unwrap();
    assert_eq!(at_ret.frame, FrameAt::Sp(0));
    let e = 0x9000;
    let mut st = Stack::new(PtrWidth::W4);
    st.put(e, &[0x2, 0x100_0000, 0x08, 0x10202]);
    let i = cross_x86(
        &s,
        at_ret,
        AtStub {
            sp: e,
            fp: 0,
            ra: None,
            end: e + 0x100,
        },
        PtrWidth::W4,
        0,
        &mut st.reader(),
    )
    .unwrap();
    assert_eq!(
        (i.at, i.ip, i.sp, i.user),
        (e + 4, 0x100_0000, e + 16, false)
    );
}

#[test]
fn per_vector_stubs_jump_to_common_code() {
    // push 0; push 3; jmp 0x1100 / 0x1100: mov eax, esp; and esp, -16; sub esp, 12;
    // push eax; call.
    let vector: &[u8] = &[0x6a, 0x00, 0x6a, 0x03, 0xe9, 0xf7, 0x00, 0x00, 0x00];
    let common: &[u8] = &[
        0x89, 0xe0, 0x83, 0xe4, 0xf0, 0x83, 0xec, 0x0c, 0x50, 0xe8, 0, 0, 0, 0,
    ];
    let parts = [(0x1000, vector), (0x1100, common)];
    let s = EntryStubs::read(Arch::I386, [0x1000], code(&parts), TextRanges::unknown());
    assert_eq!(
        s.at(0x1100 + 14).unwrap().frame,
        FrameAt::Saved { slot: 0, add: 8 }
    );
    // Two vectors that reach the common code with different pushes leave it no layout.
    let other: &[u8] = &[0x6a, 0x03, 0xe9, 0xf9, 0x00, 0x00, 0x00];
    let parts = [(0x1000, vector), (0x1100, common), (0x1005, other)];
    let s = EntryStubs::read(
        Arch::I386,
        [0x1000, 0x1005],
        code(&parts),
        TextRanges::unknown(),
    );
    assert_eq!(s.at(0x1100 + 14), None);
    assert!(s.at(0x1000).is_some());
}

#[test]
fn reading_is_bounded_and_stops_where_the_stack_is_lost() {
    // jmp $ forever; a conditional branch; an unknown move of the stack pointer.
    for (bytes, arch) in [
        (&[0xeb, 0xfe][..], Arch::I386),
        (&[0x50, 0x74, 0x00, 0xe8, 0, 0, 0, 0][..], Arch::I386),
        (&[0x50, 0x8b, 0x24, 0x24, 0xe8, 0, 0, 0, 0][..], Arch::I386),
        (&[0x48, 0x89, 0xc4, 0xe8, 0, 0, 0, 0][..], Arch::X86_64),
    ] {
        let s = stubs(arch, &[(0x1000, bytes)], TextRanges::unknown());
        assert!(s.at(0x1000 + bytes.len() as u64).is_none(), "{bytes:x?}");
    }
    // Garbage and nothing at all.
    let mut rng = fastrand::Rng::with_seed(38);
    for _ in 0..2000 {
        let bytes: Vec<u8> = (0..rng.usize(0..64)).map(|_| rng.u8(..)).collect();
        let arch = if rng.bool() { Arch::I386 } else { Arch::X86_64 };
        let _ = stubs(arch, &[(0x1000, &bytes)], TextRanges::unknown());
    }
    assert!(stubs(
        Arch::Riscv64,
        &[(0x1000, &[0x13, 0, 0, 0])],
        TextRanges::unknown()
    )
    .is_empty());
}

#[test]
fn the_frame_pointer_a_stub_pushed_before_writing_it_is_found() {
    // push ebp; mov ebp, esp; push eax; call: the interrupted EBP is 4 below the frame.
    let stub: &[u8] = &[0x55, 0x89, 0xe5, 0x50, 0xe8, 0, 0, 0, 0];
    let s = stubs(Arch::I386, &[(0x3000, stub)], TextRanges::unknown());
    let l = s.at(0x3009).unwrap();
    assert_eq!((l.frame, l.fp), (FrameAt::Sp(8), FpAt::Saved(4)));
    // mov ebp, 0 before any push: lost.
    let stub: &[u8] = &[0xbd, 0, 0, 0, 0, 0xe8, 0, 0, 0, 0];
    let s = stubs(Arch::I386, &[(0x3000, stub)], TextRanges::unknown());
    assert_eq!(s.at(0x300a).unwrap().fp, FpAt::Lost);
}

#[test]
fn the_index_of_risc_layouts_finds_what_a_search_of_them_finds() {
    // Layouts at addresses close together, far apart, and colliding in a small index; one
    // or two at an address; against the sorted layouts searched in turn.
    let mut rng = fastrand::Rng::with_seed(7);
    let l = |k: i64| RiscLayout {
        pc: Loc::Slot { off: k, add: 0 },
        sp: Loc::SpPlus(k),
        fp: Loc::Reg,
        ra: Loc::Lost,
        status: Loc::Lost,
        mode: None,
    };
    for n in [0usize, 1, 2, 3, 7, 64, 1000] {
        let mut risc: Vec<(u64, RiscLayout)> = Vec::new();
        for k in 0..n {
            let a = match rng.u8(..3) {
                0 => 0x8020_0000 + 2 * k as u64,
                1 => rng.u64(..),
                _ => (k as u64) << 40,
            };
            risc.push((a, l(0)));
            if rng.bool() {
                risc.push((a, l(8)));
            }
        }
        risc.sort_unstable();
        risc.dedup();
        let risc = keep_at_most(risc, MAX_RISC_AT);
        let s = EntryStubs {
            risc_index: risc_index(&risc),
            risc: risc.clone(),
            ..Default::default()
        };
        let search = |addr: u64| -> Vec<(u64, RiscLayout)> {
            risc.iter().filter(|&&(a, _)| a == addr).copied().collect()
        };
        let probes = risc
            .iter()
            .flat_map(|&(a, _)| [a, a.wrapping_add(1), a.wrapping_sub(2)])
            .chain((0..200).map(|_| rng.u64(..)))
            .chain([0, u64::MAX]);
        for a in probes {
            assert_eq!(s.risc_at(a), &search(a)[..], "{a:#x} of {n}");
            assert_eq!(s.covers(a), !search(a).is_empty());
        }
    }
}

mod aarch64;
mod riscv64;

/// A `SYSCALL` entry as Linux and Redox write theirs: `swapgs; mov gs:[0x10], rsp;
/// mov rsp, gs:[0x8]` (the kernel stack), then the interrupt-shaped frame `push 0x23;
/// push gs:[0x10]; push r11; push 0x2b; push rcx`, then `push rbp; push rax; call`.
const X86_64_SYSCALL: &[u8] = &[
    0x0f, 0x01, 0xf8, 0x65, 0x48, 0x89, 0x24, 0x25, 0x10, 0x00, 0x00, 0x00, 0x65, 0x48, 0x8b, 0x24,
    0x25, 0x08, 0x00, 0x00, 0x00, 0x6a, 0x23, 0x65, 0xff, 0x34, 0x25, 0x10, 0x00, 0x00, 0x00, 0x41,
    0x53, 0x6a, 0x2b, 0x51, 0x55, 0x50, 0xe8, 0x00, 0x00, 0x00, 0x00,
];

#[test]
fn a_syscall_stub_that_switches_stacks_is_crossed_by_the_frame_it_pushed() {
    let base = 0xffff_ffff_8010_0000u64;
    let s = stubs(
        Arch::X86_64,
        &[(base, X86_64_SYSCALL)],
        TextRanges::unknown(),
    );
    // Once the stack is switched and until the five words of the frame are pushed, no
    // layout.
    for at in [0x15, 0x1f, 0x23] {
        assert_eq!(s.at(base + at), None, "{at:#x}");
    }
    assert_eq!(
        s.at(base + 0x24),
        Some(Layout {
            frame: FrameAt::Sp(0),
            fp: FpAt::Unchanged
        })
    );
    let l = s.at(base + 0x2b).unwrap();
    assert_eq!((l.frame, l.fp), (FrameAt::Sp(16), FpAt::Unchanged));
    // With `mov rbp, rsp` before the call, the user's rbp is the word below the frame.
    let mut framed = X86_64_SYSCALL[..0x26].to_vec();
    framed.extend_from_slice(&[0x48, 0x89, 0xe5]);
    framed.extend_from_slice(&X86_64_SYSCALL[0x26..]);
    let s = stubs(Arch::X86_64, &[(base, &framed)], TextRanges::unknown());
    let at_ret = s.at(base + 0x2e).unwrap();
    assert_eq!((at_ret.frame, at_ret.fp), (FrameAt::Sp(16), FpAt::Saved(8)));
    let (top, user_ip, user_sp, user_fp) = (
        0xffff_8000_0002_0000u64,
        0x40_1234u64,
        0x7fff_f000u64,
        0x7fff_f100u64,
    );
    let sp = top - 56;
    let cross = |frame: &[u64]| {
        let mut st = Stack::new(PtrWidth::W8);
        st.put(sp, &[0x1, user_fp]);
        st.put(top - 40, frame);
        let at = AtStub {
            sp,
            fp: 0,
            ra: None,
            end: top,
        };
        let mut read = st.reader();
        cross_x86(&s, at_ret, at, PtrWidth::W8, 8, &mut read)
    };
    let i = cross(&[user_ip, 0x2b, 0x246, user_sp, 0x23]).unwrap();
    assert_eq!(
        (i.at, i.ip, i.sp, i.fp, i.user),
        (top - 40, user_ip, user_sp, user_fp, true)
    );
    // Five words that are not a frame (a ring-0 selector with a user pc, flags without bit
    // 1): not crossed.
    for bad in [
        [user_ip, 0x08, 0x246, user_sp, 0x10],
        [user_ip, 0x2b, 0x244, user_sp, 0x23],
    ] {
        assert_eq!(cross(&bad), Err(NotCrossed::NoFrame));
    }
    // An `and rsp, -16` after the switch loses the new stack's top: no layout.
    let mut aligned = X86_64_SYSCALL[..0x15].to_vec();
    aligned.extend_from_slice(&[0x48, 0x83, 0xe4, 0xf0]);
    aligned.extend_from_slice(&X86_64_SYSCALL[0x15..]);
    let s = stubs(Arch::X86_64, &[(base, &aligned)], TextRanges::unknown());
    assert_eq!(s.at(base + 0x2f), None);
}
