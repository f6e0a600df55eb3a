//! riscv64 (`qemu-system-riscv64`): the return address in `ra`, the virtual `priv` register
//! for the privilege, `satp` for the page table and the CPU mode, `sstatus`/`mstatus` for the
//! privilege before a trap, and the instruction decoder of [`insn`].

pub mod imm;
pub mod insn;

use crate::insn::Insn;
use crate::registers::RegisterNames;
use crate::{
    paging, Arch, CpuMode, Facts, FrameRecord, GdbExtraRegisters, GdbLayout, Guest, Privilege,
    ReadMemory, ReadRegister, Role,
};

/// riscv64 (`qemu-system-riscv64`).
pub struct Riscv64;

/// GCC and LLVM's frame records: `fp` points just above the record, which holds the caller's
/// `fp` at `fp - 16` and the return address at `fp - 8`; riscv's stack (and so every frame
/// pointer) is 16-byte aligned.
pub const FRAME_RECORD: FrameRecord = FrameRecord {
    below: 16,
    align: 16,
};

/// x0-x31 then pc (8 bytes each, 264 bytes) in the gdbstub's `g` reply; `priv` and `satp`
/// are read with `p`.
const FACTS: Facts = Facts {
    arch: Arch::Riscv64,
    qemu_target: "riscv64",
    gdb_architectures: &["riscv:rv64"],
    elf_machines: &[object::Architecture::Riscv64],
    // `fp` is x8 (QEMU has no `s0`); `priv` is virtual: 0 = U, 1 = S, 3 = M.
    register_names: RegisterNames {
        stack_pointer: &["sp"],
        frame_pointer: &["fp", "s0", "x8"],
        return_address: &["ra", "x1"],
        privilege: &["priv"],
        page_table_base: &["satp"],
        saved_state: &["sstatus"],
        saved_state_high: &["mstatus"],
        trap_pc: &["sepc"],
        scratch: &["sscratch"],
        task_base: &["tp", "x4"],
        task_base_user: &["sscratch"],
        ..RegisterNames::NONE
    },
    mode_in_page_table_base: true,
    page_table_register: "satp",
    kernel_start: 1 << 63,
    frame_record: FRAME_RECORD,
    return_address_on_stack: false,
    dwarf_registers: &[
        "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "fp", "s1", "a0", "a1", "a2", "a3", "a4",
        "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "t3", "t4",
        "t5", "t6",
    ],
    dwarf_sp_fp: (2, 8),
    dwarf_fp_ra: Some((8, 1)),
    dwarf_return_column: 1,
    argument_registers: &["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"],
    return_register: "a0",
    gdb_core_regs: GdbLayout {
        word: 8,
        pc: 32 * 8,
        sp: 2 * 8,
        fp: 8 * 8,
        ra: Some(8),
        privilege: None,
        control: None,
        page_table_base: None,
        extended: None,
        // tp (x4)
        task_base: Some(4 * 8),
        task_base_user: None,
    },
    gdb_extra_registers: GdbExtraRegisters {
        privilege: &["priv"],
        page_table_base: &["satp"],
        control: &[],
        task_base: &[],
        // Linux's `current` in user mode (`tp` holds it in kernel mode, in `g`).
        task_base_user: &["sscratch"],
    },
};

impl Guest for Riscv64 {
    fn facts(&self) -> &Facts {
        &FACTS
    }

    fn privilege(&self, value: u64) -> Privilege {
        match value {
            0 => Privilege::User,
            1 => Privilege::Kernel,
            3 => Privilege::Firmware,
            _ => Privilege::Unknown,
        }
    }

    /// `satp`'s MODE field (bits 63:60): 0 = Bare.
    fn cpu_mode(&self, control: Option<u64>, _extended: Option<u64>) -> CpuMode {
        paging(control.map(|satp| satp >> 60 != 0))
    }

    /// The stack pointer is untouched by a trap; the previous privilege is `sstatus.SPP` (a
    /// trap to S-mode) or `mstatus.MPP` (to M-mode), as `priv` encodes it.
    fn interrupted(
        &self,
        _from_pc: u64,
        regs: &mut ReadRegister<'_>,
        _mem: &mut ReadMemory<'_>,
    ) -> (Option<u64>, Option<u64>) {
        let previous = match regs(Role::Privilege) {
            Some(1) => regs(Role::SavedState).map(|sstatus| (sstatus >> 8) & 1),
            Some(3) => regs(Role::SavedStateHigh).map(|mstatus| (mstatus >> 11) & 3),
            _ => None,
        };
        (None, previous)
    }

    /// `jalr x0, 0(ra)` and `c.jr ra` are its returns.
    fn decode(&self, start: u64, bytes: &[u8]) -> Option<Vec<Insn>> {
        Some(insn::decode_all(start, bytes))
    }

    fn call_before(&self, before: &[u8], ret: u64) -> Option<Option<u64>> {
        insn::call_before(before, ret)
    }
}
