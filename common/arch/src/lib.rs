//! What kern-profile knows about each guest architecture, in one place: one folder per
//! architecture ([`x86`] for i386, [`x86_64`], [`riscv64`], [`aarch64`]), each a [`Guest`],
//! and one registry ([`guest`]) from the raw file's [`Arch`] to it. The walkers
//! (kern-profile-unwind), the plugin, the gdbstub source and the reports ask here instead of
//! matching on the architecture themselves.
//!
//! Adding an architecture: a variant of [`Arch`] (kern-profile-format, the raw file's header),
//! a folder here with its [`Facts`] and implementing [`Guest`], its line in [`guest`], and a
//! frame-record walker in kern-profile-unwind.

pub mod aarch64;
mod convention;
mod elf_guest;
mod facts;
mod frame_record;
pub mod gdb;
pub mod insn;
pub mod registers;
pub mod riscv64;
pub mod x86;
pub mod x86_64;

pub use convention::Convention;
pub use elf_guest::{elf_guest, elf_guest_of_header, ElfGuest, REMARKED_NOTE};
pub use facts::Facts;
pub use frame_record::FrameRecord;
pub use gdb::{CoreRegs, GdbLayout};
pub use kern_profile_format::{Arch, CpuMode, Privilege};
pub use registers::Role;

use insn::{Flow, Insn};

/// Reads a register of the vCPU by role (`None` when the guest has none or QEMU hides it).
pub type ReadRegister<'a> = dyn FnMut(Role) -> Option<u64> + 'a;
/// Fills its buffer with the guest memory at an address; `false` when it cannot be read.
pub type ReadMemory<'a> = dyn FnMut(u64, &mut [u8]) -> bool + 'a;

/// The facts of one guest architecture: its constant ones in [`Facts`], the others by code.
pub trait Guest: Sync {
    /// The constant facts, which the accessors below return.
    fn facts(&self) -> &Facts;

    /// The raw file's name for it.
    fn arch(&self) -> Arch {
        self.facts().arch
    }

    /// QEMU's target name (`qemu-system-<name>`, the plugin API's `target_name`).
    fn qemu_target(&self) -> &'static str {
        self.facts().qemu_target
    }

    /// The `<architecture>` names of QEMU's gdbstub target description.
    fn gdb_architectures(&self) -> &'static [&'static str] {
        self.facts().gdb_architectures
    }

    /// The ELF machines whose code runs on this guest.
    fn elf_machines(&self) -> &'static [object::Architecture] {
        self.facts().elf_machines
    }

    /// The names QEMU's plugin API may give the register of `role` (the first found is
    /// used); empty when the architecture has none.
    fn register_names(&self, role: Role) -> &'static [&'static str] {
        self.facts().register_names.of(role)
    }

    /// The privilege level a [`Role::Privilege`] register value means.
    fn privilege(&self, value: u64) -> Privilege;

    /// The CPU mode from the [`Role::ModeControl`] (riscv: [`Role::PageTableBase`]) and
    /// [`Role::ModeExtended`] registers, either possibly unknown.
    fn cpu_mode(&self, control: Option<u64>, extended: Option<u64>) -> CpuMode;

    /// Whether the page-table base register alone tells the CPU mode (riscv `satp`), so
    /// that it needs no cache.
    fn mode_in_page_table_base(&self) -> bool {
        self.facts().mode_in_page_table_base
    }

    /// The identity of the address space a page-table base ([`Role::PageTableBase`]) names:
    /// x86 drops CR3's low 12 bits (PCID or cache-control bits, which vary for one page
    /// directory).
    fn page_table_identity(&self, base: u64) -> u64 {
        base
    }

    /// The page-table base register's short name, for frames and warnings.
    fn page_table_register(&self) -> &'static str {
        self.facts().page_table_register
    }

    /// The kernel's code selector, when the privilege register holds one (x86 `cs` in ring
    /// 0): interrupts of kernel code are recognised by it.
    fn kernel_selector(&self, _privilege: u64) -> Option<u64> {
        None
    }

    /// The lowest kernel address of the usual higher-half split.
    fn kernel_start(&self) -> u64 {
        self.facts().kernel_start
    }

    /// A return address as saved, without what the architecture adds to it (aarch64
    /// pointer-authentication bits).
    fn clean_return_address(&self, addr: u64) -> u64 {
        addr
    }

    /// Where a frame pointer's record is (`{saved fp, return address}`, in words).
    fn frame_record(&self) -> FrameRecord {
        self.facts().frame_record
    }

    /// Whether a call leaves the return address on the stack (x86) rather than in a
    /// register (riscv `ra`, aarch64 `x30`).
    fn return_address_on_stack(&self) -> bool {
        self.facts().return_address_on_stack
    }

    /// QEMU's name of DWARF register `n` (the psABI numbering), if it is one an argument can
    /// be in.
    fn dwarf_register(&self, n: u16) -> Option<&'static str> {
        self.facts().dwarf_registers.get(n as usize).copied()
    }

    /// The stack and frame pointers' DWARF numbers.
    fn dwarf_sp_fp(&self) -> (u16, u16) {
        self.facts().dwarf_sp_fp
    }

    /// The DWARF numbers of the frame pointer and the return-address register, when the
    /// return address is in one.
    fn dwarf_fp_ra(&self) -> Option<(u16, u16)> {
        self.facts().dwarf_fp_ra
    }

    /// The column under which DWARF CFI gives the caller's return address: the
    /// return-address register where there is one, else (x86) the instruction pointer's
    /// number.
    fn dwarf_return_column(&self) -> u16 {
        self.facts().dwarf_return_column
    }

    /// The registers `conv` passes arguments in, first to last.
    fn argument_registers(&self, _conv: Convention) -> &'static [&'static str] {
        self.facts().argument_registers
    }

    /// The register a function returns its result in.
    fn return_register(&self) -> &'static str {
        self.facts().return_register
    }

    /// At an interrupt handler's first instruction (QEMU's discontinuity callback, `from_pc`
    /// the interrupted PC): the interrupted context's stack pointer and privilege register,
    /// each `None` where it cannot be recovered.
    fn interrupted(
        &self,
        from_pc: u64,
        regs: &mut ReadRegister<'_>,
        mem: &mut ReadMemory<'_>,
    ) -> (Option<u64>, Option<u64>);

    /// The instructions of code `bytes` at `start`, up to the first bytes that are none;
    /// `None` where instructions are not decoded (x86).
    fn decode(&self, _start: u64, _bytes: &[u8]) -> Option<Vec<Insn>> {
        None
    }

    /// The addresses of the instructions of code `bytes` at `start` up to the first one that
    /// does not pass control to the next (a jump, call, return or trap), which is included:
    /// the block TCG translates from `start`, as far as `bytes` go. Into `out`, cleared first.
    fn block_at(&self, start: u64, bytes: &[u8], out: &mut Vec<u64>) {
        out.clear();
        for i in self.decode(start, bytes).unwrap_or_default() {
            out.push(i.addr);
            if i.flow != Flow::Next {
                break;
            }
        }
    }

    /// Whether a call ends right at `ret`, given the (up to 8) code bytes `before` that end
    /// there: `Some(target)` when one does, `None` when `ret` is no return address (or the
    /// architecture's code is not decoded).
    fn call_before(&self, _before: &[u8], _ret: u64) -> Option<Option<u64>> {
        None
    }

    /// Whether `insn`, an instruction's first bytes, returns from a function: by default,
    /// whether the first one decoded does.
    fn is_return(&self, insn: &[u8]) -> bool {
        let decoded = self.decode(0, insn).unwrap_or_default();
        decoded.first().is_some_and(|i| i.flow == Flow::Return)
    }

    /// The registers a stack needs from the gdbstub's `g` reply; `None` when it is too short.
    fn gdb_core_regs(&self, g: &[u8]) -> Option<CoreRegs> {
        self.facts().gdb_core_regs.core_regs(g)
    }

    /// The registers read with `p` (outside `g`), by name in the target description.
    fn gdb_extra_registers(&self) -> GdbExtraRegisters {
        self.facts().gdb_extra_registers
    }
}

/// Registers a stack needs that the gdbstub's `g` reply lacks, read with `p`: each by the
/// names QEMU's versions give it in the target description, the first one found taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GdbExtraRegisters {
    /// The privilege level (riscv `priv`).
    pub privilege: &'static [&'static str],
    /// The page-table base (riscv `satp`, aarch64 `TTBR0_EL1`).
    pub page_table_base: &'static [&'static str],
    /// The control register the CPU mode comes from (aarch64 `SCTLR_EL1`: QEMU 11.1 calls
    /// it so, 7.2 to 10.0 `SCTLR`).
    pub control: &'static [&'static str],
    /// Where Linux keeps `current` (aarch64 `SP_EL0` in kernel mode), read only when
    /// samples name their task.
    pub task_base: &'static [&'static str],
    /// The same in user mode (riscv64 `sscratch`).
    pub task_base_user: &'static [&'static str],
}

impl GdbExtraRegisters {
    /// None read with `p` (x86: `g` holds them all).
    pub const NONE: GdbExtraRegisters = GdbExtraRegisters {
        privilege: &[],
        page_table_base: &[],
        control: &[],
        task_base: &[],
        task_base_user: &[],
    };
}

/// The CPU mode where one register's bit tells whether paging is `on` (riscv `satp`'s mode,
/// aarch64 `SCTLR`'s M), `None` when it is unknown.
pub(crate) fn paging(on: Option<bool>) -> CpuMode {
    match on {
        Some(false) => CpuMode::PagingOff,
        Some(true) => CpuMode::Paging,
        None => CpuMode::Unknown,
    }
}

/// The registry: the facts of `arch`.
pub fn guest(arch: Arch) -> &'static dyn Guest {
    match arch {
        Arch::I386 => &x86::I386,
        Arch::X86_64 => &x86_64::X86_64,
        Arch::Riscv64 => &riscv64::Riscv64,
        Arch::Aarch64 => &aarch64::Aarch64,
    }
}

/// Every guest kern-profile supports.
pub fn guests() -> [&'static dyn Guest; 4] {
    [
        &x86::I386,
        &x86_64::X86_64,
        &riscv64::Riscv64,
        &aarch64::Aarch64,
    ]
}

/// The guest of a QEMU whose target name is `name`.
pub fn from_qemu_target(name: &str) -> Option<Arch> {
    guests()
        .into_iter()
        .find(|g| g.qemu_target() == name)
        .map(|g| g.arch())
}

/// The guest an `<architecture>` of a gdbstub target description names.
pub fn from_gdb_architecture(name: &str) -> Option<Arch> {
    guests()
        .into_iter()
        .find(|g| g.gdb_architectures().contains(&name))
        .map(|g| g.arch())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_consistent() {
        for g in guests() {
            assert_eq!(guest(g.arch()).arch(), g.arch());
            assert_eq!(from_qemu_target(g.qemu_target()), Some(g.arch()));
            assert_eq!(g.qemu_target(), g.arch().name());
            for &m in g.elf_machines() {
                let is_64 = m.address_size() == Some(object::AddressSize::U64);
                assert_eq!(elf_guest(m, is_64).map(|e| e.arch), Some(g.arch()));
            }
        }
    }

    /// The DWARF numbers and the plugin API's names agree (they were two drifting copies).
    #[test]
    fn dwarf_numbers_name_the_roles_registers() {
        for g in guests() {
            let named = |n: u16, role: Role| {
                let name = g.dwarf_register(n);
                assert!(
                    name.is_some_and(|r| g.register_names(role).contains(&r)),
                    "{}: DWARF {n} is {name:?}, not a {role:?}",
                    g.qemu_target()
                );
            };
            let (sp, fp) = g.dwarf_sp_fp();
            named(sp, Role::StackPointer);
            named(fp, Role::FramePointer);
            match g.dwarf_fp_ra() {
                Some((fp_again, ra)) => {
                    assert_eq!(fp_again, fp);
                    named(ra, Role::ReturnAddress);
                }
                None => assert!(g.return_address_on_stack()),
            }
            let ret = g.return_register();
            assert!((0..32).any(|n| g.dwarf_register(n) == Some(ret)));
        }
    }

    #[test]
    fn page_tables() {
        assert_eq!(guest(Arch::I386).page_table_identity(0x10_f018), 0x10_f000);
        assert_eq!(
            guest(Arch::X86_64).page_table_identity(0x10_f001),
            0x10_f000
        );
        let satp = 0x8000_0000_0008_1234;
        assert_eq!(guest(Arch::Riscv64).page_table_identity(satp), satp);
        let names = guests().map(|g| g.page_table_register());
        assert_eq!(names, ["cr3", "cr3", "satp", "ttbr0"]);
    }

    /// A block ends at its first jump, call, return or trap, which it includes; an
    /// instruction cut off at the end of the bytes is not one.
    #[test]
    fn blocks_end_where_control_leaves() {
        let block = |arch: Arch, bytes: &[u8]| {
            let mut out = vec![1];
            guest(arch).block_at(0x1000, bytes, &mut out);
            out
        };
        // mov eax, 1; add eax, ebx; jmp $; nop
        let i386 = [0xb8, 1, 0, 0, 0, 0x01, 0xd8, 0xeb, 0xfe, 0x90];
        assert_eq!(block(Arch::I386, &i386), [0x1000, 0x1005, 0x1007]);
        assert_eq!(block(Arch::I386, &i386[..8]), [0x1000, 0x1005]);
        // push rbp; mov rbp, rsp; call +0; nop
        let x86_64 = [0x55, 0x48, 0x89, 0xe5, 0xe8, 0, 0, 0, 0, 0x90];
        assert_eq!(block(Arch::X86_64, &x86_64), [0x1000, 0x1001, 0x1004]);
        // addi a0, a0, 1; c.nop; c.jr ra; addi a0, a0, 1
        let riscv = [
            0x13, 0x05, 0x15, 0x00, 0x01, 0x00, 0x82, 0x80, 0x13, 0x05, 0x15, 0x00,
        ];
        assert_eq!(block(Arch::Riscv64, &riscv), [0x1000, 0x1004, 0x1006]);
        // nop; add x0, x0, #1; ret; nop
        let words: [u32; 4] = [0xd503201f, 0x91000400, 0xd65f03c0, 0xd503201f];
        let aarch64: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(block(Arch::Aarch64, &aarch64), [0x1000, 0x1004, 0x1008]);
        assert!(block(Arch::Aarch64, &[]).is_empty());
    }
}
