//! The kernel argument, whatever form it takes: an ELF with symbols as is; a Linux image
//! (x86 bzImage, arm64/riscv64 Image, Image.gz, EFI zboot) or a vmlinux without symbols,
//! named from the kallsyms tables compiled into it (what `/proc/kallsyms` lists), so that a
//! distribution's `vmlinuz` alone names every kernel function.

use std::path::Path;

use kern_profile_format::{read_elf_input, Arch, ElfInput};
use kern_profile_linux_image::{self as image, ImageError, KernelImage};

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
