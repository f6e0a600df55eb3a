//! Names for addresses no symbol covers, from where the CPU was (raw format version 2 records
//! each sample's CPU mode and privilege): a user cannot tell boot time from a symbol problem
//! when both are `[unknown]`.
//!
//! | where | name |
//! | --- | --- |
//! | firmware privilege (riscv M-mode, aarch64 EL2/3), x86 real mode, or the PC BIOS areas with paging off | `[firmware]` |
//! | translation off elsewhere (a kernel's decompressor and early boot) | `[boot, paging off]` |
//! | translation on, kernel privilege, below the kernel's symbols | `[boot]` |
//! | translation on, kernel privilege, among the kernel's symbols | `[kernel 0x… no symbol]` (its 4 KiB page) |
//! | beyond a kernel entry (or a stack switch out of system-call entry code), outside the kernel | `[user]` |
//! | anything else, and every address of a version-1 file | `[unknown]` |
//!
//! (The user part of a stack, past an entry from user space or all of a user-mode sample, is
//! named by `stacks.rs` from the `--user` programs alone: `[user 0x…]` where none does.)

use kern_profile_format::CpuMode;

pub const FIRMWARE_FRAME: &str = "[firmware]";
pub const BOOT_PAGING_OFF_FRAME: &str = "[boot, paging off]";
pub const BOOT_FRAME: &str = "[boot]";

/// Where a sample's CPU was, as a stack key keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuState {
    pub mode: CpuMode,
    /// Firmware privilege (riscv M-mode, aarch64 EL2 or EL3).
    pub firmware: bool,
}

/// What an unnamed address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unnamed {
    Unknown,
    Firmware,
    BootPagingOff,
    Boot,
    User,
    /// In the kernel's range without a symbol: the address's 4 KiB page.
    Kernel(u64),
}

/// What the kernel's symbols say about an address.
pub trait KernelSpace {
    /// The address lies in the kernel (its ELF's segments, or at or above its lowest symbol).
    fn holds(&self, addr: u64) -> bool;
}

impl KernelSpace for crate::symbolize::Symbolizer {
    fn holds(&self, addr: u64) -> bool {
        self.kernel_holds(addr)
    }
}

/// The PC's BIOS areas: option ROMs, the BIOS (0xC0000 to 1 MiB), and the top-of-4-GiB ROM.
fn in_pc_firmware(addr: u64) -> bool {
    (0xC_0000..0x10_0000).contains(&addr) || (0xFFFC_0000..=0xFFFF_FFFF).contains(&addr)
}

/// Classifies unnamed `addr` of a sample taken in `cpu`; `beyond_entry` when a kernel-entry
/// marker, or a stack switch out of system-call entry code, lies between it and the sampled
/// PC (the interrupted context, kernel or user).
pub fn classify(
    addr: u64,
    cpu: CpuState,
    beyond_entry: bool,
    kernel: &impl KernelSpace,
) -> Unnamed {
    if beyond_entry && !kernel.holds(addr) {
        return Unnamed::User;
    }
    if cpu.firmware || cpu.mode == CpuMode::Real {
        return Unnamed::Firmware;
    }
    match cpu.mode {
        CpuMode::PagingOff if in_pc_firmware(addr) => Unnamed::Firmware,
        CpuMode::PagingOff => Unnamed::BootPagingOff,
        CpuMode::Paging | CpuMode::Long if kernel.holds(addr) => Unnamed::Kernel(addr & !0xfff),
        CpuMode::Paging | CpuMode::Long => Unnamed::Boot,
        _ => Unnamed::Unknown,
    }
}

impl Unnamed {
    /// The frame name (`[unknown]` is the caller's own constant).
    pub fn name(self, unknown: &str) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow::*;
        match self {
            Unnamed::Unknown => Owned(unknown.to_string()),
            Unnamed::Firmware => Borrowed(FIRMWARE_FRAME),
            Unnamed::BootPagingOff => Borrowed(BOOT_PAGING_OFF_FRAME),
            Unnamed::Boot => Borrowed(BOOT_FRAME),
            Unnamed::User => Borrowed(crate::stacks::USER_FRAME),
            Unnamed::Kernel(page) => Owned(format!("[kernel {page:#x} no symbol]")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel at 0xc1000000 and up.
    struct HighKernel;
    impl KernelSpace for HighKernel {
        fn holds(&self, addr: u64) -> bool {
            addr >= 0xc100_0000
        }
    }

    fn cpu(mode: CpuMode) -> CpuState {
        CpuState {
            mode,
            firmware: false,
        }
    }

    #[test]
    fn names_follow_the_cpu_mode_and_the_kernel_range() {
        let k = &HighKernel;
        assert_eq!(
            classify(0xf_1234, cpu(CpuMode::Real), false, k),
            Unnamed::Firmware
        );
        assert_eq!(
            classify(0xf_1234, cpu(CpuMode::PagingOff), false, k),
            Unnamed::Firmware
        );
        assert_eq!(
            classify(0xffff_fff0, cpu(CpuMode::PagingOff), false, k),
            Unnamed::Firmware
        );
        assert_eq!(
            classify(0x1fe_0000, cpu(CpuMode::PagingOff), false, k),
            Unnamed::BootPagingOff
        );
        assert_eq!(
            classify(0x100_0000, cpu(CpuMode::Long), false, k),
            Unnamed::Boot
        );
        assert_eq!(
            classify(0xc1a0_1234, cpu(CpuMode::Paging), false, k),
            Unnamed::Kernel(0xc1a0_1000)
        );
        let m = CpuState {
            mode: CpuMode::PagingOff,
            firmware: true,
        };
        assert_eq!(classify(0x8000_0000, m, false, k), Unnamed::Firmware);
        // Version 1: no mode.
        assert_eq!(
            classify(0x1234, cpu(CpuMode::Unknown), false, k),
            Unnamed::Unknown
        );
    }

    #[test]
    fn beyond_a_kernel_entry_outside_the_kernel_is_user() {
        let k = &HighKernel;
        for mode in [CpuMode::Unknown, CpuMode::Paging] {
            assert_eq!(classify(0x0804_8000, cpu(mode), true, k), Unnamed::User);
        }
        assert_eq!(
            classify(0xc1a0_1234, cpu(CpuMode::Paging), true, k),
            Unnamed::Kernel(0xc1a0_1000)
        );
    }

    #[test]
    fn names() {
        assert_eq!(
            Unnamed::Kernel(0xc1a0_1000).name("[unknown]"),
            "[kernel 0xc1a01000 no symbol]"
        );
        assert_eq!(Unnamed::Unknown.name("[unknown]"), "[unknown]");
        assert_eq!(Unnamed::User.name("[unknown]"), "[user]");
    }
}
