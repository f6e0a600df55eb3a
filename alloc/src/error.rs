use kern_profile_format::FormatError;

/// Everything [`analyze`](crate::analyze) and [`draw_timeline`](crate::draw_timeline) can fail
/// with.
#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    /// The trace could not be read, or (strict mode) holds a record with a bad op byte; the
    /// message names the byte offset.
    #[error("memtrace: {0}")]
    Format(#[from] FormatError),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// plotters could not draw or write the timeline.
    #[error("cannot draw the timeline {path}: {what}")]
    Plot { path: String, what: String },
}
