//! Both layouts on fake stacks: a system call's kernel frames, the trap entry's record, the
//! user program's frames on a stack far below.

use super::*;
use crate::cross::STACK_SPAN;
use kern_profile_format::Arch;
use std::collections::BTreeMap;

const KE: u64 = frame_marker::KERNEL_ENTRY;

#[derive(Clone, Copy, Debug)]
enum A {
    Riscv64,
    Aarch64,
}

const BOTH: [A; 2] = [A::Riscv64, A::Aarch64];

impl A {
    /// Bytes from the frame pointer down to its record.
    fn below(self) -> u64 {
        match self {
            A::Riscv64 => 16,
            A::Aarch64 => 0,
        }
    }

    fn walk<R>(
        self,
        floor: u64,
        fp: u64,
        depth: usize,
        c: Crossings,
        read: R,
        out: &mut [u64],
    ) -> Walk
    where
        R: FnMut(u64, &mut [u8]) -> bool,
    {
        let arch = match self {
            A::Riscv64 => Arch::Riscv64,
            A::Aarch64 => Arch::Aarch64,
        };
        crate::walk_guest(arch, floor, fp, depth, c, read, out)
    }
}

/// Sparse fake guest memory: words at addresses, everything else unreadable; every read's
/// address is kept.
struct Mem {
    arch: A,
    words: BTreeMap<u64, u64>,
    reads: std::cell::RefCell<Vec<u64>>,
}

impl Mem {
    fn new(arch: A) -> Self {
        Mem {
            arch,
            words: BTreeMap::new(),
            reads: Default::default(),
        }
    }

    /// The record of the frame whose frame pointer is `fp`.
    fn frame(&mut self, fp: u64, saved_fp: u64, ret: u64) {
        let at = fp - self.arch.below();
        self.words.insert(at, saved_fp);
        self.words.insert(at + 8, ret);
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads.borrow_mut().push(addr);
        for (i, chunk) in buf.chunks_mut(8).enumerate() {
            match self.words.get(&(addr + 8 * i as u64)) {
                Some(v) if chunk.len() == 8 => chunk.copy_from_slice(&v.to_le_bytes()),
                _ => return false,
            }
        }
        true
    }

    fn walk(&self, floor: u64, fp: u64, c: Crossings) -> (Vec<u64>, StopReason) {
        let mut out = vec![0; 32];
        let r = self
            .arch
            .walk(floor, fp, 32, c, |a, b| self.read(a, b), &mut out);
        out.truncate(r.frames);
        (out, r.stop)
    }
}

/// The example kernels' layout: kernel stack at 0x8700_0000, user stack at 0x84ff_0000.
const KSTACK: u64 = 0x8702_0000;
const USTACK: u64 = 0x84ff_f000;

/// sys_work's caller, syscall_dispatch (fp KSTACK), the trap entry's record (fp KSTACK + 0x40)
/// of the user's fp and pc, the user program's two frames.
fn syscall(arch: A) -> Mem {
    let mut m = Mem::new(arch);
    m.frame(KSTACK, KSTACK + 0x40, 0x8000_1100); // into trap_vector
    m.frame(KSTACK + 0x40, USTACK, 0x8400_0204); // the user's fp, its pc (ecall)
    m.frame(USTACK, USTACK + 0x20, 0x8400_0100); // into run
    m.frame(USTACK + 0x20, 0, 0x8400_0010); // into _start
    m
}

#[test]
fn a_system_call_goes_on_into_the_user_stack_below() {
    for arch in BOTH {
        let m = syscall(arch);
        let (frames, stop) = m.walk(KSTACK - 0x30, KSTACK, Crossings::ALL);
        assert_eq!(
            frames,
            [0x8000_1100, KE, 0x8400_0204, 0x8400_0100, 0x8400_0010],
            "{arch:?}"
        );
        assert_eq!(stop, StopReason::NullFramePointer, "{arch:?}");
        // Without crossings, or in a user-mode sample, the jump down ends the walk.
        let plain = [0x8000_1100, 0x8400_0204];
        for c in [
            Crossings::default(),
            Crossings {
                user_mode: true,
                ..Crossings::ALL
            },
            Crossings {
                stack_switches: 0,
                ..Crossings::ALL
            },
        ] {
            let (frames, stop) = m.walk(KSTACK - 0x30, KSTACK, c);
            assert_eq!(
                (&frames[..], stop),
                (&plain[..], StopReason::NotIncreasing),
                "{arch:?}"
            );
        }
    }
}

#[test]
fn a_pointer_authentication_signature_is_stripped_on_both_sides() {
    let arch = A::Aarch64;
    let mut m = syscall(arch);
    m.frame(KSTACK, KSTACK + 0x40, 0x002a_0000_8000_1100);
    m.frame(USTACK, USTACK + 0x20, 0x0013_0000_8400_0100);
    let (frames, _) = m.walk(KSTACK - arch.below(), KSTACK, Crossings::ALL);
    assert_eq!(
        frames,
        [0x8000_1100, KE, 0x8400_0204, 0x8400_0100, 0x8400_0010]
    );
}

#[test]
fn each_side_has_its_own_loop_guard() {
    for arch in BOTH {
        // A loop on the kernel side: back down to its own record, on the same stack... which
        // is a jump down, taken as a crossing at most `stack_switches` times.
        let mut m = Mem::new(arch);
        m.frame(KSTACK, KSTACK + 0x40, 0xa);
        m.frame(KSTACK + 0x40, KSTACK, 0xb);
        let (frames, stop) = m.walk(KSTACK - arch.below(), KSTACK, Crossings::ALL);
        assert_eq!(stop, StopReason::NotIncreasing, "{arch:?}");
        assert_eq!(frames, [0xa, KE, 0xb, 0xa, KE, 0xb, 0xa, 0xb], "{arch:?}");
        // A loop on the user side: the crossing's fresh guard still stops it, after the
        // crossings left.
        let mut m = syscall(arch);
        m.frame(USTACK + 0x20, USTACK + 0x20, 0x8400_0010);
        let one = Crossings {
            stack_switches: 1,
            ..Crossings::ALL
        };
        let (frames, stop) = m.walk(KSTACK - arch.below(), KSTACK, one);
        assert_eq!(stop, StopReason::NotIncreasing, "{arch:?}");
        assert_eq!(
            frames,
            [0x8000_1100, KE, 0x8400_0204, 0x8400_0100, 0x8400_0010]
        );
        let (frames, stop) = m.walk(KSTACK - arch.below(), KSTACK, Crossings::ALL);
        assert_eq!(stop, StopReason::NotIncreasing, "{arch:?}");
        assert_eq!(frames[3..], [0x8400_0100, KE, 0x8400_0010, 0x8400_0010]);
        // A user frame back into the kernel's stack (above): upwards, but off the user
        // stack's span.
        let mut m = syscall(arch);
        m.frame(USTACK + 0x20, KSTACK, 0x8400_0010);
        let (frames, stop) = m.walk(KSTACK - arch.below(), KSTACK, Crossings::ALL);
        assert_eq!(stop, StopReason::OffStack, "{arch:?}");
        assert_eq!(frames.len(), 5, "{arch:?}");
    }
}

#[test]
fn nothing_is_read_beyond_each_stacks_span() {
    for arch in BOTH {
        let below = arch.below();
        // Kernel side: records every 64 KiB upwards from the stack pointer.
        let mut m = Mem::new(arch);
        let step = 64 << 10;
        for k in 0..4u64 {
            m.frame(KSTACK + k * step, KSTACK + (k + 1) * step, 0x100 + k);
        }
        let (frames, stop) = m.walk(KSTACK - below, KSTACK, Crossings::ALL);
        assert_eq!(stop, StopReason::OffStack, "{arch:?}");
        assert_eq!(frames, [0x100, 0x101], "{arch:?}");
        let last = m.reads.borrow().iter().copied().max().unwrap();
        assert!(last + 16 <= KSTACK - below + STACK_SPAN, "{arch:?}");
        let unbounded = Crossings {
            stack_span: 0,
            ..Crossings::ALL
        };
        let (frames, _) = m.walk(KSTACK - below, KSTACK, unbounded);
        assert_eq!(frames.len(), 4, "{arch:?}");
        // User side: its span starts at its first record.
        let mut m = syscall(arch);
        m.frame(USTACK + 0x20, USTACK + STACK_SPAN, 0x8400_0010);
        m.frame(USTACK + STACK_SPAN, 0, 0x8400_0000);
        m.reads.borrow_mut().clear();
        let (frames, stop) = m.walk(KSTACK - 0x30, KSTACK, Crossings::ALL);
        assert_eq!(stop, StopReason::OffStack, "{arch:?}");
        assert_eq!(frames.len(), 5, "{arch:?}");
        assert!(m
            .reads
            .borrow()
            .iter()
            .all(|&a| a < USTACK + STACK_SPAN - below || a >= KSTACK - 0x30));
    }
}

#[test]
fn markers_respect_the_depth_cap() {
    for arch in BOTH {
        let m = syscall(arch);
        for depth in 0..6 {
            let mut out = vec![0; depth];
            let r = arch.walk(
                KSTACK - arch.below(),
                KSTACK,
                32,
                Crossings::ALL,
                |a, b| m.read(a, b),
                &mut out,
            );
            assert!(r.frames <= depth);
            if depth < 5 {
                assert_eq!(r.stop, StopReason::DepthLimit, "{arch:?} {depth}");
            }
        }
    }
}

/// Random garbage as memory and registers: never a panic, never more frames than room, at
/// most one read per frame (and riscv64's one GCC leaf record), none wrapping around.
#[test]
fn garbage_never_panics_and_stays_short() {
    let mut rng = fastrand::Rng::with_seed(7);
    for arch in BOTH {
        for seed in 0..3000u64 {
            let depth = rng.usize(0..40);
            let mut out = vec![0; rng.usize(0..50)];
            let near = rng.u64(0x8000_0000..0x8800_0000) & !7;
            let fp = match seed % 4 {
                0 => rng.u64(..),
                1 => near,
                2 => u64::MAX - rng.u64(0..64),
                _ => rng.u64(0..0x1_0000),
            };
            let floor = match seed % 3 {
                0 => 0,
                1 => fp.saturating_sub(rng.u64(0..0x100)),
                _ => rng.u64(..),
            };
            let crossings = Crossings {
                stack_switches: rng.u8(0..4),
                user_mode: rng.bool(),
                stack_span: [0, STACK_SPAN, rng.u64(..)][rng.usize(0..3)],
                ..Crossings::ALL
            };
            let mut reads = 0usize;
            let mut fill = fastrand::Rng::with_seed(seed);
            let r = arch.walk(
                floor,
                fp,
                depth,
                crossings,
                |addr, buf| {
                    reads += 1;
                    assert!(addr.checked_add(buf.len() as u64 - 1).is_some());
                    for chunk in buf.chunks_mut(8) {
                        // Words near the last frame pointer, or anything.
                        let v = match fill.u8(0..4) {
                            0 => fill.u64(..),
                            1 => 0,
                            _ => near.wrapping_add(fill.u64(0..0x2000)).wrapping_sub(0x1000) & !7,
                        };
                        chunk.copy_from_slice(&v.to_le_bytes()[..chunk.len()]);
                    }
                    !fill.u8(..).is_multiple_of(16)
                },
                &mut out,
            );
            let room = depth.min(out.len());
            assert!(r.frames <= room);
            assert!(reads <= room + 1, "{arch:?} {seed}");
            assert!(out[..r.frames].iter().all(|&a| a != 0));
        }
    }
}

/// Linux arm64: a system call's kernel chain ends in the final record `{0, 0}` inside the
/// task's `pt_regs` (at 304), whose x29, sp, pc and pstate hold the user context.
fn linux_arm64_syscall(pstate: u64, user_sp: u64) -> Mem {
    const KTOP: u64 = 0xffff_8000_0a00_4000;
    const USER_FP: u64 = 0x0000_ffff_f000_0100;
    let regs = KTOP - 336;
    let mut m = Mem::new(A::Aarch64);
    m.frame(KTOP - 0x200, KTOP - 0x100, 0xffff_8000_0801_0010); // into el0_svc
    m.frame(KTOP - 0x100, regs + 304, 0xffff_8000_0801_0020); // into el0t_64_sync
    m.frame(regs + 304, 0, 0); // the final record
    for (i, v) in [USER_FP, 0x40_0a00, user_sp, 0x40_1234, pstate]
        .into_iter()
        .enumerate()
    {
        m.words.insert(regs + 232 + 8 * i as u64, v); // x29, x30, sp, pc, pstate
    }
    m.frame(USER_FP, 0, 0x40_0100); // the user's one frame record
    m
}

#[test]
fn a_linux_arm64_entry_from_user_space_goes_on_into_the_user_stack() {
    let m = linux_arm64_syscall(0x6000_0000, 0x0000_ffff_f000_0000);
    let floor = 0xffff_8000_0a00_4000 - 0x210;
    let (frames, stop) = m.walk(floor, 0xffff_8000_0a00_3e00, Crossings::ALL);
    assert_eq!(
        frames,
        [
            0xffff_8000_0801_0010,
            0xffff_8000_0801_0020,
            KE,
            0x40_1234,
            0x40_0100
        ]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
    // A user-mode sample, or no crossings: the final record ends the walk.
    for c in [
        Crossings::default(),
        Crossings {
            user_mode: true,
            ..Crossings::ALL
        },
    ] {
        let (frames, stop) = m.walk(floor, 0xffff_8000_0a00_3e00, c);
        assert_eq!(frames.len(), 2);
        assert_eq!(stop, StopReason::NullReturnAddress);
    }
}

#[test]
fn a_final_record_without_a_user_context_ends_the_walk() {
    let floor = 0xffff_8000_0a00_4000 - 0x210;
    // EL1h (an entry from the kernel), or a kernel stack pointer: no user context.
    for m in [
        linux_arm64_syscall(0x6000_0005, 0x0000_ffff_f000_0000),
        linux_arm64_syscall(0x6000_0000, 0xffff_8000_0a00_3000),
        linux_arm64_syscall(0x6000_0000, 0),
    ] {
        let (frames, stop) = m.walk(floor, 0xffff_8000_0a00_3e00, Crossings::ALL);
        assert_eq!(frames.len(), 2);
        assert_eq!(stop, StopReason::NullReturnAddress);
    }
    // riscv64 has no such registers: its final record ends the walk.
    let mut m = Mem::new(A::Riscv64);
    m.frame(0x8702_0000, 0, 0);
    let (frames, stop) = m.walk(0x8701_0000, 0x8702_0000, Crossings::ALL);
    assert_eq!((frames.len(), stop), (0, StopReason::NullReturnAddress));
}

const SW: u64 = frame_marker::STACK_SWITCH;
/// A Linux arm64 interrupt stack (16 KiB, aligned) and a task stack far above it.
const IRQ_STACK: u64 = 0xffff_8000_0800_0000;
const TASK: u64 = 0xffff_8000_0a00_3e00;

/// The handler's two frames on the interrupt stack, the top one linking up to the task
/// stack's record that `call_on_irq_stack` made, then the task's own frames.
fn linux_arm64_interrupt() -> Mem {
    let mut m = Mem::new(A::Aarch64);
    m.frame(
        IRQ_STACK + 0x3f80,
        IRQ_STACK + 0x3fc0,
        0xffff_8000_0801_0100,
    ); // into gic_handle_irq
    m.frame(IRQ_STACK + 0x3fc0, TASK, 0xffff_8000_0801_0200); // into call_on_irq_stack
    m.frame(TASK, TASK + 0x40, 0xffff_8000_0801_0300); // into do_interrupt_handler
    m.frame(TASK + 0x40, 0, 0xffff_8000_0801_0400);
    m
}

/// Linux arm64: the top record of an interrupt stack leads up, beyond the stack's span, to
/// the task stack the interrupt came in on: a stack switch, and the walk goes on there.
#[test]
fn a_linux_arm64_interrupt_stack_leads_up_to_the_task_stack() {
    let m = linux_arm64_interrupt();
    let (frames, stop) = m.walk(IRQ_STACK + 0x3f70, IRQ_STACK + 0x3f80, Crossings::ALL);
    assert_eq!(
        frames,
        [
            0xffff_8000_0801_0100,
            0xffff_8000_0801_0200,
            SW,
            0xffff_8000_0801_0300,
            0xffff_8000_0801_0400
        ]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
}

/// Only the top record of the interrupt stack's block leads up; one lower down, on
/// riscv64 (no interrupt stacks known), or in a user-mode sample stays a stop.
#[test]
fn upward_jumps_elsewhere_stay_off_the_stack() {
    let mut m = linux_arm64_interrupt();
    m.frame(
        IRQ_STACK + 0x2f80,
        IRQ_STACK + 0x3000,
        0xffff_8000_0801_0200,
    );
    m.frame(IRQ_STACK + 0x3000, TASK, 0xffff_8000_0801_0250); // 4 KiB below the top
    let (frames, stop) = m.walk(IRQ_STACK + 0x2f70, IRQ_STACK + 0x2f80, Crossings::ALL);
    assert_eq!(
        (frames, stop),
        (
            vec![0xffff_8000_0801_0200, 0xffff_8000_0801_0250],
            StopReason::OffStack
        )
    );
    let mut m = Mem::new(A::Aarch64);
    m.frame(IRQ_STACK + 0x1f80, TASK, 0xffff_8000_0801_0100);
    m.frame(TASK, 0, 0xffff_8000_0801_0300);
    let (frames, stop) = m.walk(IRQ_STACK + 0x1f70, IRQ_STACK + 0x1f80, Crossings::ALL);
    assert_eq!(
        (frames, stop),
        (vec![0xffff_8000_0801_0100], StopReason::OffStack)
    );
    let m = linux_arm64_interrupt();
    let user = Crossings {
        user_mode: true,
        ..Crossings::ALL
    };
    let (frames, stop) = m.walk(IRQ_STACK + 0x3f70, IRQ_STACK + 0x3f80, user);
    assert_eq!(stop, StopReason::OffStack, "{frames:x?}");
    let mut m = Mem::new(A::Riscv64);
    m.frame(IRQ_STACK + 0x3fc0, TASK, 0x8000_0200);
    m.frame(TASK, 0, 0x8000_0300);
    let (frames, stop) = m.walk(IRQ_STACK + 0x3f90, IRQ_STACK + 0x3fc0, Crossings::ALL);
    assert_eq!((frames, stop), (vec![0x8000_0200], StopReason::OffStack));
}

/// A classic start (xv6, V6 Unix): the program's first record holds the frame pointer the
/// kernel left (`kernel_fp`) and the fake return address of all ones.
fn classic_syscall(arch: A, kernel_fp: u64) -> Mem {
    let mut m = syscall(arch);
    m.frame(USTACK + 0x20, USTACK + 0x40, 0x8400_0010); // into _start
    m.frame(USTACK + 0x40, kernel_fp, u64::MAX); // _start's record
    m.frame(kernel_fp, kernel_fp + 0x40, 0x8000_2000); // the kernel's own frames
    m
}

#[test]
fn a_fake_return_address_ends_the_walk_at_the_programs_first_frame() {
    for arch in BOTH {
        // The kernel's frame pointer above the kernel stack (off the user stack's span),
        // right above the user stack (on it), below the user stack (a jump down that would
        // be one more crossing).
        for kernel_fp in [KSTACK + 0x1000, USTACK + 0x800, 0x8010_0000] {
            let m = classic_syscall(arch, kernel_fp);
            let (frames, stop) = m.walk(KSTACK - arch.below(), KSTACK, Crossings::ALL);
            assert_eq!(
                (&frames[..], stop),
                (
                    &[0x8000_1100, KE, 0x8400_0204, 0x8400_0100, 0x8400_0010][..],
                    StopReason::NullReturnAddress
                ),
                "{arch:?} {kernel_fp:#x}"
            );
            // The kernel's frame pointer is never followed.
            let kernel_record = kernel_fp - arch.below();
            assert!(!m.reads.borrow().contains(&kernel_record), "{arch:?}");
            // A user-mode sample in the program ends there too.
            let user = Crossings {
                user_mode: true,
                ..Crossings::ALL
            };
            let (frames, stop) = m.walk(USTACK - 0x10 - arch.below(), USTACK, user);
            assert_eq!(
                (&frames[..], stop),
                (
                    &[0x8400_0100, 0x8400_0010][..],
                    StopReason::NullReturnAddress
                ),
                "{arch:?} {kernel_fp:#x}"
            );
        }
    }
}

#[test]
fn past_a_final_records_user_registers_nothing_is_crossed() {
    // The user's frame pointer leads down off the user stack (garbage, not an entry): a
    // walk in user context takes no second crossing.
    let mut m = linux_arm64_syscall(0x6000_0000, 0x0000_ffff_f000_0000);
    m.frame(0x0000_ffff_f000_0100, 0x0000_ffff_e000_0000, 0x40_0100);
    m.frame(0x0000_ffff_e000_0000, 0, 0x40_0200);
    let floor = 0xffff_8000_0a00_4000 - 0x210;
    let (frames, stop) = m.walk(floor, 0xffff_8000_0a00_3e00, Crossings::ALL);
    assert_eq!(frames[2..], [KE, 0x40_1234, 0x40_0100]);
    assert_eq!(stop, StopReason::NotIncreasing);
}
