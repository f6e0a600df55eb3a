//! aarch64 (`qemu-system-aarch64`): the return address in `x30`, the exception level in
//! `cpsr`, `SCTLR` for the MMU, `TTBR0_EL1` for the page table, `SPSR_EL1`/`SPSR_EL2` and
//! `SP_EL0` for the context before a trap, pointer-authentication bits in saved return
//! addresses ([`strip_pac`]), and the instruction decoder of [`insn`].

pub mod imm;
pub mod insn;

use crate::insn::Insn;
use crate::registers::RegisterNames;
use crate::{
    paging, Arch, CpuMode, Facts, FrameRecord, GdbExtraRegisters, GdbLayout, Guest, Privilege,
    ReadMemory, ReadRegister, Role,
};

/// aarch64 (`qemu-system-aarch64`).
pub struct Aarch64;

/// AAPCS64 frame records: `x29` points at `{saved x29, saved x30}`.
pub const FRAME_RECORD: FrameRecord = FrameRecord { below: 0, align: 8 };

/// Virtual-address bits assumed when stripping signatures (Linux's default 48-bit VA).
pub const VA_BITS: u32 = 48;

/// `addr` without pointer-authentication bits: the bits above the virtual address become
/// copies of bit 55, which selects the upper (kernel, TTBR1) or lower (user, TTBR0) half.
pub fn strip_pac(addr: u64) -> u64 {
    let mask = u64::MAX << VA_BITS;
    if addr & (1 << 55) != 0 {
        addr | mask
    } else {
        addr & !mask
    }
}

/// x0-x30, sp, pc (8 bytes), cpsr (4): 268 bytes in the gdbstub's `g` reply; `TTBR0_EL1` is
/// read with `p`.
const FACTS: Facts = Facts {
    arch: Arch::Aarch64,
    qemu_target: "aarch64",
    gdb_architectures: &["aarch64"],
    elf_machines: &[object::Architecture::Aarch64],
    // The current EL is in `cpsr` bits 3:2 (QEMU has no `CurrentEL`); `SCTLR` is EL1's.
    register_names: RegisterNames {
        stack_pointer: &["sp"],
        frame_pointer: &["x29", "fp"],
        return_address: &["x30", "lr"],
        privilege: &["cpsr", "pstate"],
        mode_control: &["SCTLR", "SCTLR_EL1"],
        page_table_base: &["ttbr0_el1", "TTBR0_EL1"],
        saved_state: &["SPSR_EL1", "spsr_el1"],
        saved_state_high: &["SPSR_EL2", "spsr_el2"],
        other_stack_pointer: &["SP_EL0", "sp_el0"],
        trap_pc: &["ELR_EL1", "elr_el1"],
        task_base: &["SP_EL0", "sp_el0"],
        // Linux's per-CPU offset (TPIDR_EL2 under VHE at EL2, not read: QEMU's `virt`
        // machine runs the kernel at EL1 unless asked for virtualization).
        task_base_user: &["TPIDR_EL1", "tpidr_el1"],
        ..RegisterNames::NONE
    },
    mode_in_page_table_base: false,
    page_table_register: "ttbr0",
    kernel_start: 1 << 63,
    frame_record: FRAME_RECORD,
    return_address_on_stack: false,
    dwarf_registers: &[
        "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13",
        "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26",
        "x27", "x28", "x29", "x30", "sp",
    ],
    dwarf_sp_fp: (31, 29),
    dwarf_fp_ra: Some((29, 30)),
    dwarf_return_column: 30,
    argument_registers: &["x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"],
    return_register: "x0",
    gdb_core_regs: GdbLayout {
        word: 8,
        pc: 32 * 8,
        sp: 31 * 8,
        fp: 29 * 8,
        ra: Some(30 * 8),
        privilege: Some(33 * 8),
        control: None,
        page_table_base: None,
        extended: None,
        task_base: None,
        task_base_user: None,
    },
    // The privilege is in `g` (`cpsr`); the MMU's state in SCTLR_EL1's bit 0.
    gdb_extra_registers: GdbExtraRegisters {
        privilege: &[],
        page_table_base: &["TTBR0_EL1"],
        control: &["SCTLR_EL1", "SCTLR"],
        // Linux's `current` in kernel mode; in user mode it holds the program's stack
        // pointer, and `current` is in the per-CPU area at the offset in TPIDR_EL1.
        task_base: &["SP_EL0"],
        task_base_user: &["TPIDR_EL1"],
    },
};

impl Guest for Aarch64 {
    fn facts(&self) -> &Facts {
        &FACTS
    }

    /// `cpsr` bits 3:2 are the EL in AArch64 state (bit 4 set is AArch32: unknown here).
    fn privilege(&self, value: u64) -> Privilege {
        if value & 0x10 != 0 {
            return Privilege::Unknown;
        }
        match (value >> 2) & 3 {
            0 => Privilege::User,
            1 => Privilege::Kernel,
            _ => Privilege::Firmware,
        }
    }

    /// `SCTLR` bit 0: the MMU.
    fn cpu_mode(&self, control: Option<u64>, _extended: Option<u64>) -> CpuMode {
        paging(control.map(|sctlr| sctlr & 1 != 0))
    }

    fn clean_return_address(&self, addr: u64) -> u64 {
        strip_pac(addr)
    }

    /// The previous exception level is in `SPSR_EL1` (`SPSR_EL2` for a trap to EL2), which
    /// reads as `cpsr` does (the EL in bits 3:2, the stack pointer choice in bit 0); a trap
    /// from EL0, or from EL1 on `SP_EL0`, leaves that stack pointer in `SP_EL0`.
    fn interrupted(
        &self,
        _from_pc: u64,
        regs: &mut ReadRegister<'_>,
        _mem: &mut ReadMemory<'_>,
    ) -> (Option<u64>, Option<u64>) {
        let el_now = regs(Role::Privilege).map(|cpsr| (cpsr >> 2) & 3);
        let spsr = match el_now {
            Some(1) => regs(Role::SavedState),
            Some(2) => regs(Role::SavedStateHigh),
            _ => None,
        };
        let Some(spsr) = spsr else {
            return (None, None);
        };
        // AArch64 state, EL0 (always SP_EL0) or ELxt (bit 0 clear: SP_EL0).
        let on_sp_el0 = spsr & 0x10 == 0 && spsr & 1 == 0;
        let sp = on_sp_el0.then(|| regs(Role::OtherStackPointer)).flatten();
        (sp, Some(spsr))
    }

    /// `ret` and its authenticating forms are its returns.
    fn decode(&self, start: u64, bytes: &[u8]) -> Option<Vec<Insn>> {
        Some(insn::decode_all(start, bytes))
    }

    fn call_before(&self, before: &[u8], ret: u64) -> Option<Option<u64>> {
        insn::call_before(before, ret)
    }
}
