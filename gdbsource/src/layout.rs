//! Where QEMU's `g` packet keeps the registers a stack needs, per architecture: each
//! architecture's folder of kern-profile-arch gives its layout (`Guest::gdb_core_regs`, from
//! QEMU's target descriptions, checked against QEMU 10.0.2's replies) and the registers read
//! with `p` (`Guest::gdb_extra_registers`).

use kern_profile_arch::{guest, Arch};

pub use kern_profile_arch::CoreRegs;

/// The core registers of an `arch` vCPU from its `g` reply; `None` when it is too short.
pub fn core_regs(arch: Arch, g: &[u8]) -> Option<CoreRegs> {
    guest(arch).gdb_core_regs(g)
}

/// The registers read with `p`, by name in the target description, per architecture:
/// (privilege, page-table base).
pub fn extra_names(arch: Arch) -> (Option<&'static str>, Option<&'static str>) {
    guest(arch).gdb_extra_registers()
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
