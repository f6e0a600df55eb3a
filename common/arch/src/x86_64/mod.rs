//! x86_64 (`qemu-system-x86_64`): i386's facts ([`crate::x86`]) with 8-byte words, `rsp`
//! and `rbp`, `efer` for long mode and the System V calling convention.

use crate::registers::RegisterNames;
use crate::x86::{self, X86};
use crate::{Arch, Facts, FrameRecord, GdbExtraRegisters, GdbLayout};

/// rax rbx rcx rdx rsi rdi rbp rsp r8-r15 rip (8 bytes), eflags cs ss ds es fs gs (4),
/// fs_base gs_base k_gs_base, cr0 cr2 cr3 cr4 cr8 efer (8, in every CPU mode), x87 and SSE
/// state: 608 bytes (QEMU 7.2 to 11.1) in the gdbstub's `g` reply. cr0: after rip, eflags,
/// the six selectors and the three bases; then cr2, cr3, cr4, cr8, efer.
const CR0: usize = 17 * 8 + 4 + 6 * 4 + 3 * 8;

/// x86_64 (`qemu-system-x86_64`).
pub const X86_64: X86 = X86 {
    facts: Facts {
        arch: Arch::X86_64,
        qemu_target: "x86_64",
        gdb_architectures: &["i386:x86-64", "i386:x86-64:intel"],
        // The x32 ABI (32-bit pointers, long-mode code) runs on x86_64 guests too.
        elf_machines: &[
            object::Architecture::X86_64,
            object::Architecture::X86_64_X32,
        ],
        register_names: RegisterNames {
            stack_pointer: &["rsp"],
            frame_pointer: &["rbp"],
            mode_extended: &["efer"],
            task_base: &["gs_base"],
            task_base_user: &["k_gs_base"],
            ..x86::SHARED_NAMES
        },
        mode_in_page_table_base: false,
        page_table_register: "cr3",
        kernel_start: 1 << 63,
        // `push rbp; mov rbp, rsp`: the frame pointer points at the record.
        frame_record: FrameRecord { below: 0, align: 8 },
        return_address_on_stack: true,
        dwarf_registers: &[
            "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15",
        ],
        dwarf_sp_fp: (7, 6),
        dwarf_fp_ra: None,
        // rip
        dwarf_return_column: 16,
        argument_registers: SYSV_ARGUMENTS,
        return_register: "rax",
        gdb_core_regs: GdbLayout {
            word: 8,
            pc: 16 * 8,
            sp: 7 * 8,
            fp: 6 * 8,
            ra: None,
            privilege: Some(16 * 8 + 12),
            control: Some(CR0),
            page_table_base: Some(CR0 + 2 * 8),
            extended: Some(CR0 + 5 * 8),
            // fs_base, gs_base, k_gs_base come just before cr0.
            task_base: Some(CR0 - 2 * 8),
            task_base_user: Some(CR0 - 8),
        },
        gdb_extra_registers: GdbExtraRegisters::NONE,
    },
    word: 8,
    regparm3: SYSV_ARGUMENTS,
};

/// System V's argument registers, whatever the hooked function's convention.
const SYSV_ARGUMENTS: &[&str] = &["rdi", "rsi", "rdx", "rcx", "r8", "r9"];
