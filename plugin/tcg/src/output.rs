//! The output file, plain or compressed (`compress=on`): one zstd stream around the raw
//! format, flushed after every batch so that the file holds every batch written, readable,
//! whenever QEMU dies (`kern_profile_format::compressed`).

use std::fs::File;
use std::io::{self, Write};

use kern_profile_format::compressed::LEVEL;

/// Where the writer thread's batches go.
pub enum Output {
    Plain(File),
    Compressed(Box<zstd::stream::write::Encoder<'static, File>>),
}

impl Output {
    /// `file`, compressed when `compress`.
    pub fn new(file: File, compress: bool) -> io::Result<Output> {
        Ok(match compress {
            false => Output::Plain(file),
            true => Output::Compressed(Box::new(zstd::stream::write::Encoder::new(file, LEVEL)?)),
        })
    }

    /// Ends the stream (a compressed one's frame) after the last bytes.
    pub fn end(self) -> io::Result<()> {
        match self {
            Output::Plain(mut f) => f.flush(),
            Output::Compressed(e) => e.finish().and_then(|mut f| f.flush()),
        }
    }
}

impl kern_profile_sampler::writer::Output for Output {
    /// The file's length: a compressed stream's is known after each flush, which ends a
    /// block (the writer flushes after every batch).
    fn size(&mut self) -> u64 {
        let file = match self {
            Output::Plain(f) => &*f,
            Output::Compressed(e) => e.get_ref(),
        };
        file.metadata().map(|m| m.len()).unwrap_or(0)
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Plain(f) => f.write(buf),
            Output::Compressed(e) => e.write(buf),
        }
    }

    /// A compressed stream's flush ends its block: what was written so far decompresses.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Plain(f) => f.flush(),
            Output::Compressed(e) => e.flush(),
        }
    }
}
