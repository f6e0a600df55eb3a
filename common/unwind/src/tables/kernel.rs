//! A kernel's tables from its file: an ELF, or the vmlinux a Linux image holds (through
//! `kern-profile-linux-image`), for a guest of a given architecture. The plugin's `elf=` and
//! the command's `stacks --attach` both read them so.

use std::path::{Path, PathBuf};

use kern_profile_format::Arch;
use kern_profile_linux_image::{open, ImageError, Options};

use super::{Limits, TableError, UnwindTables};

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

/// The tables of the kernel at `path` for an `arch` guest; `None` when it has none (or is a
/// raw arm64/riscv64 Image, which has no sections).
pub fn load_kernel_tables(
    path: &Path,
    arch: Arch,
) -> Result<Option<UnwindTables>, KernelTablesError> {
    let image = open(path, &Options::default())?;
    if !image.is_elf() {
        return Ok(None);
    }
    kernel_tables_of_elf(path, &image.bytes, arch)
}

/// As [`load_kernel_tables`], from the kernel's ELF bytes already read (`path` names it in
/// errors).
pub fn kernel_tables_of_elf(
    path: &Path,
    elf: &[u8],
    arch: Arch,
) -> Result<Option<UnwindTables>, KernelTablesError> {
    let tables = UnwindTables::from_elf(elf, Limits::default()).map_err(|source| {
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
    Ok((!tables.is_empty()).then_some(tables))
}
