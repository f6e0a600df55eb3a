//! What loading a symbol source could not use, or read other than its header says; the
//! report prints it among its warnings.

use std::fmt;
use std::path::PathBuf;

/// A part of an ELF that was unusable (loading went on without it), or read otherwise than
/// marked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymbolWarning {
    /// The DWARF could not be read: names come from the symbol table only.
    UnreadableDwarf { path: PathBuf, error: String },
    /// The call-frame information could not be read: prologue analysis where it is missing.
    UnreadableCfi { path: PathBuf, error: String },
    /// Executable sections claim more bytes than the file holds: those from `section` on are
    /// not used.
    OverlappingCode { path: PathBuf, section: String },
    /// Marked i386 but a 64-bit ELF (Asterinas' OSDK's kernels): read as x86_64's
    /// (`kern_profile_arch::ElfGuest::remarked`).
    RemarkedElf { path: PathBuf },
    /// The kernel's unwind tables have entries the checks refuse (what the plugin's `elf=`
    /// leaves out): `line` is kern_profile_unwind's `tables::refusals_line`.
    RefusedUnwindEntries { line: String },
}

impl fmt::Display for SymbolWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymbolWarning::UnreadableDwarf { path, error } => write!(
                f,
                "{}: unreadable DWARF: {error}; using the symbol table only",
                path.display()
            ),
            SymbolWarning::UnreadableCfi { path, error } => write!(
                f,
                "{}: unreadable call-frame information ({error}); prologue analysis where \
                 it is missing",
                path.display()
            ),
            SymbolWarning::OverlappingCode { path, section } => write!(
                f,
                "{}: executable sections overlap (more code than the file holds); those \
                 after {section} are not used",
                path.display()
            ),
            SymbolWarning::RemarkedElf { path } => write!(
                f,
                "{}: {}",
                path.display(),
                kern_profile_arch::REMARKED_NOTE
            ),
            SymbolWarning::RefusedUnwindEntries { line } => f.write_str(line),
        }
    }
}
