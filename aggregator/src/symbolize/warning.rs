//! What loading a symbol source could not use, as data; the wording is in
//! `crate::warning` with every other warning's.

use std::path::PathBuf;

/// A part of an ELF that was unusable; loading went on without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymbolWarning {
    /// The DWARF could not be read: names come from the symbol table only.
    UnreadableDwarf { path: PathBuf, error: String },
    /// The call-frame information could not be read: prologue analysis where it is missing.
    UnreadableCfi { path: PathBuf, error: String },
    /// Executable sections claim more bytes than the file holds: those from `section` on are
    /// not used.
    OverlappingCode { path: PathBuf, section: String },
}
