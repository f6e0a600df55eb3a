//! A kernel image as a user passes it: an ELF, an x86 bzImage, an arm64/riscv64 Image, or
//! one of these compressed whole (Image.gz); what comes out is the kernel proper.

use std::path::{Path, PathBuf};

use crate::bzimage::{is_bzimage, setup_header};
use crate::compression::{unpack, Compression, UnpackError};
use crate::kallsyms::{self, Kallsyms};
use crate::raw_image::{raw_image_header, RawImageHeader};
use crate::{Arch, ImageError};

/// The default of [`Options::max_payload`]: 512 MiB, eight times Debian's amd64 vmlinux.
pub const DEFAULT_MAX_PAYLOAD: u64 = 512 << 20;

/// The ELF magic a vmlinux starts with.
pub const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// How far to go reading an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The largest file and the largest unpacked kernel accepted, in bytes (default
    /// [`DEFAULT_MAX_PAYLOAD`]): a larger one, or a decompression bomb, is an error.
    pub max_payload: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_payload: DEFAULT_MAX_PAYLOAD,
        }
    }
}

/// How the file held the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// The file is the ELF itself.
    Elf,
    /// An x86 bzImage of this boot protocol version.
    BzImage { protocol: u16 },
    /// An arm64 or riscv64 Image (raw, no ELF).
    RawImage,
    /// An EFI zboot image (`CONFIG_EFI_ZBOOT`, arm64/riscv64 `vmlinuz.efi`): a PE stub whose
    /// header locates the compressed raw Image.
    EfiZboot,
    /// The whole file compressed (Image.gz, vmlinux.xz); `inner` is what was inside.
    Compressed { inner: InnerContainer },
}

/// What a wholly compressed file held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InnerContainer {
    Elf,
    RawImage,
}

/// The kernel proper found in an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// A vmlinux ELF (what x86 bzImages hold).
    Elf {
        arch: Option<Arch>,
        machine: u16,
        class: u8,
    },
    /// A raw arm64/riscv64 image: byte 0 is the kernel's `_text`, whose virtual address is not
    /// in the header (read it from [`Kallsyms::text`]).
    Raw(RawImageHeader),
}

/// A kernel read from a file, its proper bytes unpacked.
#[derive(Debug, Clone)]
pub struct KernelImage {
    /// The file, for messages.
    pub path: PathBuf,
    pub container: Container,
    /// The payload's compression, None for an uncompressed ELF or Image.
    pub compression: Option<Compression>,
    /// Where the compressed payload starts in the file (0 when the file is not compressed).
    pub payload_offset: u64,
    pub kernel: Kernel,
    /// The vmlinux ELF or the raw image.
    pub bytes: Vec<u8>,
}

/// Reads and unpacks the kernel image at `path`.
pub fn open(path: &Path, options: &Options) -> Result<KernelImage, ImageError> {
    let io = |source| ImageError::Io {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > options.max_payload {
        return Err(ImageError::FileTooLarge {
            path: path.to_owned(),
            size,
            cap: options.max_payload,
        });
    }
    parse(path, std::fs::read(path).map_err(io)?, options)
}

/// Recognises the image in `data` (the contents of `path`, named in errors) and unpacks
/// its kernel.
pub fn parse(path: &Path, data: Vec<u8>, options: &Options) -> Result<KernelImage, ImageError> {
    let image = |container, compression, payload_offset, kernel, bytes| KernelImage {
        path: path.to_owned(),
        container,
        compression,
        payload_offset,
        kernel,
        bytes,
    };
    if let Some(kernel) = elf_kernel(path, &data)? {
        return Ok(image(Container::Elf, None, 0, kernel, data));
    }
    if is_bzimage(&data) {
        let (compression, offset, elf) = bzimage_payload(path, &data, options)?;
        let kernel = elf_kernel(path, &elf)?.ok_or_else(|| ImageError::PayloadNotElf {
            path: path.to_owned(),
            compression,
            offset,
        })?;
        return Ok(image(
            Container::BzImage {
                protocol: setup_header(&data).map_or(0, |h| h.protocol),
            },
            Some(compression),
            offset,
            kernel,
            elf,
        ));
    }
    if let Some(header) = raw_image_header(&data) {
        return Ok(image(
            Container::RawImage,
            None,
            0,
            Kernel::Raw(header),
            data,
        ));
    }
    if let Some((offset, len)) = zboot_payload(&data) {
        let payload = payload_at(path, &data, offset, len, "the zboot payload")?;
        let compression =
            Compression::sniff(payload).ok_or_else(|| ImageError::UnknownCompression {
                path: path.to_owned(),
                offset,
                tried: Compression::magics_tried(),
            })?;
        let inner = unpack_at(path, payload, offset, compression, options)?;
        let header = raw_image_header(&inner).ok_or_else(|| ImageError::PayloadNotElf {
            path: path.to_owned(),
            compression,
            offset,
        })?;
        return Ok(image(
            Container::EfiZboot,
            Some(compression),
            offset,
            Kernel::Raw(header),
            inner,
        ));
    }
    let Some(compression) = Compression::sniff(&data) else {
        return Err(if data.len() < 0x40 {
            ImageError::Truncated {
                path: path.to_owned(),
                offset: data.len() as u64,
                what: "shorter than any kernel image header".into(),
            }
        } else {
            ImageError::UnknownCompression {
                path: path.to_owned(),
                offset: 0,
                tried: Compression::magics_tried(),
            }
        });
    };
    let inner = unpack_at(path, &data, 0, compression, options)?;
    if let Some(kernel) = elf_kernel(path, &inner)? {
        let container = Container::Compressed {
            inner: InnerContainer::Elf,
        };
        return Ok(image(container, Some(compression), 0, kernel, inner));
    }
    if let Some(header) = raw_image_header(&inner) {
        let container = Container::Compressed {
            inner: InnerContainer::RawImage,
        };
        return Ok(image(
            container,
            Some(compression),
            0,
            Kernel::Raw(header),
            inner,
        ));
    }
    Err(ImageError::PayloadNotElf {
        path: path.to_owned(),
        compression,
        offset: 0,
    })
}

/// An EFI zboot image's payload (offset, length): "MZ", then "zimg" and the two u32 at 8
/// (Linux's drivers/firmware/efi/libstub/zboot-header.S).
/// The `len` bytes at `offset` of `data`, or an error naming `what` when they run past its end.
fn payload_at<'d>(
    path: &Path,
    data: &'d [u8],
    offset: u64,
    len: u64,
    what: &str,
) -> Result<&'d [u8], ImageError> {
    let end = offset.saturating_add(len);
    if end > data.len() as u64 {
        return Err(ImageError::Truncated {
            path: path.to_owned(),
            offset: data.len() as u64,
            what: format!("{what} at {offset:#x} runs to {end:#x}, past the end of the file"),
        });
    }
    Ok(&data[offset as usize..end as usize])
}

fn zboot_payload(data: &[u8]) -> Option<(u64, u64)> {
    if !data.starts_with(b"MZ") || data.get(4..8) != Some(b"zimg") {
        return None;
    }
    let u32_at = |at: usize| {
        Some(u64::from(u32::from_le_bytes(
            data.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    Some((u32_at(8)?, u32_at(12)?))
}

/// The kernel of an ELF (None when `data` is not one; an error when its header is cut).
fn elf_kernel(path: &Path, data: &[u8]) -> Result<Option<Kernel>, ImageError> {
    if !data.starts_with(ELF_MAGIC) {
        return Ok(None);
    }
    if data.len() < 20 {
        return Err(ImageError::Truncated {
            path: path.to_owned(),
            offset: data.len() as u64,
            what: "the ELF header is cut".into(),
        });
    }
    // Every kernel this crate knows is little-endian: e_machine is read as such.
    let class = data[4];
    let machine = u16::from_le_bytes([data[18], data[19]]);
    Ok(Some(Kernel::Elf {
        arch: Arch::from_elf(machine, class),
        machine,
        class,
    }))
}

/// At most this many magic hits are unpacked when a bzImage's header does not locate its
/// payload (a hostile file full of magics costs a bounded time).
const MAX_SCAN_TRIES: usize = 32;

/// The bzImage's vmlinux: at the payload the setup header gives or, when that is absent or
/// not a known stream, at the first compression magic (scripts/extract-vmlinux's order)
/// whose stream unpacks to an ELF.
fn bzimage_payload(
    path: &Path,
    data: &[u8],
    options: &Options,
) -> Result<(Compression, u64, Vec<u8>), ImageError> {
    let header = setup_header(data).ok_or_else(|| ImageError::Truncated {
        path: path.to_owned(),
        offset: data.len() as u64,
        what: "the bzImage's setup header is cut".into(),
    })?;
    if header.protected_mode_offset > data.len() as u64 {
        return Err(ImageError::Truncated {
            path: path.to_owned(),
            offset: data.len() as u64,
            what: format!(
                "the setup code runs to {:#x}, past the end of the file",
                header.protected_mode_offset
            ),
        });
    }
    if let Some((offset, len)) = header.payload {
        let payload = payload_at(path, data, offset, len, "the payload")?;
        if let Some(compression) = Compression::sniff(payload) {
            let elf = unpack_at(path, payload, offset, compression, options)?;
            return Ok((compression, offset, elf));
        }
    }
    // Scan like extract-vmlinux: each compression in turn, each of its magics in the file.
    let start = header.protected_mode_offset as usize;
    let mut tries = 0;
    let mut last_error = None;
    for compression in Compression::ALL {
        for hit in memchr::memmem::find_iter(&data[start..], compression.magic()) {
            let offset = start + hit;
            if Compression::sniff(&data[offset..]) != Some(compression) {
                continue;
            }
            tries += 1;
            if tries > MAX_SCAN_TRIES {
                break;
            }
            match unpack_at(path, &data[offset..], offset as u64, compression, options) {
                Ok(elf) if elf.starts_with(ELF_MAGIC) => {
                    return Ok((compression, offset as u64, elf))
                }
                Ok(_) => {}
                Err(e @ (ImageError::TooLarge { .. } | ImageError::Unsupported { .. })) => {
                    last_error = Some(e)
                }
                Err(_) => {}
            }
        }
    }
    Err(
        last_error.unwrap_or_else(|| ImageError::UnknownCompression {
            path: path.to_owned(),
            offset: header.payload.map_or(start as u64, |(offset, _)| offset),
            tried: Compression::magics_tried(),
        }),
    )
}

fn unpack_at(
    path: &Path,
    stream: &[u8],
    offset: u64,
    compression: Compression,
    options: &Options,
) -> Result<Vec<u8>, ImageError> {
    unpack(compression, stream, options.max_payload).map_err(|e| match e {
        UnpackError::TooLarge => ImageError::TooLarge {
            path: path.to_owned(),
            compression,
            offset,
            cap: options.max_payload,
        },
        UnpackError::Corrupt(reason) => ImageError::Decompress {
            path: path.to_owned(),
            compression,
            offset,
            reason,
        },
        UnpackError::Unsupported(why) => ImageError::Unsupported {
            path: path.to_owned(),
            compression,
            offset,
            why,
        },
    })
}

impl KernelImage {
    /// The kernel's architecture, None for an ELF of a machine this crate does not know.
    pub fn arch(&self) -> Option<Arch> {
        match self.kernel {
            Kernel::Elf { arch, .. } => arch,
            Kernel::Raw(header) => Some(header.arch),
        }
    }

    /// An error naming the file unless the kernel is for `expected`.
    pub fn check_arch(&self, expected: Arch) -> Result<(), ImageError> {
        match (self.arch(), self.kernel) {
            (Some(arch), _) if arch == expected => Ok(()),
            (Some(arch), _) => Err(self.wrong_arch(expected, arch.to_string())),
            (None, Kernel::Elf { machine, class, .. }) => Err(self.wrong_arch(
                expected,
                format!(
                    "ELF machine {machine} ({}-bit)",
                    if class == 2 { 64 } else { 32 }
                ),
            )),
            (None, Kernel::Raw(_)) => unreachable!("a raw image always has an architecture"),
        }
    }

    fn wrong_arch(&self, expected: Arch, found: String) -> ImageError {
        ImageError::WrongArch {
            path: self.path.clone(),
            expected,
            found,
        }
    }

    /// Whether [`bytes`](Self::bytes) is an ELF (else a raw Image).
    pub fn is_elf(&self) -> bool {
        matches!(self.kernel, Kernel::Elf { .. })
    }

    /// Pointer size of the kernel: 4 for a 32-bit ELF, else 8.
    pub fn pointer_size(&self) -> usize {
        match self.kernel {
            Kernel::Elf { class: 1, .. } => 4,
            _ => 8,
        }
    }

    /// The link-time virtual address of [`bytes`](Self::bytes)' offset 0 for a raw Image
    /// (found from the relocation of its kallsyms base); None for an ELF, whose program
    /// headers map it.
    pub fn virtual_base(&self, kallsyms: &Kallsyms) -> Option<u64> {
        match self.kernel {
            Kernel::Raw(_) => kallsyms.image_base,
            Kernel::Elf { .. } => None,
        }
    }

    /// The symbols of the kallsyms tables compiled into the kernel (see [`Kallsyms`]).
    pub fn kallsyms(&self) -> Result<Kallsyms, ImageError> {
        kallsyms::read(&self.path, &self.bytes, self.pointer_size())
    }
}
