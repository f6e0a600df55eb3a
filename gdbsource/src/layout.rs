//! Where QEMU's `g` packet keeps the registers a stack needs, per architecture, from QEMU's
//! target descriptions (gdb-xml/) and checked against QEMU 10.0.2's replies:
//!
//! - i386 (4 bytes each): eax ecx edx ebx esp ebp esi edi eip eflags cs ss ds es fs gs, the
//!   x87 and SSE state and more: 344 bytes.
//! - x86_64: rax rbx rcx rdx rsi rdi rbp rsp r8-r15 rip (8 bytes), eflags cs ss ds es fs gs
//!   (4), x87, SSE and more: 608 bytes.
//! - riscv64: x0-x31 then pc (8 bytes each, 264 bytes); `priv` and `satp` are read with `p`.
//! - aarch64: x0-x30, sp, pc (8 bytes), cpsr (4): 268 bytes; `TTBR0_EL1` is read with `p`.

use kern_profile_format::Arch;

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
    /// riscv `satp`, aarch64 `TTBR0_EL1` (read with `p`). x86 `cr3` is not read yet:
    /// QEMU 10's x86_64 `g` reply holds zeros where its description puts the control
    /// registers.
    pub page_table_base: Option<u64>,
}

/// A little-endian value of `len` bytes at `at`, if the reply holds it.
fn le(g: &[u8], at: usize, len: usize) -> Option<u64> {
    let b = g.get(at..at + len)?;
    let mut w = [0u8; 8];
    w[..len].copy_from_slice(b);
    Some(u64::from_le_bytes(w))
}

/// The core registers of an `arch` vCPU from its `g` reply; `None` when it is too short.
pub fn core_regs(arch: Arch, g: &[u8]) -> Option<CoreRegs> {
    Some(match arch {
        Arch::I386 => CoreRegs {
            sp: le(g, 4 * 4, 4)?,
            fp: le(g, 5 * 4, 4)?,
            pc: le(g, 8 * 4, 4)?,
            ra: None,
            privilege: le(g, 10 * 4, 4),
            page_table_base: None,
        },
        Arch::X86_64 => CoreRegs {
            fp: le(g, 6 * 8, 8)?,
            sp: le(g, 7 * 8, 8)?,
            pc: le(g, 16 * 8, 8)?,
            ra: None,
            privilege: le(g, 16 * 8 + 12, 4),
            page_table_base: None,
        },
        Arch::Riscv64 => CoreRegs {
            ra: Some(le(g, 8, 8)?),
            sp: le(g, 2 * 8, 8)?,
            fp: le(g, 8 * 8, 8)?,
            pc: le(g, 32 * 8, 8)?,
            privilege: None,
            page_table_base: None,
        },
        Arch::Aarch64 => CoreRegs {
            fp: le(g, 29 * 8, 8)?,
            ra: Some(le(g, 30 * 8, 8)?),
            sp: le(g, 31 * 8, 8)?,
            pc: le(g, 32 * 8, 8)?,
            privilege: le(g, 33 * 8, 4),
            page_table_base: None,
        },
    })
}

/// The registers read with `p`, by name in the target description, per architecture:
/// (privilege, page-table base).
pub fn extra_names(arch: Arch) -> (Option<&'static str>, Option<&'static str>) {
    match arch {
        Arch::Riscv64 => (Some("priv"), Some("satp")),
        Arch::Aarch64 => (None, Some("TTBR0_EL1")),
        Arch::I386 | Arch::X86_64 => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i386_reply_of_qemu_10() {
        // The first registers of a real reply (QEMU 10.0.2, the example kernel).
        let hex = "90010000040000009600000000000000502e1200582e120009fdaeb40d8060069001100016000000080000001000";
        let mut g = crate::packet::from_hex(hex.as_bytes()).unwrap();
        g.resize(344, 0);
        let r = core_regs(Arch::I386, &g).unwrap();
        assert_eq!((r.sp, r.fp, r.pc), (0x122e50, 0x122e58, 0x100190));
        assert_eq!(r.privilege, Some(8));
        assert!(core_regs(Arch::I386, &g[..20]).is_none());
    }

    #[test]
    fn aarch64_and_riscv64_offsets() {
        let mut g = vec![0u8; 268];
        for i in 0..33 {
            g[i * 8..i * 8 + 8].copy_from_slice(&(i as u64 + 0x100).to_le_bytes());
        }
        g[264..268].copy_from_slice(&5u32.to_le_bytes());
        let a = core_regs(Arch::Aarch64, &g).unwrap();
        assert_eq!((a.fp, a.ra, a.sp, a.pc), (0x11d, Some(0x11e), 0x11f, 0x120));
        assert_eq!(a.privilege, Some(5));
        let r = core_regs(Arch::Riscv64, &g[..264]).unwrap();
        assert_eq!((r.ra, r.sp, r.fp, r.pc), (Some(0x101), 0x102, 0x108, 0x120));
    }
}
