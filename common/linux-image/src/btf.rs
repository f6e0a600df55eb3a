//! The BTF (BPF Type Format) a kernel built with `CONFIG_DEBUG_INFO_BTF` carries: the
//! `.BTF` section of a vmlinux ELF, or, in a raw arm64/riscv64 Image (no sections), the first
//! plausible BTF header found by scanning. Parsed by the third-party `btf-rs`, which is
//! handed only a blob whose lengths were checked against the file, and always called under
//! `catch_unwind`: a kernel image is untrusted input and the plugin must not panic on it.
//!
//! The header (Linux's include/uapi/linux/btf.h): u16 magic 0xeb9f, u8 version 1, u8 flags
//! 0, u32 hdr_len, then u32 type_off, type_len, str_off, str_len, the offsets counted from
//! the end of the header. Only little-endian BTF is read, as only little-endian kernels are.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use btf_rs::Btf;
use object::{Object, ObjectSection};

use crate::{ImageError, KernelImage};

/// The header a raw image's BTF starts with, as the scan looks for it: magic, version 1,
/// flags 0, hdr_len 24, type_off 0 (what pahole and the kernel's resolve_btfids write).
const RAW_HEADER: [u8; 12] = [0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0];

/// The smallest header; later versions of the format may grow it (`hdr_len`).
const MIN_HEADER_LEN: usize = 24;

/// A kernel's BTF, its lengths checked against the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtfBlob<'a> {
    /// Where it starts in [`KernelImage::bytes`].
    pub offset: u64,
    /// Header, types and strings: exactly as long as the header says.
    pub bytes: &'a [u8],
}

impl KernelImage {
    /// The kernel's BTF: the `.BTF` section of a vmlinux ELF, or the first plausible BTF
    /// header in a raw Image. [`ImageError::NoBtf`] when there is none.
    pub fn btf(&self) -> Result<BtfBlob<'_>, ImageError> {
        let no_btf = |why: &str| ImageError::NoBtf {
            path: self.path.clone(),
            why: why.to_owned(),
        };
        if !self.is_elf() {
            return scan(&self.bytes).ok_or_else(|| no_btf("no BTF header in the raw image"));
        }
        let elf = object::File::parse(&*self.bytes).map_err(|e| ImageError::Truncated {
            path: self.path.clone(),
            offset: 0,
            what: format!("the vmlinux ELF does not parse: {e}"),
        })?;
        let section = elf
            .section_by_name(".BTF")
            .ok_or_else(|| no_btf("the vmlinux has no .BTF section"))?;
        let offset = section.file_range().map_or(0, |(offset, _)| offset);
        let data = section.data().map_err(|e| ImageError::Truncated {
            path: self.path.clone(),
            offset,
            what: format!("the .BTF section: {e}"),
        })?;
        let len = blob_len(data).map_err(|why| ImageError::BadBtf {
            path: self.path.clone(),
            offset,
            why,
        })?;
        Ok(BtfBlob {
            offset,
            bytes: &data[..len],
        })
    }
}

/// The first 4-byte aligned BTF header of `bytes` whose lengths fit: type_off 0 and the
/// strings right after the types, as the kernel's own BTF is laid out.
fn scan(bytes: &[u8]) -> Option<BtfBlob<'_>> {
    memchr::memmem::find_iter(bytes, &RAW_HEADER)
        .filter(|at| at.is_multiple_of(4))
        .find_map(|at| {
            let rest = &bytes[at..];
            let type_len = u32_at(rest, 12)?;
            let str_off = u32_at(rest, 16)?;
            if str_off != type_len || type_len == 0 {
                return None;
            }
            let len = blob_len(rest).ok()?;
            Some(BtfBlob {
                offset: at as u64,
                bytes: &rest[..len],
            })
        })
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The length of the BTF at the start of `bytes` (header, types and strings), or why its
/// header does not hold. Checked here, not left to btf-rs: its string loop never ends on
/// a string section that runs past the input, so the strings must end inside it, on a NUL.
fn blob_len(bytes: &[u8]) -> Result<usize, String> {
    let field = |at: usize| {
        u32_at(bytes, at)
            .map(|v| v as usize)
            .ok_or_else(|| format!("{} bytes, shorter than a BTF header", bytes.len()))
    };
    if bytes.get(..2) != Some(&[0x9f, 0xeb]) {
        return Err(if bytes.get(..2) == Some(&[0xeb, 0x9f]) {
            "big-endian BTF, which this reader does not handle".into()
        } else {
            "no BTF magic 0xeb9f".into()
        });
    }
    let (version, flags) = (bytes.get(2), bytes.get(3));
    if version != Some(&1) || flags != Some(&0) {
        return Err(format!(
            "version {version:?} and flags {flags:?}, not 1 and 0"
        ));
    }
    let hdr_len = field(4)?;
    let (type_off, type_len, str_off, str_len) = (field(8)?, field(12)?, field(16)?, field(20)?);
    if hdr_len < MIN_HEADER_LEN {
        return Err(format!(
            "a header of {hdr_len} bytes, under {MIN_HEADER_LEN}"
        ));
    }
    // Each sum fits: four u32 added in a usize of 64 bits (32-bit hosts: checked).
    let end = |off: usize, len: usize| hdr_len.checked_add(off)?.checked_add(len);
    let (Some(types_end), Some(strings_end)) = (end(type_off, type_len), end(str_off, str_len))
    else {
        return Err("lengths past the address space".into());
    };
    let len = types_end.max(strings_end);
    if len > bytes.len() {
        return Err(format!(
            "the header says {len} bytes, {} are there",
            bytes.len()
        ));
    }
    if str_len == 0 || bytes[strings_end - 1] != 0 || bytes[hdr_len + str_off] != 0 {
        return Err("a string section that does not start and end with a NUL".into());
    }
    Ok(len)
}

/// Parses `blob` with btf-rs and runs `f` on the result, both under `catch_unwind`: a panic
/// inside the parser (or in what `f` asks of it) is an [`ImageError::BadBtf`], not a crash.
pub(crate) fn with_btf<T>(
    path: &Path,
    blob: BtfBlob<'_>,
    f: impl FnOnce(&Btf) -> Result<T, ImageError>,
) -> Result<T, ImageError> {
    let bad = |why: String| ImageError::BadBtf {
        path: path.to_owned(),
        offset: blob.offset,
        why,
    };
    let run = AssertUnwindSafe(|| {
        let btf = Btf::from_bytes(blob.bytes).map_err(|e| bad(e.to_string()))?;
        f(&btf)
    });
    catch_unwind(run).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(bad(format!("the BTF parser panicked: {message}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(type_len: u32, str_off: u32, str_len: u32) -> Vec<u8> {
        let mut h = RAW_HEADER.to_vec();
        for v in [type_len, str_off, str_len] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h
    }

    #[test]
    fn blob_lengths_are_checked_against_the_bytes() {
        let mut blob = header(0, 0, 4);
        blob.extend_from_slice(b"\0ab\0");
        assert_eq!(blob_len(&blob), Ok(28));
        // A longer file: the blob ends where the header says.
        blob.extend_from_slice(b"rest");
        assert_eq!(blob_len(&blob), Ok(28));
        assert!(blob_len(&blob[..27]).unwrap_err().contains("27 are there"));
        let mut unterminated = header(0, 0, 3);
        unterminated.extend_from_slice(b"\0ab");
        assert!(blob_len(&unterminated).is_err());
        let mut huge = header(u32::MAX, u32::MAX, u32::MAX);
        huge.extend_from_slice(b"\0");
        assert!(blob_len(&huge).is_err());
        assert!(blob_len(&[0x9f, 0xeb, 1, 0]).is_err());
        assert!(blob_len(&[0xeb, 0x9f, 0, 1])
            .unwrap_err()
            .contains("big-endian"));
    }

    #[test]
    fn the_scan_takes_the_first_aligned_plausible_header() {
        let mut bytes = vec![0u8; 6];
        // Unaligned: skipped.
        bytes.extend_from_slice(&header(12, 12, 1));
        bytes.resize(64, 0);
        // Aligned but str_off != type_len: skipped.
        bytes.extend_from_slice(&header(12, 16, 1));
        bytes.resize(128, 0);
        bytes.extend_from_slice(&header(12, 12, 1));
        bytes.extend_from_slice(&[0; 13]);
        let blob = scan(&bytes).unwrap();
        assert_eq!(blob.offset, 128);
        assert_eq!(blob.bytes.len(), 24 + 12 + 1);
        assert_eq!(scan(&bytes[..160]), None);
    }
}
