//! riscv64 (`qemu-system-riscv64`): the return address in `ra`, the virtual `priv` register
//! for the privilege, `satp` for the page table and the CPU mode, `sstatus`/`mstatus` for the
//! privilege before a trap, and the instruction decoder of [`insn`].

pub mod insn;

use crate::gdb::le;
use crate::insn::{Flow, Insn};
use crate::{
    Arch, Convention, CoreRegs, CpuMode, FrameRecord, Guest, Privilege, ReadMemory, ReadRegister,
    Role,
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

impl Guest for Riscv64 {
    fn arch(&self) -> Arch {
        Arch::Riscv64
    }

    fn qemu_target(&self) -> &'static str {
        "riscv64"
    }

    fn gdb_architectures(&self) -> &'static [&'static str] {
        &["riscv:rv64"]
    }

    fn elf_machines(&self) -> &'static [object::Architecture] {
        &[object::Architecture::Riscv64]
    }

    /// `fp` is x8 (QEMU has no `s0`); `priv` is virtual: 0 = U, 1 = S, 3 = M.
    fn register_names(&self, role: Role) -> &'static [&'static str] {
        match role {
            Role::StackPointer => &["sp"],
            Role::FramePointer => &["fp", "s0", "x8"],
            Role::ReturnAddress => &["ra", "x1"],
            Role::Privilege => &["priv"],
            Role::PageTableBase => &["satp"],
            Role::SavedState => &["sstatus"],
            Role::SavedStateHigh => &["mstatus"],
            Role::ModeControl | Role::ModeExtended | Role::OtherStackPointer => &[],
        }
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
        match control {
            Some(satp) if satp >> 60 == 0 => CpuMode::PagingOff,
            Some(_) => CpuMode::Paging,
            None => CpuMode::Unknown,
        }
    }

    fn mode_in_page_table_base(&self) -> bool {
        true
    }

    fn frame_record(&self) -> FrameRecord {
        FRAME_RECORD
    }

    fn page_table_register(&self) -> &'static str {
        "satp"
    }

    fn return_address_on_stack(&self) -> bool {
        false
    }

    fn dwarf_register(&self, n: u16) -> Option<&'static str> {
        const NAMES: [&str; 32] = [
            "zero", "ra", "sp", "gp", "tp", "t0", "t1", "t2", "fp", "s1", "a0", "a1", "a2", "a3",
            "a4", "a5", "a6", "a7", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11",
            "t3", "t4", "t5", "t6",
        ];
        NAMES.get(n as usize).copied()
    }

    fn dwarf_sp_fp(&self) -> (u16, u16) {
        (2, 8)
    }

    fn dwarf_fp_ra(&self) -> Option<(u16, u16)> {
        Some((8, 1))
    }

    fn dwarf_return_column(&self) -> u16 {
        1
    }

    fn argument_registers(&self, _conv: Convention) -> &'static [&'static str] {
        &["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"]
    }

    fn return_register(&self) -> &'static str {
        "a0"
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

    fn decode(&self, start: u64, bytes: &[u8]) -> Option<Vec<Insn>> {
        Some(insn::decode_all(start, bytes))
    }

    fn call_before(&self, before: &[u8], ret: u64) -> Option<Option<u64>> {
        insn::call_before(before, ret)
    }

    /// `jalr x0, 0(ra)` and `c.jr ra`.
    fn is_return(&self, code: &[u8]) -> bool {
        let first = insn::decode_all(0, code);
        first.first().is_some_and(|i| i.flow == Flow::Return)
    }

    /// x0-x31 then pc (8 bytes each, 264 bytes); `priv` and `satp` are read with `p`.
    fn gdb_core_regs(&self, g: &[u8]) -> Option<CoreRegs> {
        Some(CoreRegs {
            ra: Some(le(g, 8, 8)?),
            sp: le(g, 2 * 8, 8)?,
            fp: le(g, 8 * 8, 8)?,
            pc: le(g, 32 * 8, 8)?,
            privilege: None,
            page_table_base: None,
            control: None,
            extended: None,
        })
    }

    fn gdb_extra_registers(&self) -> crate::GdbExtraRegisters {
        crate::GdbExtraRegisters {
            privilege: &["priv"],
            page_table_base: &["satp"],
            control: &[],
        }
    }
}
