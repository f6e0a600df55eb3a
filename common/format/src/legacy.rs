//! The original C plugin's headerless sample format: `u8 n`, then `n` u64 addresses.

use std::io::Read;

use crate::error::FormatError;
use crate::source::{u64_at, Source, Truncation};

/// The original plugin always writes the PC, so samples without any address are damage;
/// this many in a row mean the input is no sample file at all (a stream of zeros would
/// otherwise be an endless valid one).
pub const LEGACY_MAX_EMPTY_RUN: u32 = 256;

/// One legacy sample: the PC then return addresses, borrowing the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct LegacySample<'a> {
    addrs: &'a [u8],
}

impl<'a> LegacySample<'a> {
    /// The PC followed by return addresses, innermost first.
    pub fn addresses(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        self.addrs.chunks_exact(8).map(|c| u64_at(c, 0))
    }

    pub fn len(&self) -> usize {
        self.addrs.len() / 8
    }

    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
}

pub struct LegacyReader<R> {
    src: Source<R>,
    truncation: Option<Truncation>,
    record_offset: u64,
    /// Samples without any address read in a row.
    empty_run: u32,
}

impl<R: Read> LegacyReader<R> {
    pub fn new(inner: R) -> Self {
        LegacyReader {
            src: Source::new(inner),
            truncation: None,
            record_offset: 0,
            empty_run: 0,
        }
    }

    pub fn truncation(&self) -> Option<Truncation> {
        self.truncation
    }

    pub fn record_offset(&self) -> u64 {
        self.record_offset
    }

    pub fn offset(&self) -> u64 {
        self.src.offset()
    }

    /// The next sample, or `None` at the end (see [`LegacyReader::truncation`]).
    pub fn next_sample(&mut self) -> Result<Option<LegacySample<'_>>, FormatError> {
        if self.truncation.is_some() || self.src.at_eof()? {
            return Ok(None);
        }
        self.record_offset = self.src.offset();
        let n = self.src.peek(1)[0] as usize;
        self.empty_run = if n == 0 { self.empty_run + 1 } else { 0 };
        if self.empty_run > LEGACY_MAX_EMPTY_RUN {
            return Err(FormatError::Corrupt {
                offset: self.record_offset - u64::from(LEGACY_MAX_EMPTY_RUN),
                what: format!(
                    "more than {LEGACY_MAX_EMPTY_RUN} samples in a row without any address: \
                     not a sample file (a stream of zeros?)"
                ),
            });
        }
        let len = 1 + 8 * n;
        if !self.src.fill(len)? {
            self.truncation = Some(self.src.truncation(len));
            return Ok(None);
        }
        self.src.consume(len);
        Ok(Some(LegacySample {
            addrs: &self.src.consumed_tail(len)[1..],
        }))
    }
}
