//! The registers a sample reads, by role, and what their values say about the sampled vCPU,
//! as functions of the guest's [`Arch`] over the registry ([`crate::guest`]). Each
//! architecture's folder holds its names in QEMU 10's plugin API (`qemu_plugin_get_registers`).
//!
//! Names as QEMU 10.0.2 reports them: i386 `esp ebp cs cr0 cr3` (`efer` on x86_64 only, with
//! `rsp rbp`); riscv64 `pc sp fp ra priv satp` (`fp` is x8, there is no `s0`; `priv` is
//! virtual: 0 = U, 1 = S, 3 = M; `satp` among the CSRs); aarch64 `pc sp x29 x30 cpsr` (the
//! current EL in `cpsr` bits 3:2; there is no `CurrentEL`) and, among the system registers,
//! `SCTLR` (EL1's, bit 0 = MMU on) and `TTBR0_EL1`; the trap registers riscv64 `sstatus sepc
//! sscratch` and aarch64 `SPSR_EL1 ELR_EL1 SP_EL0` (read from its gdb feature XML).

use crate::{guest, Arch, CpuMode, Privilege};

/// A register a sample may read, by what it is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    StackPointer,
    FramePointer,
    /// riscv `ra`, aarch64 `x30` (x86 keeps the return address on the stack).
    ReturnAddress,
    /// What tells the privilege: x86 `cs`, riscv `priv`, aarch64 `cpsr`.
    Privilege,
    /// x86 `cr0` (PE, PG), aarch64 `SCTLR` (M), for the CPU mode.
    ModeControl,
    /// x86_64 `efer` (LMA), for long mode.
    ModeExtended,
    /// x86 `cr3`, riscv `satp` (whose mode field also gives the CPU mode), aarch64
    /// `TTBR0_EL1`.
    PageTableBase,
    /// The state saved by a trap to the kernel, read at an interrupt (`trigger=interrupt`):
    /// riscv `sstatus` (the previous privilege in SPP), aarch64 `SPSR_EL1`.
    SavedState,
    /// The same for a trap to the level above: riscv `mstatus` (MPP), aarch64 `SPSR_EL2`.
    SavedStateHigh,
    /// aarch64 `SP_EL0`: the stack pointer of EL0 (and of EL1t) while a handler runs on
    /// `SP_EL1`.
    OtherStackPointer,
    /// The pc a trap to the kernel interrupted: riscv `sepc`, aarch64 `ELR_EL1`. Read only
    /// for a sample in an entry stub that has not saved it yet.
    TrapPc,
    /// riscv `sscratch`, where entry stubs swap the interrupted stack pointer out. Read as
    /// [`Role::TrapPc`] is.
    Scratch,
    /// Where a kernel finds its current task while it runs: x86_64 `gs_base` (Linux's
    /// per-CPU area), i386 `fs_base`, riscv64 `tp` (Linux's `current`); aarch64 keeps it in
    /// `SP_EL0`, [`Role::OtherStackPointer`]. Read only to name the task (`tasks=`).
    TaskBase,
    /// The same while user code runs: x86_64 `k_gs_base` (the kernel's GS base, swapped out),
    /// riscv64 `sscratch` ([`Role::Scratch`], which Linux sets to `current` in user mode),
    /// aarch64 `TPIDR_EL1` (Linux's per-CPU offset, in either mode: `__entry_task` is there).
    TaskBaseUser,
}

impl Role {
    pub const ALL: [Role; 14] = [
        Role::StackPointer,
        Role::FramePointer,
        Role::ReturnAddress,
        Role::Privilege,
        Role::ModeControl,
        Role::ModeExtended,
        Role::PageTableBase,
        Role::SavedState,
        Role::SavedStateHigh,
        Role::OtherStackPointer,
        Role::TrapPc,
        Role::Scratch,
        Role::TaskBase,
        Role::TaskBaseUser,
    ];

    /// The names QEMU may give the register on `arch` (the first found is used); empty when
    /// the architecture has no such register.
    pub fn names(self, arch: Arch) -> &'static [&'static str] {
        guest(arch).register_names(self)
    }

    /// Whether a sample cannot do without the register (the others are read when exposed).
    pub fn required(self) -> bool {
        matches!(self, Role::StackPointer | Role::FramePointer)
    }
}

/// The names QEMU may give each [`Role`]'s register on one architecture (the first found is
/// used); empty where it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterNames {
    pub stack_pointer: &'static [&'static str],
    pub frame_pointer: &'static [&'static str],
    pub return_address: &'static [&'static str],
    pub privilege: &'static [&'static str],
    pub mode_control: &'static [&'static str],
    pub mode_extended: &'static [&'static str],
    pub page_table_base: &'static [&'static str],
    pub saved_state: &'static [&'static str],
    pub saved_state_high: &'static [&'static str],
    pub other_stack_pointer: &'static [&'static str],
    pub trap_pc: &'static [&'static str],
    pub scratch: &'static [&'static str],
    pub task_base: &'static [&'static str],
    pub task_base_user: &'static [&'static str],
}

impl RegisterNames {
    /// No register for any role, for the others' `..NONE`.
    pub const NONE: RegisterNames = RegisterNames {
        stack_pointer: &[],
        frame_pointer: &[],
        return_address: &[],
        privilege: &[],
        mode_control: &[],
        mode_extended: &[],
        page_table_base: &[],
        saved_state: &[],
        saved_state_high: &[],
        other_stack_pointer: &[],
        trap_pc: &[],
        scratch: &[],
        task_base: &[],
        task_base_user: &[],
    };

    /// The names of `role`'s register.
    pub fn of(&self, role: Role) -> &'static [&'static str] {
        match role {
            Role::StackPointer => self.stack_pointer,
            Role::FramePointer => self.frame_pointer,
            Role::ReturnAddress => self.return_address,
            Role::Privilege => self.privilege,
            Role::ModeControl => self.mode_control,
            Role::ModeExtended => self.mode_extended,
            Role::PageTableBase => self.page_table_base,
            Role::SavedState => self.saved_state,
            Role::SavedStateHigh => self.saved_state_high,
            Role::OtherStackPointer => self.other_stack_pointer,
            Role::TrapPc => self.trap_pc,
            Role::Scratch => self.scratch,
            Role::TaskBase => self.task_base,
            Role::TaskBaseUser => self.task_base_user,
        }
    }
}

/// The DWARF register numbers (call-frame information columns) of the frame pointer and the
/// return-address register: riscv `x8`, `x1`; aarch64 `x29`, `x30`. `None` on x86, which
/// keeps the return address on the stack.
pub fn dwarf_fp_ra(arch: Arch) -> Option<(u16, u16)> {
    guest(arch).dwarf_fp_ra()
}

/// The privilege level a `Role::Privilege` register value means on `arch`.
pub fn privilege(arch: Arch, value: u64) -> Privilege {
    guest(arch).privilege(value)
}

/// The CPU mode from x86 `cr0` and `efer` (either may be unknown), riscv `satp` or aarch64
/// `SCTLR` (as `control`).
pub fn cpu_mode(arch: Arch, control: Option<u64>, extended: Option<u64>) -> CpuMode {
    guest(arch).cpu_mode(control, extended)
}

/// The return address a frame record or the return-address register holds, without what
/// the architecture adds to it (aarch64 pointer-authentication bits).
pub fn clean_return_address(arch: Arch, addr: u64) -> u64 {
    guest(arch).clean_return_address(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges() {
        assert_eq!(privilege(Arch::I386, 0x1b), Privilege::User);
        assert_eq!(privilege(Arch::X86_64, 0x10), Privilege::Kernel);
        assert_eq!(privilege(Arch::Riscv64, 0), Privilege::User);
        assert_eq!(privilege(Arch::Riscv64, 1), Privilege::Kernel);
        assert_eq!(privilege(Arch::Riscv64, 3), Privilege::Firmware);
        // EL1h (0x3c5), EL0t (0x0), EL2h (0x3c9).
        assert_eq!(privilege(Arch::Aarch64, 0x3c5), Privilege::Kernel);
        assert_eq!(privilege(Arch::Aarch64, 0), Privilege::User);
        assert_eq!(privilege(Arch::Aarch64, 0x3c9), Privilege::Firmware);
    }

    #[test]
    fn modes() {
        assert_eq!(cpu_mode(Arch::I386, Some(0x10), None), CpuMode::Real);
        assert_eq!(cpu_mode(Arch::I386, Some(0x11), None), CpuMode::PagingOff);
        assert_eq!(
            cpu_mode(Arch::I386, Some(0x8000_0011), None),
            CpuMode::Paging
        );
        assert_eq!(
            cpu_mode(Arch::X86_64, Some(0x8000_0011), Some(0x500)),
            CpuMode::Long
        );
        assert_eq!(cpu_mode(Arch::Riscv64, Some(0), None), CpuMode::PagingOff);
        assert_eq!(
            cpu_mode(Arch::Riscv64, Some(8 << 60), None),
            CpuMode::Paging
        );
        assert_eq!(
            cpu_mode(Arch::Aarch64, Some(0x30d0_0800), None),
            CpuMode::PagingOff
        );
        assert_eq!(cpu_mode(Arch::Aarch64, None, None), CpuMode::Unknown);
    }

    #[test]
    fn names() {
        assert_eq!(Role::FramePointer.names(Arch::Riscv64)[0], "fp");
        assert_eq!(Role::ReturnAddress.names(Arch::Aarch64)[0], "x30");
        assert!(Role::ReturnAddress.names(Arch::I386).is_empty());
        assert!(Role::ModeExtended.names(Arch::I386).is_empty());
    }
}
