//! The guest an ELF's code runs on, from its header: the one rule every reader of a kernel's
//! ELF follows (symbols, unwind tables, the plugin's `elf=` and `alloc=`, `record`, Linux
//! images), so that they all agree on a file.

use object::Architecture as Machine;

use crate::{guests, Arch};

/// What a user is told of an ELF [`ElfGuest::remarked`], after its path.
pub const REMARKED_NOTE: &str =
    "the ELF is marked i386 (e_machine EM_386) but is 64-bit (ELFCLASS64): taken as x86_64";

/// The guest of an ELF's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfGuest {
    pub arch: Arch,
    /// The header said i386 of a 64-bit ELF: Asterinas' OSDK marks its x86_64 kernels so,
    /// because QEMU's multiboot loader refuses x86_64 ELFs. No i386 ELF is 64-bit, so the
    /// code is x86_64's; the user is told ([`REMARKED_NOTE`]).
    pub remarked: bool,
}

/// The guest of an ELF of `machine` (as `object` names its `e_machine` and class), 64-bit
/// when `is_64`; `None` for a machine of no supported guest.
pub fn elf_guest(machine: Machine, is_64: bool) -> Option<ElfGuest> {
    if machine == Machine::I386 && is_64 {
        return Some(ElfGuest {
            arch: Arch::X86_64,
            remarked: true,
        });
    }
    let arch = guests()
        .into_iter()
        .find(|g| g.elf_machines().contains(&machine))?
        .arch();
    Some(ElfGuest {
        arch,
        remarked: false,
    })
}

/// [`elf_guest`] from an ELF header's raw `e_machine` and class (`EI_CLASS`: 1 for 32-bit,
/// 2 for 64-bit), for a reader of the header alone (a Linux image's vmlinux); `None` for a
/// machine of no supported guest or a class that is neither.
pub fn elf_guest_of_header(e_machine: u16, class: u8) -> Option<ElfGuest> {
    use object::elf;
    let is_64 = match class {
        elf::ELFCLASS32 => false,
        elf::ELFCLASS64 => true,
        _ => return None,
    };
    // `object`'s names of the machines the guests run, as its ELF reader gives them.
    let machine = match (e_machine, is_64) {
        (elf::EM_386, _) => Machine::I386,
        (elf::EM_X86_64, true) => Machine::X86_64,
        (elf::EM_X86_64, false) => Machine::X86_64_X32,
        (elf::EM_AARCH64, true) => Machine::Aarch64,
        (elf::EM_RISCV, true) => Machine::Riscv64,
        _ => return None,
    };
    elf_guest(machine, is_64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(arch: Arch) -> Option<ElfGuest> {
        Some(ElfGuest {
            arch,
            remarked: false,
        })
    }

    #[test]
    fn machines_and_classes() {
        use Machine as M;
        assert_eq!(elf_guest(M::I386, false), plain(Arch::I386));
        assert_eq!(elf_guest(M::X86_64, true), plain(Arch::X86_64));
        assert_eq!(elf_guest(M::X86_64_X32, false), plain(Arch::X86_64));
        assert_eq!(elf_guest(M::Riscv64, true), plain(Arch::Riscv64));
        assert_eq!(elf_guest(M::Aarch64, true), plain(Arch::Aarch64));
        assert_eq!(elf_guest(M::Riscv32, false), None);
        assert_eq!(elf_guest(M::Arm, false), None);
    }

    /// OSDK's kernels: EM_386 in an ELFCLASS64 file.
    #[test]
    fn a_64_bit_i386_elf_is_x86_64_remarked() {
        let remarked = Some(ElfGuest {
            arch: Arch::X86_64,
            remarked: true,
        });
        assert_eq!(elf_guest(Machine::I386, true), remarked);
        assert_eq!(elf_guest_of_header(3, 2), remarked);
        assert!(REMARKED_NOTE.contains("i386") && REMARKED_NOTE.ends_with("taken as x86_64"));
    }

    #[test]
    fn headers_agree_with_the_machines() {
        assert_eq!(elf_guest_of_header(3, 1), plain(Arch::I386));
        assert_eq!(elf_guest_of_header(62, 2), plain(Arch::X86_64));
        assert_eq!(elf_guest_of_header(183, 2), plain(Arch::Aarch64));
        assert_eq!(elf_guest_of_header(243, 2), plain(Arch::Riscv64));
        assert_eq!(elf_guest_of_header(243, 1), None);
        assert_eq!(elf_guest_of_header(40, 1), None);
        assert_eq!(elf_guest_of_header(62, 0), None);
        assert_eq!(elf_guest_of_header(3, 7), None);
    }
}
