//! The guest architectures a kernel image can be for, as the ELF header or the Image header
//! names them.

use std::fmt;

/// A kernel's instruction set, as `check_arch` compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    I386,
    X86_64,
    Aarch64,
    Riscv64,
}

impl Arch {
    /// Every architecture, in the order error messages list them.
    pub const ALL: [Arch; 4] = [Arch::I386, Arch::X86_64, Arch::Aarch64, Arch::Riscv64];

    /// The name QEMU's `qemu-system-*` and the CLI use.
    pub fn name(self) -> &'static str {
        match self {
            Arch::I386 => "i386",
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::Riscv64 => "riscv64",
        }
    }

    /// Size in bytes of a pointer (and of the kallsyms `PTR`/`ALGN` unit).
    pub fn pointer_size(self) -> usize {
        match self {
            Arch::I386 => 4,
            _ => 8,
        }
    }

    /// The architecture of an ELF with this `e_machine` and class (1: 32-bit, 2: 64-bit), by
    /// [`kern_profile_arch::elf_guest_of_header`]'s rule (a 64-bit ELF marked i386 is x86_64).
    pub fn from_elf(machine: u16, class: u8) -> Option<Arch> {
        use kern_profile_arch::Arch as Guest;
        Some(
            match kern_profile_arch::elf_guest_of_header(machine, class)?.arch {
                Guest::I386 => Arch::I386,
                Guest::X86_64 => Arch::X86_64,
                Guest::Aarch64 => Arch::Aarch64,
                Guest::Riscv64 => Arch::Riscv64,
            },
        )
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Arch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown architecture '{s}' (i386, x86_64, aarch64, riscv64)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_headers() {
        assert_eq!(Arch::from_elf(3, 1), Some(Arch::I386));
        assert_eq!(Arch::from_elf(62, 2), Some(Arch::X86_64));
        assert_eq!(Arch::from_elf(183, 2), Some(Arch::Aarch64));
        assert_eq!(Arch::from_elf(243, 2), Some(Arch::Riscv64));
        assert_eq!(Arch::from_elf(243, 1), None);
        assert_eq!(Arch::from_elf(40, 1), None);
        // Asterinas' OSDK marks its x86_64 kernels EM_386 in a 64-bit ELF.
        assert_eq!(Arch::from_elf(3, 2), Some(Arch::X86_64));
    }
}
