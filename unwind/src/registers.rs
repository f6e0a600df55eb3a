//! What each guest architecture's registers are called in QEMU 10's plugin API
//! (`qemu_plugin_get_registers`), and what their values say about the sampled vCPU.
//!
//! Names as QEMU 10.0.2 reports them: i386 `esp ebp cs cr0 cr3` (`efer` on x86_64 only, with
//! `rsp rbp`); riscv64 `pc sp fp ra priv satp` (`fp` is x8, there is no `s0`; `priv` is
//! virtual: 0 = U, 1 = S, 3 = M; `satp` among the CSRs); aarch64 `pc sp x29 x30 cpsr` (the
//! current EL in `cpsr` bits 3:2; there is no `CurrentEL`) and, among the system registers,
//! `SCTLR` (EL1's, bit 0 = MMU on) and `TTBR0_EL1`.

use kern_profile_format::{Arch, CpuMode, Privilege};

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
}

impl Role {
    pub const ALL: [Role; 10] = [
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
    ];

    /// The names QEMU may give the register on `arch` (the first found is used); empty when
    /// the architecture has no such register.
    pub fn names(self, arch: Arch) -> &'static [&'static str] {
        use Role::*;
        let x86 = matches!(arch, Arch::I386 | Arch::X86_64);
        match (self, arch) {
            (StackPointer, Arch::X86_64) => &["rsp"],
            (StackPointer, Arch::I386) => &["esp"],
            (StackPointer, _) => &["sp"],
            (FramePointer, Arch::X86_64) => &["rbp"],
            (FramePointer, Arch::I386) => &["ebp"],
            (FramePointer, Arch::Riscv64) => &["fp", "s0", "x8"],
            (FramePointer, Arch::Aarch64) => &["x29", "fp"],
            (ReturnAddress, Arch::Riscv64) => &["ra", "x1"],
            (ReturnAddress, Arch::Aarch64) => &["x30", "lr"],
            (Privilege, Arch::Riscv64) => &["priv"],
            (Privilege, Arch::Aarch64) => &["cpsr", "pstate"],
            (Privilege, _) => &["cs"],
            (ModeControl, _) if x86 => &["cr0"],
            (ModeControl, Arch::Aarch64) => &["SCTLR", "SCTLR_EL1"],
            (ModeExtended, Arch::X86_64) => &["efer"],
            (PageTableBase, _) if x86 => &["cr3"],
            (PageTableBase, Arch::Riscv64) => &["satp"],
            (PageTableBase, Arch::Aarch64) => &["ttbr0_el1", "TTBR0_EL1"],
            (SavedState, Arch::Riscv64) => &["sstatus"],
            (SavedState, Arch::Aarch64) => &["SPSR_EL1", "spsr_el1"],
            (SavedStateHigh, Arch::Riscv64) => &["mstatus"],
            (SavedStateHigh, Arch::Aarch64) => &["SPSR_EL2", "spsr_el2"],
            (OtherStackPointer, Arch::Aarch64) => &["SP_EL0", "sp_el0"],
            _ => &[],
        }
    }

    /// Whether a sample cannot do without the register (the others are read when exposed).
    pub fn required(self) -> bool {
        matches!(self, Role::StackPointer | Role::FramePointer)
    }
}

/// The DWARF register numbers (call-frame information columns) of the frame pointer and the
/// return-address register: riscv `x8`, `x1`; aarch64 `x29`, `x30`. `None` on x86, which
/// keeps the return address on the stack.
pub fn dwarf_fp_ra(arch: Arch) -> Option<(u16, u16)> {
    match arch {
        Arch::Riscv64 => Some((8, 1)),
        Arch::Aarch64 => Some((29, 30)),
        Arch::I386 | Arch::X86_64 => None,
    }
}

/// The privilege level a `Role::Privilege` register value means on `arch`.
pub fn privilege(arch: Arch, value: u64) -> Privilege {
    match arch {
        Arch::I386 | Arch::X86_64 => match value & 3 {
            3 => Privilege::User,
            _ => Privilege::Kernel,
        },
        Arch::Riscv64 => match value {
            0 => Privilege::User,
            1 => Privilege::Kernel,
            3 => Privilege::Firmware,
            _ => Privilege::Unknown,
        },
        // cpsr bits 3:2 are the EL in AArch64 state (bit 4 set is AArch32: unknown here).
        Arch::Aarch64 if value & 0x10 != 0 => Privilege::Unknown,
        Arch::Aarch64 => match (value >> 2) & 3 {
            0 => Privilege::User,
            1 => Privilege::Kernel,
            _ => Privilege::Firmware,
        },
    }
}

/// The CPU mode from x86 `cr0` and `efer` (either may be unknown), riscv `satp` or aarch64
/// `SCTLR` (as `control`).
pub fn cpu_mode(arch: Arch, control: Option<u64>, extended: Option<u64>) -> CpuMode {
    const PE: u64 = 1;
    const PG: u64 = 1 << 31;
    const LMA: u64 = 1 << 10;
    match arch {
        Arch::I386 | Arch::X86_64 => match (control, extended) {
            (_, Some(efer)) if efer & LMA != 0 => CpuMode::Long,
            (Some(cr0), _) if cr0 & PE == 0 => CpuMode::Real,
            (Some(cr0), _) if cr0 & PG == 0 => CpuMode::PagingOff,
            (Some(_), _) => CpuMode::Paging,
            (None, _) => CpuMode::Unknown,
        },
        // satp's MODE field (bits 63:60): 0 = Bare.
        Arch::Riscv64 => match control {
            Some(satp) if satp >> 60 == 0 => CpuMode::PagingOff,
            Some(_) => CpuMode::Paging,
            None => CpuMode::Unknown,
        },
        Arch::Aarch64 => match control {
            Some(sctlr) if sctlr & 1 == 0 => CpuMode::PagingOff,
            Some(_) => CpuMode::Paging,
            None => CpuMode::Unknown,
        },
    }
}

/// The return address a frame record or the return-address register holds, without what
/// the architecture adds to it (aarch64 pointer-authentication bits).
pub fn clean_return_address(arch: Arch, addr: u64) -> u64 {
    match arch {
        Arch::Aarch64 => crate::aarch64::strip_pac(addr),
        _ => addr,
    }
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
