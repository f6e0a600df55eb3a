//! A buffered byte source that knows its file offset: the one piece every reader uses.

use std::io::{self, Read};

/// The end of a file fell inside a record: `offset` is where that record starts and
/// `available` how many of its `needed` bytes were there. Everything before `offset` is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    pub offset: u64,
    pub available: usize,
    pub needed: usize,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "file ends inside a record at byte offset {} ({} of {} bytes present); \
             everything before it was used",
            self.offset, self.available, self.needed
        )
    }
}

const CHUNK: usize = 1 << 20;

pub(crate) struct Source<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl<R: Read> Source<R> {
    pub fn new(inner: R) -> Self {
        Source {
            inner,
            buf: vec![0; CHUNK],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    /// File offset of the next unread byte.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    #[inline]
    pub fn available(&self) -> usize {
        self.end - self.pos
    }

    /// Makes `n` bytes available from the current position, reading as needed.
    /// Returns false when the file ends first.
    #[inline(always)]
    pub fn fill(&mut self, n: usize) -> io::Result<bool> {
        // Twice a record: the common case, bytes already buffered, stays in the caller.
        if self.end - self.pos >= n {
            return Ok(true);
        }
        self.fill_more(n)
    }

    #[cold]
    #[inline(never)]
    fn fill_more(&mut self, n: usize) -> io::Result<bool> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end < n && !self.eof {
            if self.end == self.buf.len() {
                // Grow with the bytes that arrive, at most doubling, never to a length
                // field's word alone: memory stays within twice what the file holds.
                let grow = self.buf.len().min(n - self.end);
                self.buf.resize(self.buf.len() + grow, 0);
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end >= n)
    }

    /// The next `n` bytes (after a successful `fill(n)`), without consuming them.
    #[inline]
    pub fn peek(&self, n: usize) -> &[u8] {
        &self.buf[self.pos..self.pos + n]
    }

    #[inline]
    pub fn consume(&mut self, n: usize) {
        debug_assert!(self.pos + n <= self.end);
        self.pos += n;
    }

    /// True when no byte is left.
    #[inline]
    pub fn at_eof(&mut self) -> io::Result<bool> {
        Ok(!self.fill(1)?)
    }

    /// A truncation record for a record of `needed` bytes at the current position.
    pub fn truncation(&self, needed: usize) -> Truncation {
        Truncation {
            offset: self.offset(),
            available: self.available(),
            needed,
        }
    }
}

/// Little-endian field readers over a byte slice whose length was checked by the caller.
#[inline]
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A pointer-width word (4 or 8 bytes).
#[inline]
pub(crate) fn word_at(b: &[u8], at: usize, width: usize) -> u64 {
    if width == 4 {
        u32_at(b, at) as u64
    } else {
        u64_at(b, at)
    }
}

/// The pointer-width words packed in `b` (frames, instruction addresses), in order.
pub(crate) fn words(b: &[u8], width: usize) -> impl ExactSizeIterator<Item = u64> + '_ {
    b.chunks_exact(width).map(move |c| word_at(c, 0, width))
}

impl<R> Source<R> {
    /// The `len` bytes just consumed. Valid until the next `fill`.
    #[inline]
    pub fn consumed_tail(&self, len: usize) -> &[u8] {
        &self.buf[self.pos - len..self.pos]
    }
}
