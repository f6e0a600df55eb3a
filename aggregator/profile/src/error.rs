//! Errors of the CPU profile path: reading samples, rendering, writing.

use std::path::PathBuf;

use kern_profile_format::FormatError;

use crate::symbolize::SymbolError;

/// What can go wrong between a raw file and an output.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Format { path: PathBuf, source: FormatError },
    #[error(transparent)]
    Symbols(#[from] SymbolError),
    #[error(
        "{} holds no exact instruction counts: record with the plugin's `exact=on` to use --exact",
        path.display()
    )]
    NoExactData { path: PathBuf },
    #[error(
        "{} holds allocation events only (recorded with alloc= and neither delay= nor period=): read it with --alloc",
        path.display()
    )]
    AllocationsOnly { path: PathBuf },
    #[error(
        "{} has no task records, which {what} needs: record with tasks= (Linux guests: elf=vmlinuz)",
        path.display()
    )]
    NoTasks { path: PathBuf, what: String },
    #[error(
        "{} was recorded without switches=...: no off-CPU time (--off-cpu needs the plugin's task-switch records)",
        path.display()
    )]
    NoSwitches { path: PathBuf },
    #[error("{0}")]
    Unsupported(String),
    #[error("cannot write {what}: {source}")]
    Write {
        what: String,
        source: std::io::Error,
    },
}
