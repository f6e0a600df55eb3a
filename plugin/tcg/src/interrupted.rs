//! `trigger=interrupt`: the interrupted context, seen from QEMU's discontinuity callback.
//!
//! QEMU calls it once the vCPU is ready to run the handler: the PC is the vector, and the
//! registers are the handler's at its first instruction. The frame-pointer and return-address
//! registers still hold the interrupted code's values on every architecture (no entry code has
//! run), so the walk needs only the interrupted stack pointer and privilege level back, and
//! the interrupted PC, which QEMU passes (`from_pc`):
//! - x86: the CPU pushed `[error code,] EIP/RIP, CS, EFLAGS[, ESP/RSP, SS]` at the new stack
//!   pointer; the interrupted privilege is that CS's, the interrupted stack pointer the pushed
//!   one (x86_64 always pushes it; i386 only when the privilege changed, else it is just above
//!   the frame);
//! - riscv64: the stack pointer is untouched; the previous privilege is `sstatus.SPP` (a trap
//!   to S-mode) or `mstatus.MPP` (to M-mode);
//! - aarch64: the previous exception level is in `SPSR_EL1` (`SPSR_EL2` for a trap to EL2),
//!   and a trap from EL0, or from EL1 on `SP_EL0`, leaves that stack pointer in `SP_EL0`.
//!
//! Each architecture's folder of kern-profile-arch recovers its context (`Guest::interrupted`).
//! [`Interrupted`] is a [`RegisterReader`] that answers with the interrupted context's stack
//! pointer and privilege register, so that [`kern_profile_sampler::capture::Capture::take`] walks the
//! interrupted stack as if it had sampled there.

use kern_profile_arch::{guest, Arch};

use kern_profile_sampler::capture::{Reg, RegisterReader};

/// The interrupted context's registers, over the handler's `regs`.
pub struct Interrupted<'a, R> {
    regs: &'a mut R,
    sp: Option<u64>,
    privilege: Option<u64>,
}

impl<'a, R: RegisterReader> Interrupted<'a, R> {
    /// The context interrupted at `from_pc`, from the handler's registers `regs` and guest
    /// memory `mem(addr, out)`. Where the interrupted state cannot be recovered (an x86 frame
    /// that does not hold `from_pc`, a saved-state register QEMU does not expose), the
    /// handler's own stack pointer and privilege stand.
    pub fn new<M>(arch: Arch, from_pc: u64, regs: &'a mut R, mut mem: M) -> Self
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let (sp, privilege) = guest(arch).interrupted(from_pc, &mut |r| regs.read(r), &mut mem);
        Interrupted {
            regs,
            sp,
            privilege,
        }
    }
}

impl<R: RegisterReader> RegisterReader for Interrupted<'_, R> {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        match reg {
            Reg::StackPointer if self.sp.is_some() => self.sp,
            Reg::Privilege if self.privilege.is_some() => self.privilege,
            // The trap's registers are this interrupt's, not the interrupted context's:
            // a walk from inside a stub it interrupted must not take them as that stub's.
            Reg::TrapPc | Reg::SavedState | Reg::Scratch | Reg::OtherStackPointer => None,
            _ => self.regs.read(reg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Regs(HashMap<Reg, u64>);

    impl RegisterReader for Regs {
        fn read(&mut self, reg: Reg) -> Option<u64> {
            self.0.get(&reg).copied()
        }
    }

    fn regs(r: &[(Reg, u64)]) -> Regs {
        Regs(r.iter().copied().collect())
    }

    /// Guest memory holding `words` (of `w` bytes) from `base`.
    fn memory(base: u64, words: &[u64], w: usize) -> impl FnMut(u64, &mut [u8]) -> bool {
        let bytes: Vec<u8> = words
            .iter()
            .flat_map(|v| v.to_le_bytes()[..w].to_vec())
            .collect();
        move |addr, out| {
            let Some(off) = addr.checked_sub(base).map(|o| o as usize) else {
                return false;
            };
            let Some(src) = bytes.get(off..off + out.len()) else {
                return false;
            };
            out.copy_from_slice(src);
            true
        }
    }

    #[test]
    fn i386_kernel_interrupt_keeps_the_stack_and_reads_cs() {
        let mut r = regs(&[
            (Reg::StackPointer, 0x1000),
            (Reg::Privilege, 0x08),
            (Reg::FramePointer, 0x1100),
        ]);
        // EIP, CS, EFLAGS: ring 0 to ring 0, no stack switch.
        let mem = memory(0x1000, &[0xc010_0123, 0x08, 0x202, 0, 0, 0], 4);
        let mut i = Interrupted::new(Arch::I386, 0xc010_0123, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0x100c));
        assert_eq!(i.read(Reg::Privilege), Some(0x08));
        assert_eq!(i.read(Reg::FramePointer), Some(0x1100));
    }

    #[test]
    fn i386_user_interrupt_takes_the_pushed_stack() {
        let mut r = regs(&[(Reg::StackPointer, 0x2000), (Reg::Privilege, 0x08)]);
        let mem = memory(0x2000, &[0x0804_8000, 0x1b, 0x202, 0xbfff_f000, 0x23, 0], 4);
        let mut i = Interrupted::new(Arch::I386, 0x0804_8000, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0xbfff_f000));
        assert_eq!(i.read(Reg::Privilege), Some(0x1b));
    }

    /// Linux's entry stacks: a user-mode interrupt's five words end the stack's page, and
    /// nothing above them is readable (every word of the 686 kernel's user samples was lost
    /// when the frame was read six words at a time).
    #[test]
    fn a_frame_at_the_top_of_its_stack_is_read_without_the_word_above() {
        let mut r = regs(&[(Reg::StackPointer, 0x2fec), (Reg::Privilege, 0x60)]);
        let mem = memory(0x2fec, &[0x0804_9b43, 0x73, 0x246, 0xbfff_f000, 0x7b], 4);
        let mut i = Interrupted::new(Arch::I386, 0x0804_9b43, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0xbfff_f000));
        assert_eq!(i.read(Reg::Privilege), Some(0x73));
        let mut r = regs(&[(Reg::StackPointer, 0x2fd8), (Reg::Privilege, 0x10)]);
        let mem = memory(0x2fd8, &[0x40_1000, 0x33, 0x246, 0x7fff_0000, 0x2b], 8);
        let mut i = Interrupted::new(Arch::X86_64, 0x40_1000, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0x7fff_0000));
        assert_eq!(i.read(Reg::Privilege), Some(0x33));
    }

    #[test]
    fn an_error_code_and_a_trap_are_found() {
        // A page fault: error code first.
        let mut r = regs(&[(Reg::StackPointer, 0x3000), (Reg::Privilege, 0x10)]);
        let mem = memory(
            0x3000,
            &[
                2,
                0xffff_8000_0010_0000,
                0x10,
                0x246,
                0xffff_c000_0000_1000,
                0x18,
            ],
            8,
        );
        let mut i = Interrupted::new(Arch::X86_64, 0xffff_8000_0010_0000, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0xffff_c000_0000_1000));
        assert_eq!(i.read(Reg::Privilege), Some(0x10));
        // int 0x80 from user space: the pushed RIP is the next instruction.
        let mut r = regs(&[(Reg::StackPointer, 0x3000), (Reg::Privilege, 0x10)]);
        let mem = memory(0x3000, &[0x40_1002, 0x33, 0x246, 0x7fff_0000, 0x2b, 0], 8);
        let mut i = Interrupted::new(Arch::X86_64, 0x40_1000, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0x7fff_0000));
        assert_eq!(i.read(Reg::Privilege), Some(0x33));
    }

    #[test]
    fn a_frame_without_the_pc_leaves_the_handlers_registers() {
        let mut r = regs(&[(Reg::StackPointer, 0x1000), (Reg::Privilege, 0x08)]);
        let mem = memory(0x1000, &[0xdead, 0xbeef, 0, 0, 0, 0], 4);
        let mut i = Interrupted::new(Arch::I386, 0xc010_0000, &mut r, mem);
        assert_eq!(i.read(Reg::StackPointer), Some(0x1000));
        assert_eq!(i.read(Reg::Privilege), Some(0x08));
        // Unreadable memory too.
        let mut r = regs(&[(Reg::StackPointer, 0x9000), (Reg::Privilege, 0x08)]);
        let mut i = Interrupted::new(Arch::I386, 0xc010_0000, &mut r, |_, _| false);
        assert_eq!(i.read(Reg::StackPointer), Some(0x9000));
    }

    #[test]
    fn riscv_previous_privilege_from_spp_and_mpp() {
        let mut r = regs(&[
            (Reg::Privilege, 1),
            (Reg::SavedState, 0x100),
            (Reg::StackPointer, 0x80),
        ]);
        let mut i = Interrupted::new(Arch::Riscv64, 0, &mut r, |_, _| false);
        assert_eq!(i.read(Reg::Privilege), Some(1));
        assert_eq!(i.read(Reg::StackPointer), Some(0x80));
        let mut r = regs(&[(Reg::Privilege, 1), (Reg::SavedState, 0x22)]);
        assert_eq!(
            Interrupted::new(Arch::Riscv64, 0, &mut r, |_, _| false).read(Reg::Privilege),
            Some(0)
        );
        let mut r = regs(&[(Reg::Privilege, 3), (Reg::SavedStateHigh, 0x1800)]);
        assert_eq!(
            Interrupted::new(Arch::Riscv64, 0, &mut r, |_, _| false).read(Reg::Privilege),
            Some(3)
        );
        // No sstatus exposed: the handler's privilege stands.
        let mut r = regs(&[(Reg::Privilege, 1)]);
        assert_eq!(
            Interrupted::new(Arch::Riscv64, 0, &mut r, |_, _| false).read(Reg::Privilege),
            Some(1)
        );
    }

    #[test]
    fn aarch64_previous_level_and_stack() {
        // From EL0: SP_EL0 is the interrupted stack.
        let mut r = regs(&[
            (Reg::Privilege, 0x3c5),
            (Reg::SavedState, 0x0),
            (Reg::StackPointer, 0xffff_0000_1000),
            (Reg::OtherStackPointer, 0x7fff_f000),
        ]);
        let mut i = Interrupted::new(Arch::Aarch64, 0x40_0000, &mut r, |_, _| false);
        assert_eq!(i.read(Reg::Privilege), Some(0));
        assert_eq!(i.read(Reg::StackPointer), Some(0x7fff_f000));
        // From EL1h: the same stack.
        let mut r = regs(&[
            (Reg::Privilege, 0x3c5),
            (Reg::SavedState, 0x3c5),
            (Reg::StackPointer, 0xffff_0000_1000),
            (Reg::OtherStackPointer, 0x7fff_f000),
        ]);
        let mut i = Interrupted::new(Arch::Aarch64, 0xffff_0000_0001_0000, &mut r, |_, _| false);
        assert_eq!(i.read(Reg::Privilege), Some(0x3c5));
        assert_eq!(i.read(Reg::StackPointer), Some(0xffff_0000_1000));
    }
}
