//! The compressions a Linux image's payload can use (the list of Linux's
//! scripts/extract-vmlinux), recognised by their magic bytes and unpacked with a cap on the
//! output, so that a decompression bomb is an error and not an out-of-memory kill.

use std::fmt;
use std::io::Read;

/// A payload's compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    Gzip,
    Xz,
    Bzip2,
    Lzma,
    Lzo,
    Lz4,
    Zstd,
}

impl Compression {
    /// In the order extract-vmlinux tries them.
    pub const ALL: [Compression; 7] = [
        Compression::Gzip,
        Compression::Xz,
        Compression::Bzip2,
        Compression::Lzma,
        Compression::Lzo,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The bytes a stream of this compression starts with (for lzma, Linux's `lzma -9`
    /// properties byte and the low bytes of its dictionary size, as extract-vmlinux looks).
    pub fn magic(self) -> &'static [u8] {
        match self {
            Compression::Gzip => b"\x1f\x8b\x08",
            Compression::Xz => b"\xfd7zXZ\x00",
            Compression::Bzip2 => b"BZh",
            Compression::Lzma => b"\x5d\x00\x00",
            Compression::Lzo => b"\x89LZO\x00\r\n\x1a\n",
            Compression::Lz4 => b"\x02\x21\x4c\x18",
            Compression::Zstd => b"\x28\xb5\x2f\xfd",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Bzip2 => "bzip2",
            Compression::Lzma => "lzma",
            Compression::Lzo => "lzo",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The compression whose magic `data` starts with.
    pub fn sniff(data: &[u8]) -> Option<Compression> {
        Compression::ALL.into_iter().find(|c| {
            data.starts_with(c.magic())
                // bzip2's block size digit, to not take any "BZh" text for a stream.
                && (*c != Compression::Bzip2 || matches!(data.get(3), Some(b'1'..=b'9')))
        })
    }

    /// The magics tried, for an error message: "gzip 1f8b08, xz fd377a585a00, ...".
    pub fn magics_tried() -> String {
        Compression::ALL
            .iter()
            .map(|c| {
                let hex: String = c.magic().iter().map(|b| format!("{b:02x}")).collect();
                format!("{} {hex}", c.name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a payload did not unpack; the caller adds the file and the offset.
#[derive(Debug)]
pub(crate) enum UnpackError {
    /// The output passed the cap.
    TooLarge,
    /// The decoder rejected the stream.
    Corrupt(String),
    /// No decoder for this compression in this build.
    Unsupported(&'static str),
}

/// Largest dictionary an xz or lzma decoder may allocate, whatever a hostile header asks:
/// the cap (no stream needs a dictionary larger than its output) up to 256 MiB (Linux's
/// xz_wrap.sh uses 32 MiB, `lzma -9` 64 MiB). A larger one is a TooLarge error.
const MAX_DICT: u64 = 256 << 20;
/// Linux's lz4 legacy frame: each block unpacks to at most 8 MiB.
const LZ4_LEGACY_BLOCK: usize = 8 << 20;

/// Unpacks `data` (a stream of `compression` at its start; trailing bytes, such as the
/// 4-byte size Linux appends, are ignored) into at most `cap` bytes.
pub(crate) fn unpack(
    compression: Compression,
    data: &[u8],
    cap: u64,
) -> Result<Vec<u8>, UnpackError> {
    let dict_kib = (cap.clamp(1 << 20, MAX_DICT) >> 10) as u32;
    match compression {
        Compression::Gzip => read_capped(flate2::read::GzDecoder::new(data), cap),
        Compression::Xz => read_capped(
            lzma_rust2::XzReader::new_mem_limit(data, false, dict_kib),
            cap,
        ),
        Compression::Lzma => {
            let reader =
                lzma_rust2::LzmaReader::new_mem_limit(data, dict_kib, None).map_err(|e| match e
                    .kind()
                {
                    std::io::ErrorKind::OutOfMemory => UnpackError::TooLarge,
                    _ => UnpackError::Corrupt(e.to_string()),
                })?;
            read_capped(reader, cap)
        }
        Compression::Bzip2 => read_capped(bzip2::read::BzDecoder::new(data), cap),
        Compression::Zstd => {
            let mut source = data;
            let decoder = ruzstd::decoding::StreamingDecoder::new(&mut source)
                .map_err(|e| UnpackError::Corrupt(e.to_string()))?;
            read_capped(decoder, cap)
        }
        Compression::Lz4 => unpack_lz4_legacy(data, cap),
        Compression::Lzo => Err(UnpackError::Unsupported(
            "no permissively licensed, maintained LZO decoder is used; unpack it with `lzop -d` \
             (or rebuild the kernel with another compression) and pass the vmlinux",
        )),
    }
}

/// Reads all of `reader` into a vector that never holds (or reserves) much more than `cap`.
fn read_capped(mut reader: impl Read, cap: u64) -> Result<Vec<u8>, UnpackError> {
    const CHUNK: usize = 1 << 16;
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // lzma-rust2's answer to a dictionary larger than the limit.
            Err(e) if e.kind() == std::io::ErrorKind::OutOfMemory => {
                return Err(UnpackError::TooLarge)
            }
            Err(e) => return Err(UnpackError::Corrupt(e.to_string())),
        };
        if out.len() + n > cap {
            return Err(UnpackError::TooLarge);
        }
        reserve_capped(&mut out, n, cap)?;
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Grows `out` for `more` bytes by doubling, but never past `cap` (Vec's own growth could
/// reserve twice the cap).
fn reserve_capped(out: &mut Vec<u8>, more: usize, cap: usize) -> Result<(), UnpackError> {
    let need = out.len() + more;
    if need <= out.capacity() {
        return Ok(());
    }
    let target = (out.capacity() * 2)
        .max(1 << 20)
        .max(need)
        .min(cap.max(need));
    out.try_reserve_exact(target - out.len())
        .map_err(|_| UnpackError::TooLarge)
}

/// Linux's lz4 "legacy" frame (lz4 -l): the magic, then blocks, each a little-endian u32
/// compressed length and an lz4 block that unpacks to at most 8 MiB. It ends at the end of
/// the data, at a length that does not fit (Linux's 4-byte size trailer), or at a new magic.
fn unpack_lz4_legacy(data: &[u8], cap: u64) -> Result<Vec<u8>, UnpackError> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut at = 4;
    let mut out: Vec<u8> = Vec::new();
    while let Some(len) = data.get(at..at + 4) {
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        if len == 0x184C_2102 || len > data.len() - at - 4 {
            break;
        }
        let block = &data[at + 4..at + 4 + len];
        let room = LZ4_LEGACY_BLOCK.min(cap.saturating_sub(out.len()) + 1);
        let start = out.len();
        reserve_capped(&mut out, room, cap.saturating_add(1))?;
        out.resize(start + room, 0);
        let n = lz4_flex::block::decompress_into(block, &mut out[start..]).map_err(|e| {
            if room < LZ4_LEGACY_BLOCK
                && matches!(e, lz4_flex::block::DecompressError::OutputTooSmall { .. })
            {
                UnpackError::TooLarge
            } else {
                UnpackError::Corrupt(format!("lz4 block at {at:#x}: {e}"))
            }
        })?;
        out.truncate(start + n);
        if out.len() > cap {
            return Err(UnpackError::TooLarge);
        }
        at += 4 + len;
    }
    if out.is_empty() {
        return Err(UnpackError::Corrupt("no lz4 block".into()));
    }
    Ok(out)
}
