//! The headers of the raw (not ELF) kernel images arm64 and riscv64 boot from
//! (Linux's Documentation/arch/arm64/booting.rst and riscv/boot-image-header.rst): the same
//! 64-byte layout, the magic at 0x38.

use crate::Arch;

/// What an Image header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawImageHeader {
    pub arch: Arch,
    /// Where the image wants to sit above a 2 MiB-aligned base in physical memory.
    pub text_offset: u64,
    /// The image's size in memory (bss included); 0 in images older than the field.
    pub image_size: u64,
    /// The header's flags (arm64: bit 0 big-endian, bits 1-2 page size).
    pub flags: u64,
}

/// The header of an arm64 ("ARM\x64") or riscv64 ("RSC\x05") Image.
pub fn raw_image_header(data: &[u8]) -> Option<RawImageHeader> {
    let magic = data.get(0x38..0x3c)?;
    let arch = match magic {
        b"ARM\x64" => Arch::Aarch64,
        b"RSC\x05" => Arch::Riscv64,
        _ => return None,
    };
    let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
    Some(RawImageHeader {
        arch,
        text_offset: u64_at(8),
        image_size: u64_at(16),
        flags: u64_at(24),
    })
}
