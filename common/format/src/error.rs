use std::io;

/// Everything that can be wrong with an input file. Offsets are byte offsets from the start
/// of the file, so a user can look at the bytes with `xxd -s`.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("a compressed recording (zstd): this reader takes raw files only; `RawReader::open` reads both")]
    Compressed,
    #[error("not a kern-profile raw file (bad magic at offset 0)")]
    BadMagic,
    #[error("unsupported raw format version {0} (this build reads versions 1 to {max}: a newer kern-profile wrote it)", max = crate::MAX_VERSION)]
    UnsupportedVersion(u16),
    #[error("file too short for a header ({0} bytes)")]
    ShortHeader(usize),
    #[error("bad header: {0}")]
    BadHeader(String),
    #[error("corrupt record at byte offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
}
