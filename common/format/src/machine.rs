//! What a version-2 sample says about the vCPU beyond its stack: the CPU mode, the privilege
//! level.

/// How the vCPU translated addresses when sampled. One byte in a version-2 sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CpuMode {
    /// Not recorded (every version-1 sample).
    #[default]
    Unknown = 0,
    /// x86 real mode (or virtual-8086): segment:offset addresses, firmware and boot code.
    Real = 1,
    /// Address translation off: x86 protected mode without paging, riscv `satp` mode Bare,
    /// aarch64 with the MMU off.
    PagingOff = 2,
    /// Address translation on: x86 protected mode with paging, riscv Sv39/Sv48/Sv57, aarch64
    /// with the MMU on.
    Paging = 3,
    /// x86_64 long mode (64-bit or compatibility code).
    Long = 4,
}

impl CpuMode {
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => CpuMode::Unknown,
            1 => CpuMode::Real,
            2 => CpuMode::PagingOff,
            3 => CpuMode::Paging,
            4 => CpuMode::Long,
            _ => return None,
        })
    }
}

/// The privilege level the vCPU ran at. One byte in a version-2 sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Privilege {
    /// Not recorded.
    #[default]
    Unknown = 0,
    /// x86 CPL 0 to 2, riscv S-mode, aarch64 EL1.
    Kernel = 1,
    /// x86 CPL 3, riscv U-mode, aarch64 EL0.
    User = 2,
    /// riscv M-mode, aarch64 EL2 and EL3 (x86 firmware runs at CPL 0: it reads as kernel,
    /// told apart by its CPU mode or addresses).
    Firmware = 3,
}

impl Privilege {
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => Privilege::Unknown,
            1 => Privilege::Kernel,
            2 => Privilege::User,
            3 => Privilege::Firmware,
            _ => return None,
        })
    }
}
