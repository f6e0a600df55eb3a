//! The constant facts of a guest, one value per architecture folder, which [`Guest`]'s plain
//! accessors read: the code that returns them is written once, in the trait.

use crate::registers::RegisterNames;
#[cfg(doc)]
use crate::Guest;
use crate::{Arch, FrameRecord, GdbExtraRegisters, GdbLayout};

/// What [`Guest`]'s methods of the same names return.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    pub arch: Arch,
    pub qemu_target: &'static str,
    pub gdb_architectures: &'static [&'static str],
    pub elf_machines: &'static [object::Architecture],
    pub register_names: RegisterNames,
    pub mode_in_page_table_base: bool,
    pub page_table_register: &'static str,
    pub kernel_start: u64,
    pub frame_record: FrameRecord,
    pub return_address_on_stack: bool,
    /// QEMU's names of the DWARF registers an argument can be in, by number from 0.
    pub dwarf_registers: &'static [&'static str],
    pub dwarf_sp_fp: (u16, u16),
    pub dwarf_fp_ra: Option<(u16, u16)>,
    pub dwarf_return_column: u16,
    /// The registers the C convention passes arguments in.
    pub argument_registers: &'static [&'static str],
    pub return_register: &'static str,
    /// Where the `g` reply holds what a stack needs.
    pub gdb_core_regs: GdbLayout,
    pub gdb_extra_registers: GdbExtraRegisters,
}
