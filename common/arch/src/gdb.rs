//! What a stack needs from QEMU's gdbstub `g` reply, whose layout each architecture's folder
//! gives ([`GdbLayout`], `Guest::gdb_core_regs`), from QEMU's target descriptions (gdb-xml/) and checked
//! against QEMU 10.0.2's replies.

/// The registers a stack needs, from one vCPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// riscv `ra`, aarch64 `x30`.
    pub ra: Option<u64>,
    /// x86 `cs`, aarch64 `cpsr` (riscv's `priv` is not in `g`).
    pub privilege: Option<u64>,
    /// x86 `cr3` (in `g`), riscv `satp`, aarch64 `TTBR0_EL1` (read with `p`).
    pub page_table_base: Option<u64>,
    /// x86 `cr0` and `efer` (in `g`): the CPU mode ([`crate::registers::cpu_mode`]).
    pub control: Option<u64>,
    pub extended: Option<u64>,
    /// x86_64 `gs_base` and `k_gs_base` (in `g`): where Linux finds its current task
    /// ([`crate::registers::Role::TaskBase`], [`crate::registers::Role::TaskBaseUser`]).
    pub task_base: Option<u64>,
    pub task_base_user: Option<u64>,
}

/// Where [`CoreRegs`] are in an architecture's `g` reply: byte offsets of registers of
/// `word` bytes each, but for the privilege register (x86 `cs`, aarch64 `cpsr`), which has 4.
/// A reply too short for `pc`, `sp`, `fp` or `ra` gives no registers; the others are optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GdbLayout {
    pub word: usize,
    pub pc: usize,
    pub sp: usize,
    pub fp: usize,
    pub ra: Option<usize>,
    pub privilege: Option<usize>,
    pub control: Option<usize>,
    pub page_table_base: Option<usize>,
    pub extended: Option<usize>,
    pub task_base: Option<usize>,
    pub task_base_user: Option<usize>,
}

impl GdbLayout {
    /// The registers a stack needs from the reply `g`; `None` when it is too short.
    pub fn core_regs(&self, g: &[u8]) -> Option<CoreRegs> {
        let w = self.word;
        let optional = |at: Option<usize>, len: usize| at.and_then(|at| le(g, at, len));
        Some(CoreRegs {
            pc: le(g, self.pc, w)?,
            sp: le(g, self.sp, w)?,
            fp: le(g, self.fp, w)?,
            ra: match self.ra {
                Some(at) => Some(le(g, at, w)?),
                None => None,
            },
            privilege: optional(self.privilege, 4),
            page_table_base: optional(self.page_table_base, w),
            control: optional(self.control, w),
            extended: optional(self.extended, w),
            task_base: optional(self.task_base, w),
            task_base_user: optional(self.task_base_user, w),
        })
    }
}

/// A little-endian value of `len` bytes at `at`, if the reply holds it.
fn le(g: &[u8], at: usize, len: usize) -> Option<u64> {
    let b = g.get(at..at + len)?;
    let mut w = [0u8; 8];
    w[..len].copy_from_slice(b);
    Some(u64::from_le_bytes(w))
}

#[cfg(test)]
mod tests {
    use crate::{guest, Arch};

    fn from_hex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn i386_reply_of_qemu_10() {
        // The first registers of a real reply (QEMU 10.0.2, the example kernel).
        let hex = "90010000040000009600000000000000502e1200582e120009fdaeb40d8060069001100016000000080000001000";
        let mut g = from_hex(hex);
        g.resize(344, 0);
        let r = guest(Arch::I386).gdb_core_regs(&g).unwrap();
        assert_eq!((r.sp, r.fp, r.pc), (0x122e50, 0x122e58, 0x100190));
        assert_eq!(r.privilege, Some(8));
        assert!(guest(Arch::I386).gdb_core_regs(&g[..20]).is_none());
    }

    #[test]
    fn x86_cr3_is_in_the_reply() {
        // QEMU 10.0.2, the i386 kernel's procs=on phase: ring 3 (cs 0x1b), paging on, program
        // B's page directory (its console: "cr3 0x110000"); the same bytes on 7.2 and 11.1.
        let hex = "78ce2f2488130000b30900000000000088ffff0488ffff04d43000009009000060020004\
                   020000001b00000023000000230000002300000023000000230000000000000000000000\
                   0000000013000080000000000000110010060000000000000000000000000000";
        let mut g = from_hex(hex);
        g.resize(344, 0);
        let r = guest(Arch::I386).gdb_core_regs(&g).unwrap();
        assert_eq!((r.pc, r.privilege), (0x4000260, Some(0x1b)));
        assert_eq!(r.page_table_base, Some(0x110000));
        // cr0 0x80000013: protected mode, paging on.
        assert_eq!(r.control, Some(0x8000_0013));
        assert_eq!(
            crate::registers::cpu_mode(Arch::I386, r.control, r.extended),
            crate::CpuMode::Paging
        );
        // QEMU 10.0.2, the x86_64 kernel in long mode: its boot page tables at 0x101000.
        let hex = "6e5161230153c66aa0860100000000000d05000000000000250e000000000000cd8c55ed\
                   d7af51ff7dc953750253c66a900e1280ffffffff900e1280ffffffff3300000000000000\
                   0300000000000000a086010000000000000000000000000000000000000000003b101200\
                   00000000362c000000000000200000000000000080711080ffffffff0200000008000000\
                   100000001000000010000000000000000000000000000000000000000000000000000000\
                   000000000000000013000080000000000000000000000000001010000000000020060000\
                   0000000000000000000000000005000000000000";
        let mut g = from_hex(hex);
        g.resize(608, 0);
        let r = guest(Arch::X86_64).gdb_core_regs(&g).unwrap();
        assert_eq!((r.pc, r.privilege), (0xffffffff80107180, Some(8)));
        assert_eq!(r.page_table_base, Some(0x101000));
        // efer 0x500: LME and LMA, long mode; no per-CPU area yet (gs_base, k_gs_base 0).
        assert_eq!(r.extended, Some(0x500));
        assert_eq!((r.task_base, r.task_base_user), (Some(0), Some(0)));
        assert_eq!(
            crate::registers::cpu_mode(Arch::X86_64, r.control, r.extended),
            crate::CpuMode::Long
        );
    }

    #[test]
    fn aarch64_and_riscv64_offsets() {
        let mut g = vec![0u8; 268];
        for i in 0..33 {
            g[i * 8..i * 8 + 8].copy_from_slice(&(i as u64 + 0x100).to_le_bytes());
        }
        g[264..268].copy_from_slice(&5u32.to_le_bytes());
        let a = guest(Arch::Aarch64).gdb_core_regs(&g).unwrap();
        assert_eq!((a.fp, a.ra, a.sp, a.pc), (0x11d, Some(0x11e), 0x11f, 0x120));
        assert_eq!(a.privilege, Some(5));
        let r = guest(Arch::Riscv64).gdb_core_regs(&g[..264]).unwrap();
        assert_eq!((r.ra, r.sp, r.fp, r.pc), (Some(0x101), 0x102, 0x108, 0x120));
    }
}
