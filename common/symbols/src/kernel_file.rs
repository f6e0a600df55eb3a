//! The kernel argument, whatever form it takes: an ELF with symbols as is; a Linux image
//! (x86 bzImage, arm64/riscv64 Image, Image.gz, EFI zboot) or a vmlinux without symbols,
//! named from the kallsyms tables compiled into it (what `/proc/kallsyms` lists), so that a
//! distribution's `vmlinuz` alone names every kernel function.

use std::path::Path;

use kern_profile_format::{read_elf_input, Arch, ElfInput};
use kern_profile_linux_image::{self as image, ImageError, KernelImage};
use kern_profile_unwind::KernelOs;
use object::{Object, ObjectSymbol};

use super::table::{RawSymbol, SymbolTable};
use super::{ElfImage, SymbolError, SymbolWarning};

/// A kernel file, loaded for naming.
pub struct KernelFile {
    /// The ELF given, or the vmlinux a Linux image holds (its code and segments; no names
    /// when stripped). `None` for a raw arm64/riscv64 Image.
    pub elf: Option<ElfImage>,
    /// Names from the image's kallsyms tables, when the ELF has none or there is no ELF.
    pub kallsyms: Option<KallsymsNames>,
    /// The ELF's bytes (the vmlinux unpacked from a Linux image), for a caller that reads more
    /// of it (its unwind tables) without reading and unpacking the file again.
    pub vmlinux: Option<Vec<u8>>,
}

impl std::fmt::Debug for KernelFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelFile")
            .field("elf", &self.elf.as_ref().map(|e| e.path.clone()))
            .field(
                "kallsyms",
                &self.kallsyms.as_ref().map(|k| k.table.symbols().len()),
            )
            .field("vmlinux", &self.vmlinux.as_ref().map(Vec::len))
            .finish()
    }
}

/// The code symbols of a Linux image's kallsyms tables.
pub struct KallsymsNames {
    pub table: SymbolTable,
    /// The kernel's architecture, from its ELF or Image header.
    pub arch: Option<Arch>,
    /// How the file holds the kernel, for messages (`bzImage, xz`).
    pub container: String,
}

impl KernelFile {
    /// Loads the kernel at `path`. An ELF with symbols or DWARF is read as [`ElfImage::load`]
    /// reads it (nothing more); a stripped ELF is named from its kallsyms when it has some
    /// (a vmlinux), else by nothing; anything else is unpacked as a Linux image and named
    /// from its kallsyms.
    pub fn load(path: &Path) -> Result<Self, SymbolError> {
        let open_err = |source| SymbolError::Open {
            path: path.to_path_buf(),
            source,
        };
        let image = match read_elf_input(path).map_err(open_err)? {
            ElfInput::Elf(data) => {
                let elf = checked(ElfImage::parse(&data, path)?, &data, path);
                if !elf.is_stripped() {
                    return Ok(KernelFile {
                        elf: Some(elf),
                        kallsyms: None,
                        vmlinux: Some(data),
                    });
                }
                // A stripped ELF that is no Linux names nothing by itself: the caller says
                // so, unless symbol maps name it.
                let image = image::parse(path, data, &image::Options::default()).ok();
                let kallsyms = image.as_ref().and_then(|i| kallsyms_names(i).ok());
                return Ok(KernelFile {
                    elf: Some(elf),
                    kallsyms,
                    vmlinux: image.map(|i| i.bytes),
                });
            }
            ElfInput::NotElf(first) => image::open(path, &image::Options::default())
                .map_err(|e| not_an_image(e, &first, path))?,
        };
        let kallsyms = kallsyms_names(&image)?;
        let (elf, vmlinux) = if image.is_elf() {
            let elf = checked(ElfImage::parse(&image.bytes, path)?, &image.bytes, path);
            (Some(elf), Some(image.bytes))
        } else {
            (None, None)
        };
        Ok(KernelFile {
            elf,
            kallsyms: Some(kallsyms),
            vmlinux,
        })
    }

    /// The kernel's code symbols: the kallsyms names when read, else the ELF's.
    pub fn symbols(&self) -> Option<&SymbolTable> {
        match (&self.kallsyms, &self.elf) {
            (Some(k), _) => Some(&k.table),
            (None, Some(e)) => Some(&e.symbols),
            (None, None) => None,
        }
    }

    /// The kernel without its unpacked image's bytes: what naming needs, for a caller that
    /// keeps it while something else reads the tables (the plugin, or tables already built).
    pub fn without_vmlinux(self) -> Self {
        KernelFile {
            vmlinux: None,
            ..self
        }
    }

    /// What the stack walks may assume of the kernel (Linux's layouts or not,
    /// [`KernelOs`]): Linux when named from its kallsyms, or when its ELF's symbol table
    /// names one of [`LINUX_SYMBOLS`]; another kernel when that table names none of them;
    /// unknown without names. Stricter than [`KernelFile::is_linux`]: a hobby kernel may
    /// well have a `start_kernel`, and a walk that takes Linux's layouts on it invents
    /// entries.
    pub fn kernel_os(&self) -> KernelOs {
        if self.kallsyms.is_some() {
            return KernelOs::Linux;
        }
        // The whole symbol table (`linux_banner` is data) when the bytes are still here.
        if let Some(os) = self.vmlinux.as_deref().and_then(elf_os) {
            return os;
        }
        match self.elf.as_ref().map(|e| e.symbols.symbols()) {
            Some(syms) if syms.iter().any(|s| LINUX_SYMBOLS.contains(&&*s.name)) => KernelOs::Linux,
            Some(syms) if !syms.is_empty() => KernelOs::Other,
            _ => KernelOs::Unknown,
        }
    }

    /// True for a Linux kernel: one named from its kallsyms, or an ELF with `start_kernel`.
    pub fn is_linux(&self) -> bool {
        self.kallsyms.is_some()
            || self.elf.as_ref().is_some_and(|e| {
                e.symbols
                    .symbols()
                    .iter()
                    .any(|s| &*s.name == "start_kernel")
            })
    }
}

/// Symbols only Linux defines: its version banner, and its x86 entries for system calls
/// (x86_64's `syscall`, i386's `int 0x80` and `sysenter`).
pub const LINUX_SYMBOLS: [&str; 4] = [
    "linux_banner",
    "entry_SYSCALL_64",
    "entry_INT80_32",
    "entry_SYSENTER_32",
];

/// What the stack walks may assume of the kernel `image` holds ([`KernelOs`]), as the plugin's
/// `elf=` reads it: Linux when its ELF's symbol table names one of [`LINUX_SYMBOLS`], or, with
/// no symbol table (a bzImage's vmlinux, a raw Image), when kallsyms tables are found in it;
/// another kernel when its symbol table names none of them; unknown otherwise.
pub fn kernel_os_of_image(image: &KernelImage) -> KernelOs {
    if let Some(os) = image.is_elf().then(|| elf_os(&image.bytes)).flatten() {
        return os;
    }
    match image.kallsyms() {
        Ok(_) => KernelOs::Linux,
        Err(_) => KernelOs::Unknown,
    }
}

/// The OS an ELF's symbol table names: Linux when it holds one of [`LINUX_SYMBOLS`], another
/// when it holds symbols but none of them; `None` without a symbol table (or not an ELF).
fn elf_os(elf: &[u8]) -> Option<KernelOs> {
    let file = object::File::parse(elf).ok()?;
    let mut named = false;
    for s in file.symbols() {
        match s.name() {
            Ok(n) if LINUX_SYMBOLS.contains(&n) => return Some(KernelOs::Linux),
            Ok(n) if !n.is_empty() => named = true,
            _ => {}
        }
    }
    named.then_some(KernelOs::Other)
}

/// `elf` with a warning when the checks of its unwind tables (what the plugin's `elf=` walks
/// with) refuse some entry: the report's line about them.
fn checked(mut elf: ElfImage, bytes: &[u8], path: &Path) -> ElfImage {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    if let Some(line) = kern_profile_unwind::tables::refusals_line(&name, bytes) {
        elf.warnings
            .push(SymbolWarning::RefusedUnwindEntries { line });
    }
    elf
}

/// The kallsyms names of the Linux image at `path`, without loading its vmlinux for naming.
pub(crate) fn kallsyms_of(path: &Path) -> Result<KallsymsNames, SymbolError> {
    let image = image::open(path, &image::Options::default()).map_err(|e| image_error(e, path))?;
    kallsyms_names(&image)
}

/// The text symbols of `image`'s kallsyms; an error names the file and why none were found.
fn kallsyms_names(image: &KernelImage) -> Result<KallsymsNames, SymbolError> {
    let container = describe(image);
    let syms = image.kallsyms().map_err(|source| SymbolError::NoKallsyms {
        container: container.clone(),
        source,
    })?;
    let raw: Vec<RawSymbol> = syms
        .symbols
        .into_iter()
        .filter(|s| s.is_text())
        .map(|s| RawSymbol {
            start: s.address,
            // kallsyms has no sizes: a function runs to the next symbol of any kind.
            size: (s.size > 0).then_some(s.size),
            name: s.name,
            is_function: false,
        })
        .collect();
    Ok(KallsymsNames {
        table: SymbolTable::new(raw, |_| None),
        arch: image.arch().map(sample_arch),
        container,
    })
}

/// The samples' name for an image's architecture.
fn sample_arch(a: image::Arch) -> Arch {
    match a {
        image::Arch::I386 => Arch::I386,
        image::Arch::X86_64 => Arch::X86_64,
        image::Arch::Aarch64 => Arch::Aarch64,
        image::Arch::Riscv64 => Arch::Riscv64,
    }
}

/// `bzImage, xz`, `Image`, `vmlinux ELF`: how the file holds the kernel.
fn describe(image: &KernelImage) -> String {
    use image::Container;
    let container = match image.container {
        Container::Elf => "vmlinux ELF",
        Container::BzImage { .. } => "bzImage",
        Container::RawImage => "Image",
        Container::EfiZboot => "EFI zboot image",
        Container::Compressed { .. } => "compressed kernel",
    };
    match image.compression {
        Some(c) => format!("{container}, {c}"),
        None => container.to_string(),
    }
}

/// An image error; a file that is no kernel image at all keeps the not-an-ELF error.
fn not_an_image(e: ImageError, first: &[u8], path: &Path) -> SymbolError {
    match e {
        ImageError::UnknownCompression { offset: 0, .. } => super::elf::not_elf(first, path),
        ImageError::Truncated { .. } if first.len() < 0x40 => super::elf::not_elf(first, path),
        e => image_error(e, path),
    }
}

fn image_error(source: ImageError, path: &Path) -> SymbolError {
    SymbolError::Image {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal x86_64 ELF whose symbol table holds `names` (absolute data symbols) and
    /// nothing else; no symbol table at all without names.
    fn elf_with_symbols(names: &[&str]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24];
        for (i, n) in names.iter().enumerate() {
            let at = strtab.len() as u32;
            strtab.extend_from_slice(n.as_bytes());
            strtab.push(0);
            symtab.extend_from_slice(&at.to_le_bytes());
            symtab.push(0x11); // global object
            symtab.push(0);
            symtab.extend_from_slice(&0xfff1u16.to_le_bytes()); // absolute
            symtab.extend_from_slice(&(0xffff_ffff_8200_0000u64 + 8 * i as u64).to_le_bytes());
            symtab.extend_from_slice(&8u64.to_le_bytes());
        }
        let shstrtab = b"\0.strtab\0.symtab\0.shstrtab\0";
        let sections = if names.is_empty() { 2 } else { 4 };
        let data_at = 64 + 64 * sections as u64;
        let mut out = vec![0u8; data_at as usize];
        out[..16].copy_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        let put = |out: &mut Vec<u8>, at: usize, v: &[u8]| out[at..at + v.len()].copy_from_slice(v);
        put(&mut out, 16, &2u16.to_le_bytes()); // executable
        put(&mut out, 18, &62u16.to_le_bytes()); // x86_64
        put(&mut out, 20, &1u32.to_le_bytes());
        put(&mut out, 40, &64u64.to_le_bytes()); // section headers
        put(&mut out, 52, &64u16.to_le_bytes());
        put(&mut out, 54, &56u16.to_le_bytes());
        put(&mut out, 58, &64u16.to_le_bytes());
        put(&mut out, 60, &(sections as u16).to_le_bytes());
        put(&mut out, 62, &(sections as u16 - 1).to_le_bytes()); // .shstrtab, last
        let header = |out: &mut Vec<u8>, i: usize, name: u32, kind: u32, bytes: &[u8]| {
            let offset = out.len() as u64;
            out.extend_from_slice(bytes);
            while !out.len().is_multiple_of(8) {
                out.push(0);
            }
            let h = 64 + 64 * i;
            put(out, h, &name.to_le_bytes());
            put(out, h + 4, &kind.to_le_bytes());
            put(out, h + 24, &offset.to_le_bytes());
            put(out, h + 32, &(bytes.len() as u64).to_le_bytes());
            put(out, h + 48, &8u64.to_le_bytes());
            if kind == 2 {
                put(out, h + 40, &1u32.to_le_bytes()); // its names: .strtab
                put(out, h + 44, &1u32.to_le_bytes());
                put(out, h + 56, &24u64.to_le_bytes());
            }
        };
        if names.is_empty() {
            header(&mut out, 1, 17, 3, shstrtab);
        } else {
            header(&mut out, 1, 1, 3, &strtab);
            header(&mut out, 2, 9, 2, &symtab);
            header(&mut out, 3, 17, 3, shstrtab);
        }
        out
    }

    fn os_of(names: &[&str]) -> KernelOs {
        let path = Path::new("k.elf");
        let image = image::parse(path, elf_with_symbols(names), &Default::default()).unwrap();
        kernel_os_of_image(&image)
    }

    /// Any of Linux's own symbols makes it Linux; other names another kernel (a hobby
    /// kernel's `start_kernel` included); no symbol table and no kallsyms, nothing known.
    #[test]
    fn the_symbol_table_says_which_kernel() {
        for linux in LINUX_SYMBOLS {
            assert_eq!(os_of(&["kmain", linux]), KernelOs::Linux, "{linux}");
        }
        assert_eq!(os_of(&["kmain", "start_kernel"]), KernelOs::Other);
        assert_eq!(
            os_of(&["SYSTEM_$$_MAIN", "KERNEL_$$_SPIN"]),
            KernelOs::Other
        );
        assert_eq!(os_of(&[]), KernelOs::Unknown);
        assert_eq!(elf_os(b"not an ELF"), None);
    }
}
