//! Maestro's `memtrace` allocation trace: one record per allocator operation, no header.

use std::borrow::Cow;
use std::io::Read;

use crate::error::FormatError;
use crate::source::{u64_at, Source, Truncation};

/// Maestro walks at most this many frames; more in a record means we lost sync.
pub const MAX_FRAMES: usize = 64;

/// An allocator operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Alloc,
    Realloc,
    Free,
}

impl Op {
    pub fn from_u8(b: u8) -> Option<Op> {
        match b {
            0 => Some(Op::Alloc),
            1 => Some(Op::Realloc),
            2 => Some(Op::Free),
            _ => None,
        }
    }

    /// The op byte as written in a record.
    pub fn as_u8(self) -> u8 {
        match self {
            Op::Alloc => 0,
            Op::Realloc => 1,
            Op::Free => 2,
        }
    }
}

/// Appends one record to `out`, byte for byte as Maestro writes it. Both lengths are one byte
/// in the format, so at most 255 bytes of `allocator` and 255 of `frames` are written (Maestro
/// itself writes at most [`MAX_FRAMES`]). Used by tests, benchmarks and the example kernel's
/// host-side checks.
pub fn encode_record(
    out: &mut Vec<u8>,
    allocator: &[u8],
    op: Op,
    ptr: u64,
    size: u64,
    frames: &[u64],
) {
    let name = &allocator[..allocator.len().min(u8::MAX as usize)];
    let frames = &frames[..frames.len().min(u8::MAX as usize)];
    out.reserve(19 + name.len() + 8 * frames.len());
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.push(op.as_u8());
    out.extend_from_slice(&ptr.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.push(frames.len() as u8);
    for f in frames {
        out.extend_from_slice(&f.to_le_bytes());
    }
}

/// One memtrace record, borrowing the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct MemRecord<'a> {
    /// Byte offset of the record in the file.
    pub offset: u64,
    pub allocator: &'a [u8],
    pub op: Op,
    pub ptr: u64,
    pub size: u64,
    frames: &'a [u8],
}

impl<'a> MemRecord<'a> {
    pub fn allocator_name(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.allocator)
    }

    /// Return addresses, innermost first.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        self.frames.chunks_exact(8).map(|c| u64_at(c, 0))
    }
}

/// What `--lenient` skipped to find the next plausible record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    pub offset: u64,
    pub bytes: u64,
}

/// Streaming memtrace reader. Strict by default: a bad op byte or an empty allocator name is
/// an error naming its offset.
/// Lenient: skips ahead to the next plausible record and remembers what it skipped.
pub struct MemtraceReader<R> {
    src: Source<R>,
    lenient: bool,
    truncation: Option<Truncation>,
    skips: Vec<Skip>,
}

enum Parse {
    Ok {
        len: usize,
    },
    /// Not enough bytes left for the record announced here.
    Short {
        needed: usize,
    },
    Bad(String),
}

impl<R: Read> MemtraceReader<R> {
    pub fn new(inner: R, lenient: bool) -> Self {
        MemtraceReader {
            src: Source::new(inner),
            lenient,
            truncation: None,
            skips: Vec::new(),
        }
    }

    pub fn truncation(&self) -> Option<Truncation> {
        self.truncation
    }

    /// The regions skipped in lenient mode.
    pub fn skips(&self) -> &[Skip] {
        &self.skips
    }

    pub fn offset(&self) -> u64 {
        self.src.offset()
    }

    /// Checks the record at the current position, reading as much as it needs.
    fn parse_here(&mut self) -> Result<Parse, FormatError> {
        let mut need = 1;
        if !self.src.fill(need)? {
            return Ok(Parse::Short { needed: need });
        }
        let nlen = self.src.peek(1)[0] as usize;
        if nlen == 0 {
            // Every Maestro allocator has a name; without this a stream of zeros would be
            // an endless trace of null allocations by a nameless allocator.
            return Ok(Parse::Bad(format!(
                "record without an allocator name (length byte 0) at byte offset {}",
                self.src.offset()
            )));
        }
        need = 1 + nlen + 18;
        if !self.src.fill(need)? {
            return Ok(Parse::Short { needed: need });
        }
        let b = self.src.peek(need);
        let op = b[1 + nlen];
        if Op::from_u8(op).is_none() {
            return Ok(Parse::Bad(format!(
                "op byte {op} at byte offset {} is not 0 (alloc), 1 (realloc) or 2 (free)",
                self.src.offset() + 1 + nlen as u64
            )));
        }
        let nframe = b[need - 1] as usize;
        need += 8 * nframe;
        if !self.src.fill(need)? {
            return Ok(Parse::Short { needed: need });
        }
        Ok(Parse::Ok { len: need })
    }

    /// A stricter test used only to resynchronise: a plausible name and frame count.
    fn plausible_here(&mut self) -> Result<Option<usize>, FormatError> {
        if !self.src.fill(1)? {
            return Ok(None);
        }
        let nlen = self.src.peek(1)[0] as usize;
        if nlen == 0 || nlen > 64 || !self.src.fill(1 + nlen + 18)? {
            return Ok(None);
        }
        let b = self.src.peek(1 + nlen + 18);
        let name_ok = b[1..1 + nlen].iter().all(|c| c.is_ascii_graphic());
        let frames_ok = (b[nlen + 18] as usize) <= MAX_FRAMES;
        if !name_ok || !frames_ok {
            return Ok(None);
        }
        match self.parse_here()? {
            Parse::Ok { len } => Ok(Some(len)),
            _ => Ok(None),
        }
    }

    /// The next record, or `None` at the end (see [`MemtraceReader::truncation`]).
    pub fn next_record(&mut self) -> Result<Option<MemRecord<'_>>, FormatError> {
        if self.truncation.is_some() || self.src.at_eof()? {
            return Ok(None);
        }
        let len = match self.parse_here()? {
            Parse::Ok { len } => len,
            Parse::Short { needed } => {
                self.truncation = Some(self.src.truncation(needed));
                return Ok(None);
            }
            Parse::Bad(what) if !self.lenient => {
                return Err(FormatError::Corrupt {
                    offset: self.src.offset(),
                    what,
                })
            }
            Parse::Bad(_) => match self.resync()? {
                Some(len) => len,
                None => return Ok(None),
            },
        };
        let offset = self.src.offset();
        self.src.consume(len);
        let b = self.src.consumed_tail(len);
        let nlen = b[0] as usize;
        Ok(Some(MemRecord {
            offset,
            allocator: &b[1..1 + nlen],
            op: Op::from_u8(b[1 + nlen]).expect("checked by parse_here"),
            ptr: u64_at(b, 2 + nlen),
            size: u64_at(b, 10 + nlen),
            frames: &b[19 + nlen..],
        }))
    }

    /// Skips byte by byte to the next plausible record; records the skip.
    fn resync(&mut self) -> Result<Option<usize>, FormatError> {
        let start = self.src.offset();
        loop {
            self.src.consume(1);
            if self.src.at_eof()? {
                self.skips.push(Skip {
                    offset: start,
                    bytes: self.src.offset() - start,
                });
                return Ok(None);
            }
            if let Some(len) = self.plausible_here()? {
                self.skips.push(Skip {
                    offset: start,
                    bytes: self.src.offset() - start,
                });
                return Ok(Some(len));
            }
        }
    }
}
