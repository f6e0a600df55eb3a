//! Compressed ELF sections (`SHF_COMPRESSED`, zlib or zstd), decompressed within a bound:
//! the size a section's header claims is checked against its compressed bytes before any
//! buffer is made, and the output must be exactly that size.

use std::borrow::Cow;
use std::io::Read;

use object::{CompressionFormat, ObjectSection};

/// Deflate's largest possible ratio (a 258-byte match in 2 bits, about 1032:1). Zstd gets
/// the same bound: debug sections compress 3 to 10 times, never a thousand.
pub const MAX_RATIO: u64 = 1032;

/// A section's bytes, decompressed when the section is compressed. The error says why
/// the section is unusable.
pub fn section_bytes<'data>(s: &impl ObjectSection<'data>) -> Result<Cow<'data, [u8]>, String> {
    let c = s.compressed_data().map_err(|e| e.to_string())?;
    let size = c.uncompressed_size;
    if c.format == CompressionFormat::None {
        return Ok(Cow::Borrowed(c.data));
    }
    let packed = c.data.len() as u64;
    if size > packed.saturating_mul(MAX_RATIO) {
        return Err(format!(
            "its header claims {size} bytes from {packed} compressed bytes, more than \
             {MAX_RATIO} times as many"
        ));
    }
    // One byte more than claimed tells that there were too many.
    let mut out = Vec::new();
    match c.format {
        CompressionFormat::Zlib => {
            read_into(flate2::read::ZlibDecoder::new(c.data), size + 1, &mut out)?
        }
        CompressionFormat::Zstandard => zstd_frames(c.data, size + 1, &mut out)?,
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
