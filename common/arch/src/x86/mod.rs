//! x86: i386 here, and what x86_64 ([`crate::x86_64`]) shares with it: the return address on
//! the stack, `cs` for the privilege, `cr0`/`efer` for the CPU mode, `cr3` for the page
//! table, the frame the CPU pushes at an interrupt, and the instruction facts of [`insn`].

pub mod insn;

use crate::gdb::le;
use crate::insn::Insn;
use crate::{
    Arch, Convention, CoreRegs, CpuMode, FrameRecord, Guest, Privilege, ReadMemory, ReadRegister,
    Role,
};

/// i386 (`qemu-system-i386`).
pub struct I386;

/// The register names x86_64 shares with i386.
pub(crate) fn shared_names(role: Role) -> &'static [&'static str] {
    match role {
        Role::Privilege => &["cs"],
        Role::ModeControl => &["cr0"],
        Role::PageTableBase => &["cr3"],
        _ => &[],
    }
}

/// CPL 3 is user; 0 to 2 kernel.
pub(crate) fn privilege(cs: u64) -> Privilege {
    match cs & 3 {
        3 => Privilege::User,
        _ => Privilege::Kernel,
    }
}

/// The CPU mode from `cr0` and `efer` (either may be unknown).
pub(crate) fn cpu_mode(cr0: Option<u64>, efer: Option<u64>) -> CpuMode {
    const PE: u64 = 1;
    const PG: u64 = 1 << 31;
    const LMA: u64 = 1 << 10;
    match (cr0, efer) {
        (_, Some(efer)) if efer & LMA != 0 => CpuMode::Long,
        (Some(cr0), _) if cr0 & PE == 0 => CpuMode::Real,
        (Some(cr0), _) if cr0 & PG == 0 => CpuMode::PagingOff,
        (Some(_), _) => CpuMode::Paging,
        (None, _) => CpuMode::Unknown,
    }
}

/// In ring 0, `cs` is the kernel's selector.
pub(crate) fn kernel_selector(cs: u64) -> Option<u64> {
    (cs & 3 == 0 && cs <= 0xffff).then_some(cs)
}

/// The interrupted stack pointer and CS from the frame the CPU pushed at the handler's stack
/// pointer, `[error code,] EIP/RIP, CS, EFLAGS[, ESP/RSP, SS]`, whose EIP/RIP word (first, or
/// second after an error code) lies at `from_pc` or up to 15 bytes after it (a trap, `int n`,
/// pushes the next instruction). x86_64 always pushes the stack pointer; i386 only when the
/// privilege changed, else it is just above the frame. `w` is the word size.
pub(crate) fn interrupted_frame(
    w: usize,
    from_pc: u64,
    regs: &mut ReadRegister<'_>,
    mem: &mut ReadMemory<'_>,
) -> (Option<u64>, Option<u64>) {
    let (Some(sp), Some(cs_now)) = (regs(Role::StackPointer), regs(Role::Privilege)) else {
        return (None, None);
    };
    // Word by word, never past the frame: an interrupt from user mode pushes its five words
    // at the very top of the kernel's entry stack (Linux: the entry trampoline's page), and
    // the word above may be unmapped.
    let mut word = |i: usize| {
        let mut b = [0u8; 8];
        let at = sp.wrapping_add((i * w) as u64);
        mem(at, &mut b[..w]).then(|| u64::from_le_bytes(b))
    };
    let mut frame_at = |k: usize| {
        let ip = word(k)?;
        let cs = word(k + 1)?;
        (ip.wrapping_sub(from_pc) < 16 && cs != 0 && cs <= 0xffff).then_some(cs)
    };
    let Some((k, cs)) = (0..2).find_map(|k| frame_at(k).map(|cs| (k, cs))) else {
        return (None, None);
    };
    let sp_then = if w == 8 || cs & 3 != cs_now & 3 {
        match word(k + 3) {
            Some(v) => v,
            None => return (None, None),
        }
    } else {
        sp.wrapping_add(((k + 3) * w) as u64)
    };
    (Some(sp_then), Some(cs))
}

impl Guest for I386 {
    fn arch(&self) -> Arch {
        Arch::I386
    }

    fn qemu_target(&self) -> &'static str {
        "i386"
    }

    fn gdb_architectures(&self) -> &'static [&'static str] {
        &["i386", "i386:intel"]
    }

    fn elf_machines(&self) -> &'static [object::Architecture] {
        &[object::Architecture::I386]
    }

    fn register_names(&self, role: Role) -> &'static [&'static str] {
        match role {
            Role::StackPointer => &["esp"],
            Role::FramePointer => &["ebp"],
            other => shared_names(other),
        }
    }

    fn privilege(&self, value: u64) -> Privilege {
        privilege(value)
    }

    fn cpu_mode(&self, control: Option<u64>, extended: Option<u64>) -> CpuMode {
        cpu_mode(control, extended)
    }

    /// `push ebp; mov ebp, esp`: the frame pointer points at the record.
    fn frame_record(&self) -> FrameRecord {
        FrameRecord { below: 0, align: 4 }
    }

    fn page_table_identity(&self, base: u64) -> u64 {
        base & !0xfff
    }

    fn page_table_register(&self) -> &'static str {
        "cr3"
    }

    fn kernel_selector(&self, privilege: u64) -> Option<u64> {
        kernel_selector(privilege)
    }

    /// Linux's and the example kernel's 3 GiB split.
    fn kernel_start(&self) -> u64 {
        0xc000_0000
    }

    fn return_address_on_stack(&self) -> bool {
        true
    }

    fn dwarf_register(&self, n: u16) -> Option<&'static str> {
        const NAMES: [&str; 8] = ["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"];
        NAMES.get(n as usize).copied()
    }

    fn dwarf_sp_fp(&self) -> (u16, u16) {
        (4, 5)
    }

    fn dwarf_fp_ra(&self) -> Option<(u16, u16)> {
        None
    }

    fn dwarf_return_column(&self) -> u16 {
        // eip
        8
    }

    fn argument_registers(&self, conv: Convention) -> &'static [&'static str] {
        match conv {
            Convention::C => &[],
            Convention::Regparm3 => &["eax", "edx", "ecx"],
        }
    }

    fn return_register(&self) -> &'static str {
        "eax"
    }

    fn interrupted(
        &self,
        from_pc: u64,
        regs: &mut ReadRegister<'_>,
        mem: &mut ReadMemory<'_>,
    ) -> (Option<u64>, Option<u64>) {
        interrupted_frame(4, from_pc, regs, mem)
    }

    fn decode(&self, _start: u64, _bytes: &[u8]) -> Option<Vec<Insn>> {
        None
    }

    fn call_before(&self, before: &[u8], ret: u64) -> Option<Option<u64>> {
        insn::call_before(before, ret, 4)
    }

    fn is_return(&self, code: &[u8]) -> bool {
        insn::is_ret(code)
    }

    fn block_at(&self, start: u64, bytes: &[u8], out: &mut Vec<u64>) {
        insn::block_at(32, start, bytes, out)
    }

    /// eax ecx edx ebx esp ebp esi edi eip eflags cs ss ds es fs gs, fs_base gs_base
    /// k_gs_base, cr0 cr2 cr3 cr4 cr8 efer (4 bytes each), the x87 and SSE state: 344 bytes
    /// (QEMU 7.2 to 11.1, in the target description's order).
    fn gdb_core_regs(&self, g: &[u8]) -> Option<CoreRegs> {
        Some(CoreRegs {
            sp: le(g, 4 * 4, 4)?,
            fp: le(g, 5 * 4, 4)?,
            pc: le(g, 8 * 4, 4)?,
            ra: None,
            privilege: le(g, 10 * 4, 4),
            // After the segment bases: cr0, cr2, cr3, cr4, cr8, efer.
            control: le(g, 19 * 4, 4),
            page_table_base: le(g, 21 * 4, 4),
            extended: le(g, 24 * 4, 4),
        })
    }
}
