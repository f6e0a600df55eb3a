//! Compressed ELF sections (`SHF_COMPRESSED`, zlib or zstd), decompressed within one bound
//! per ELF ([`Budget`]), for the aggregator's symbolizer and the plugin's `elf=` alike: the size a section's header claims is checked against what is left
//! of it before any buffer is made, and the output must be exactly that size.

use std::borrow::Cow;
use std::io::Read;

use object::{CompressionFormat, ObjectSection};

/// Decompressed bytes one ELF may give in all, every compressed section it is read for
/// (DWARF and call-frame information) together: this much ...
pub const FIXED_ALLOWANCE: u64 = 1 << 20;
/// ... plus this much per byte of the file. Debug sections compress 3 to 10 times, and they
/// are only part of the file; the fuzz heap meter allows 64 bytes per input byte in all.
pub const PER_FILE_BYTE: u64 = 32;

/// What is left of one ELF's decompression bound.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    left: u64,
    file_len: u64,
}

impl Budget {
    /// The bound of an ELF of `file_len` bytes.
    pub fn for_file(file_len: usize) -> Self {
        let file_len = file_len as u64;
        Budget {
            left: FIXED_ALLOWANCE.saturating_add(file_len.saturating_mul(PER_FILE_BYTE)),
            file_len,
        }
    }

    /// A section's bytes, decompressed when the section is compressed (and counted
    /// against the bound). The error says why the section is unusable.
    pub fn section_bytes<'data>(
        &mut self,
        s: &impl ObjectSection<'data>,
    ) -> Result<Cow<'data, [u8]>, String> {
        let c = s.compressed_data().map_err(|e| e.to_string())?;
        if c.format == CompressionFormat::None {
            return Ok(Cow::Borrowed(c.data));
        }
        let size = c.uncompressed_size;
        if size > self.left {
            return Err(format!(
                "its header claims {size} bytes; {} are left of the {} an ELF of {} bytes may \
                 decompress in all (1 MiB + {PER_FILE_BYTE} per byte of the file)",
                self.left,
                Budget::for_file(self.file_len as usize).left,
                self.file_len
            ));
        }
        self.left -= size;
        decompress(c.format, c.data, size)
    }
}

/// `data` decompressed, which must give exactly `size` bytes.
fn decompress<'data>(
    format: CompressionFormat,
    data: &[u8],
    size: u64,
) -> Result<Cow<'data, [u8]>, String> {
    // One byte more than claimed tells that there were too many.
    let mut out = Vec::new();
    match format {
        CompressionFormat::Zlib => {
            read_into(flate2::read::ZlibDecoder::new(data), size + 1, &mut out)?
        }
        CompressionFormat::Zstandard => zstd_frames(data, size + 1, &mut out)?,
        other => return Err(format!("unsupported compression {other:?}")),
    }
    match out.len() as u64 {
        n if n == size => Ok(Cow::Owned(out)),
        n if n > size => Err(format!(
            "it decompresses to more than the {size} bytes its header says"
        )),
        n => Err(format!(
            "it decompresses to {n} bytes, its header says {size}"
        )),
    }
}

/// Appends up to `limit` bytes of `r` to `out`, the buffer growing with the output rather
/// than with a claim.
fn read_into(r: impl Read, limit: u64, out: &mut Vec<u8>) -> Result<(), String> {
    r.take(limit)
        .read_to_end(out)
        .map_err(|e| format!("bad compressed data ({e})"))?;
    Ok(())
}

/// Zstandard data may hold several frames, skippable ones among them.
fn zstd_frames(mut input: &[u8], limit: u64, out: &mut Vec<u8>) -> Result<(), String> {
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    while !input.is_empty() && (out.len() as u64) < limit {
        let decoder = match ruzstd::decoding::StreamingDecoder::new(&mut input) {
            Ok(d) => d,
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                input = input
                    .get(length as usize..)
                    .ok_or("a skippable zstd frame runs past the section")?;
                continue;
            }
            Err(e) => return Err(format!("bad zstd data ({e})")),
        };
        read_into(decoder, limit - out.len() as u64, out)?;
    }
    Ok(())
}
