//! A kernel's tables from its file: an ELF, or the vmlinux a Linux image holds (through
//! `kern-profile-linux-image`), for a guest of a given architecture. The plugin's `elf=` and
//! the command's `stacks --attach` both read them so.

use std::path::{Path, PathBuf};

use kern_profile_format::Arch;
use kern_profile_linux_image::{open, ImageError, Options};

use super::{Limits, TableError, TableStats, UnwindTables};

/// Why a kernel file gives no tables.
#[derive(Debug, thiserror::Error)]
pub enum KernelTablesError {
    /// Not a kernel image (the message names the file).
    #[error("{0}")]
    Image(#[from] ImageError),
    #[error("{}: {source}", path.display())]
    Tables { path: PathBuf, source: TableError },
    #[error("{}: a kernel for {found}, and the guest is {guest}", path.display())]
    WrongArch {
        path: PathBuf,
        found: &'static str,
        guest: &'static str,
    },
}

/// A kernel's tables, and what its ELF's header said otherwise.
#[derive(Debug, Clone)]
pub struct KernelTables {
    /// `None` when it has none (or is a raw arm64/riscv64 Image, which has no sections, or
    /// every entry was refused).
    pub tables: Option<UnwindTables>,
    /// Their entries used and refused (kept when every entry was refused, for the caller
    /// to say).
    pub stats: TableStats,
    /// Marked i386 but 64-bit, read as x86_64 (`kern_profile_arch::ElfGuest::remarked`): the
    /// caller tells the user ([`kern_profile_arch::REMARKED_NOTE`]).
    pub remarked: bool,
}

/// The tables of the kernel at `path` for an `arch` guest.
pub fn load_kernel_tables(path: &Path, arch: Arch) -> Result<KernelTables, KernelTablesError> {
    let image = open(path, &Options::default())?;
    if !image.is_elf() {
        return Ok(KernelTables {
            tables: None,
            stats: TableStats::default(),
            remarked: false,
        });
    }
    kernel_tables_of_elf(path, &image.bytes, arch)
}

/// As [`load_kernel_tables`], from the kernel's ELF bytes already read (`path` names it in
/// errors).
pub fn kernel_tables_of_elf(
    path: &Path,
    elf: &[u8],
    arch: Arch,
) -> Result<KernelTables, KernelTablesError> {
    let (tables, elf_guest) =
        UnwindTables::from_elf_guest(elf, Limits::default()).map_err(|source| {
            KernelTablesError::Tables {
                path: path.to_path_buf(),
                source,
            }
        })?;
    if tables.arch != arch {
        return Err(KernelTablesError::WrongArch {
            path: path.to_path_buf(),
            found: tables.arch.name(),
            guest: arch.name(),
        });
    }
    Ok(KernelTables {
        stats: tables.stats(),
        tables: (!tables.is_empty()).then_some(tables),
        remarked: elf_guest.remarked,
    })
}
