//! x86: i386 here, and what x86_64 ([`crate::x86_64`]) shares with it, as one [`Guest`]
//! ([`X86`]): the return address on the stack, `cs` for the privilege, `cr0`/`efer` for the
//! CPU mode, `cr3` for the page table, the frame the CPU pushes at an interrupt, and the
//! instruction facts of [`insn`].

pub mod insn;

use crate::registers::RegisterNames;
use crate::{
    Arch, Convention, CpuMode, Facts, FrameRecord, GdbExtraRegisters, GdbLayout, Guest, Privilege,
    ReadMemory, ReadRegister, Role,
};

/// An x86 guest: i386 ([`I386`]) and x86_64 ([`crate::x86_64::X86_64`]) are one kind that
/// differs in its facts and its word.
pub struct X86 {
    pub(crate) facts: Facts,
    /// Bytes in a word, 4 or 8: the interrupt frame's and the code's (32- or 64-bit).
    pub(crate) word: usize,
    /// The registers of `regparm(3)` (i386's; on x86_64 the C convention's).
    pub(crate) regparm3: &'static [&'static str],
}

/// i386 (`qemu-system-i386`).
pub const I386: X86 = X86 {
    facts: Facts {
        arch: Arch::I386,
        qemu_target: "i386",
        gdb_architectures: &["i386", "i386:intel"],
        elf_machines: &[object::Architecture::I386],
        register_names: RegisterNames {
            stack_pointer: &["esp"],
            frame_pointer: &["ebp"],
            task_base: &["fs_base"],
            ..SHARED_NAMES
        },
        mode_in_page_table_base: false,
        page_table_register: "cr3",
        // Linux's and the example kernel's 3 GiB split.
        kernel_start: 0xc000_0000,
        // `push ebp; mov ebp, esp`: the frame pointer points at the record.
        frame_record: FrameRecord { below: 0, align: 4 },
        return_address_on_stack: true,
        dwarf_registers: &["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"],
        dwarf_sp_fp: (4, 5),
        dwarf_fp_ra: None,
        // eip
        dwarf_return_column: 8,
        // cdecl: all on the stack.
        argument_registers: &[],
        return_register: "eax",
        // eax ecx edx ebx esp ebp esi edi eip eflags cs ss ds es fs gs, fs_base gs_base
        // k_gs_base, cr0 cr2 cr3 cr4 cr8 efer (4 bytes each), the x87 and SSE state: 344
        // bytes (QEMU 7.2 to 11.1, in the target description's order).
        gdb_core_regs: GdbLayout {
            word: 4,
            pc: 8 * 4,
            sp: 4 * 4,
            fp: 5 * 4,
            ra: None,
            privilege: Some(10 * 4),
            control: Some(19 * 4),
            page_table_base: Some(21 * 4),
            extended: Some(24 * 4),
            // fs_base, after the 16 registers eax to gs: the per-CPU offset in kernel mode.
            task_base: Some(16 * 4),
            task_base_user: None,
        },
        gdb_extra_registers: GdbExtraRegisters::NONE,
    },
    word: 4,
    regparm3: &["eax", "edx", "ecx"],
};

/// The register names x86_64 shares with i386.
pub(crate) const SHARED_NAMES: RegisterNames = RegisterNames {
    privilege: &["cs"],
    mode_control: &["cr0"],
    page_table_base: &["cr3"],
    ..RegisterNames::NONE
};

/// The interrupted stack pointer and CS from the frame the CPU pushed at the handler's stack
/// pointer, `[error code,] EIP/RIP, CS, EFLAGS[, ESP/RSP, SS]`, whose EIP/RIP word (first, or
/// second after an error code) lies at `from_pc` or up to 15 bytes after it (a trap, `int n`,
/// pushes the next instruction). x86_64 always pushes the stack pointer; i386 only when the
/// privilege changed, else it is just above the frame. `w` is the word size.
fn interrupted_frame(
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

impl Guest for X86 {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    /// CPL 3 is user; 0 to 2 kernel.
    fn privilege(&self, cs: u64) -> Privilege {
        match cs & 3 {
            3 => Privilege::User,
            _ => Privilege::Kernel,
        }
    }

    /// From `cr0` and `efer` (either may be unknown).
    fn cpu_mode(&self, cr0: Option<u64>, efer: Option<u64>) -> CpuMode {
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

    fn page_table_identity(&self, base: u64) -> u64 {
        base & !0xfff
    }

    /// In ring 0, `cs` is the kernel's selector.
    fn kernel_selector(&self, cs: u64) -> Option<u64> {
        (cs & 3 == 0 && cs <= 0xffff).then_some(cs)
    }

    fn argument_registers(&self, conv: Convention) -> &'static [&'static str] {
        match conv {
            Convention::C => self.facts.argument_registers,
            Convention::Regparm3 => self.regparm3,
        }
    }

    fn interrupted(
        &self,
        from_pc: u64,
        regs: &mut ReadRegister<'_>,
        mem: &mut ReadMemory<'_>,
    ) -> (Option<u64>, Option<u64>) {
        interrupted_frame(self.word, from_pc, regs, mem)
    }

    fn call_before(&self, before: &[u8], ret: u64) -> Option<Option<u64>> {
        insn::call_before(before, ret, self.word as u8)
    }

    fn is_return(&self, code: &[u8]) -> bool {
        insn::is_ret(code)
    }

    fn block_at(&self, start: u64, bytes: &[u8], out: &mut Vec<u64>) {
        insn::block_at(self.word as u32 * 8, start, bytes, out)
    }
}
