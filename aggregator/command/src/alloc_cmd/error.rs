//! Errors of allocation mode.

use std::path::PathBuf;

use kern_profile_alloc::AllocError;

use crate::symbolize::SymbolError;

/// What can go wrong in allocation mode.
#[derive(Debug, thiserror::Error)]
pub enum AllocCmdError {
    #[error("cannot read {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Analyze { path: PathBuf, source: AllocError },
    #[error(transparent)]
    Symbols(#[from] SymbolError),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// plotters could not draw the timeline.
    #[error("cannot draw the timeline {}: {what}", path.display())]
    Plot { path: PathBuf, what: String },
}
