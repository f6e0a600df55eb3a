//! x86_64 (`qemu-system-x86_64`): i386's facts ([`crate::x86`]) with 8-byte words, `rsp`
//! and `rbp`, `efer` for long mode and the System V calling convention.

use crate::gdb::le;
use crate::x86::{self, insn};
use crate::{
    Arch, Convention, CoreRegs, CpuMode, FrameRecord, Guest, Privilege, ReadMemory, ReadRegister,
    Role,
};

/// x86_64 (`qemu-system-x86_64`).
pub struct X86_64;

impl Guest for X86_64 {
    fn arch(&self) -> Arch {
        Arch::X86_64
    }

    fn qemu_target(&self) -> &'static str {
        "x86_64"
    }

    fn gdb_architectures(&self) -> &'static [&'static str] {
        &["i386:x86-64", "i386:x86-64:intel"]
    }

    /// The x32 ABI (32-bit pointers, long-mode code) runs on x86_64 guests too.
    fn elf_machines(&self) -> &'static [object::Architecture] {
        &[
            object::Architecture::X86_64,
            object::Architecture::X86_64_X32,
        ]
    }

    fn register_names(&self, role: Role) -> &'static [&'static str] {
        match role {
            Role::StackPointer => &["rsp"],
            Role::FramePointer => &["rbp"],
            Role::ModeExtended => &["efer"],
            other => x86::shared_names(other),
        }
    }

    fn privilege(&self, value: u64) -> Privilege {
        x86::privilege(value)
    }

    fn cpu_mode(&self, control: Option<u64>, extended: Option<u64>) -> CpuMode {
        x86::cpu_mode(control, extended)
    }

    /// `push ebp; mov ebp, esp`: the frame pointer points at the record.
    fn frame_record(&self) -> FrameRecord {
        FrameRecord { below: 0, align: 8 }
    }

    fn page_table_identity(&self, base: u64) -> u64 {
        base & !0xfff
    }

    fn page_table_register(&self) -> &'static str {
        "cr3"
    }

    fn kernel_selector(&self, privilege: u64) -> Option<u64> {
        x86::kernel_selector(privilege)
    }

    fn return_address_on_stack(&self) -> bool {
        true
    }

    fn dwarf_register(&self, n: u16) -> Option<&'static str> {
        const NAMES: [&str; 16] = [
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15",
        ];
        NAMES.get(n as usize).copied()
    }

    fn dwarf_sp_fp(&self) -> (u16, u16) {
        (7, 6)
    }

    fn dwarf_fp_ra(&self) -> Option<(u16, u16)> {
        None
    }

    fn dwarf_return_column(&self) -> u16 {
        // rip
        16
    }

    fn argument_registers(&self, _conv: Convention) -> &'static [&'static str] {
        &["rdi", "rsi", "rdx", "rcx", "r8", "r9"]
    }

    fn return_register(&self) -> &'static str {
        "rax"
    }

    fn interrupted(
        &self,
        from_pc: u64,
        regs: &mut ReadRegister<'_>,
        mem: &mut ReadMemory<'_>,
    ) -> (Option<u64>, Option<u64>) {
        x86::interrupted_frame(8, from_pc, regs, mem)
    }

    fn call_before(&self, before: &[u8], ret: u64) -> Option<Option<u64>> {
        insn::call_before(before, ret, 8)
    }

    fn is_return(&self, code: &[u8]) -> bool {
        insn::is_ret(code)
    }

    fn block_at(&self, start: u64, bytes: &[u8], out: &mut Vec<u64>) {
        insn::block_at(64, start, bytes, out)
    }

    /// rax rbx rcx rdx rsi rdi rbp rsp r8-r15 rip (8 bytes), eflags cs ss ds es fs gs (4),
    /// fs_base gs_base k_gs_base, cr0 cr2 cr3 cr4 cr8 efer (8, in every CPU mode), x87 and
    /// SSE state: 608 bytes (QEMU 7.2 to 11.1).
    fn gdb_core_regs(&self, g: &[u8]) -> Option<CoreRegs> {
        // cr0: after rip, eflags, the six selectors and the three bases; then cr2, cr3, cr4,
        // cr8, efer.
        const CR0: usize = 17 * 8 + 4 + 6 * 4 + 3 * 8;
        const CR3: usize = CR0 + 2 * 8;
        const EFER: usize = CR0 + 5 * 8;
        Some(CoreRegs {
            fp: le(g, 6 * 8, 8)?,
            sp: le(g, 7 * 8, 8)?,
            pc: le(g, 16 * 8, 8)?,
            ra: None,
            privilege: le(g, 16 * 8 + 12, 4),
            page_table_base: le(g, CR3, 8),
            control: le(g, CR0, 8),
            extended: le(g, EFER, 8),
        })
    }
}
