//! The compressed recording (the plugin's `compress=on`): the whole raw file, header
//! included, inside one zstd stream. The writer flushes the stream after every batch, so a
//! QEMU killed mid-run leaves every batch before the kill readable: the stream then ends
//! without its frame's end, which reads as the end of the file, as an uncompressed file cut
//! there would.
//!
//! The reader bounds what a file may ask of it: a window of at most 2^[`WINDOW_LOG_MAX`]
//! bytes (the writer's level stays far below); a file that asks for more is an error, not an
//! allocation.

use std::io::{self, Read};

/// A zstd frame's magic number, as it starts a compressed recording.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The writer's compression level: zstd's default, fast enough for a writer thread that
/// sees well under 1 MB/s (level 3 compresses at hundreds of MB/s).
pub const LEVEL: i32 = 3;

/// The largest window a reader accepts: 16 MiB.
pub const WINDOW_LOG_MAX: u32 = 24;

/// `input` as raw bytes: decompressed when it starts with [`ZSTD_MAGIC`], as it is otherwise.
/// The first bytes are read here, and given back.
pub fn uncompressed<'a, R: Read + 'a>(mut input: R) -> io::Result<Box<dyn Read + 'a>> {
    let mut head = [0u8; 4];
    let mut n = 0;
    while n < head.len() {
        match input.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let whole = io::Cursor::new(head[..n].to_vec()).chain(input);
    if n < head.len() || head != ZSTD_MAGIC {
        return Ok(Box::new(whole));
    }
    let mut d = zstd::stream::read::Decoder::new(whole)?;
    d.window_log_max(WINDOW_LOG_MAX)?;
    Ok(Box::new(CutIsEnd {
        inner: d,
        ended: false,
    }))
}

/// A decoder whose stream, cut short (a killed writer's last frame has no end), simply ends.
struct CutIsEnd<R> {
    inner: R,
    ended: bool,
}

impl<R: Read> Read for CutIsEnd<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ended {
            return Ok(0);
        }
        match self.inner.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.ended = true;
                Ok(0)
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("the compressed recording does not decompress: {e}"),
            )),
            ok => ok,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A stream flushed after `parts[0]`, then `parts[1]` written and the frame ended.
    fn stream(parts: [&[u8]; 2]) -> (Vec<u8>, usize) {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), LEVEL).unwrap();
        e.write_all(parts[0]).unwrap();
        e.flush().unwrap();
        let flushed = e.get_ref().len();
        e.write_all(parts[1]).unwrap();
        (e.finish().unwrap(), flushed)
    }

    fn read_all(bytes: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        uncompressed(bytes)?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn plain_input_is_given_back_whole() {
        assert_eq!(
            read_all(b"KPROFRAW and more").unwrap(),
            b"KPROFRAW and more"
        );
        assert_eq!(read_all(b"KP").unwrap(), b"KP");
        assert_eq!(read_all(b"").unwrap(), b"");
    }

    #[test]
    fn a_stream_cut_after_a_flush_keeps_what_was_flushed() {
        let (whole, flushed) = stream([b"first batch;", b"second batch"]);
        assert_eq!(read_all(&whole).unwrap(), b"first batch;second batch");
        // Killed after the first flush: the first batch, and the end.
        assert_eq!(read_all(&whole[..flushed]).unwrap(), b"first batch;");
        // Cut inside the second batch's block: still the first.
        let cut = read_all(&whole[..whole.len() - 3]).unwrap();
        assert!(cut.starts_with(b"first batch;"), "{cut:?}");
    }

    #[test]
    fn garbage_after_the_magic_is_an_error_that_says_so() {
        let mut bad = ZSTD_MAGIC.to_vec();
        bad.extend_from_slice(&[0xff; 32]);
        let e = read_all(&bad).unwrap_err().to_string();
        assert!(e.contains("does not decompress"), "{e}");
    }

    #[test]
    fn a_window_beyond_the_bound_is_refused() {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
        e.window_log(WINDOW_LOG_MAX + 2).unwrap();
        e.long_distance_matching(true).unwrap();
        e.write_all(&vec![7u8; 1 << 20]).unwrap();
        let big = e.finish().unwrap();
        assert!(read_all(&big).is_err());
    }
}
