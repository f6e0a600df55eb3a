use kern_profile_format::FormatError;

/// Everything [`analyze`](crate::analyze) and [`analyze_raw`](crate::analyze_raw) can fail
/// with.
#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    /// The trace could not be read, or (strict mode) holds a record with a bad op byte; the
    /// message names the byte offset.
    #[error("memtrace: {0}")]
    Format(#[from] FormatError),
    /// A kern-profile raw file that could not be read; the message names the byte offset.
    #[error("raw file: {0}")]
    Raw(FormatError),
    #[error("this raw file holds no allocation events: record them with the plugin's alloc=SPEC (docs/plugin-arguments.md), or read its CPU samples without --alloc")]
    NoAllocationEvents,
    #[error(
        "raw file: the allocation event at byte offset {offset} comes before the allocator table"
    )]
    EventBeforeTable { offset: u64 },
    #[error("raw file: the allocation event at byte offset {offset} names hooked function {function}, which the allocator table lacks")]
    UnknownFunction { offset: u64, function: u16 },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
