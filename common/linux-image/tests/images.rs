//! Recognising and unpacking kernel images, on small synthetic ones.

mod common;

use std::path::Path;

use common::{bzimage, compress, elf_header, raw_image, zboot};
use kern_profile_linux_image::{
    open, parse, Arch, Compression, Container, ImageError, InnerContainer, Kernel, KernelImage,
    Options, DEFAULT_MAX_PAYLOAD,
};

/// A vmlinux stand-in: an x86_64 ELF header and compressible bytes.
fn vmlinux(len: usize) -> Vec<u8> {
    let mut elf = elf_header(2, 62);
    elf.extend((0..len).map(|i| (i % 251) as u8 ^ (i / 4096) as u8));
    elf
}

fn parse_bytes(data: Vec<u8>) -> Result<KernelImage, ImageError> {
    parse(Path::new("vmlinuz-test"), data, &Options::default())
}

#[test]
fn an_elf_passes_through() {
    let elf = vmlinux(1000);
    let image = parse_bytes(elf.clone()).unwrap();
    assert_eq!(image.container, Container::Elf);
    assert_eq!(image.compression, None);
    assert_eq!(image.bytes, elf);
    assert_eq!(image.arch(), Some(Arch::X86_64));
    assert!(image.is_elf());
    assert_eq!(image.pointer_size(), 8);
    image.check_arch(Arch::X86_64).unwrap();
    let e = image.check_arch(Arch::Aarch64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "vmlinuz-test: a kernel for x86_64, not aarch64"
    );

    let i386 = parse_bytes(elf_header(1, 3)).unwrap();
    assert_eq!((i386.arch(), i386.pointer_size()), (Some(Arch::I386), 4));
    let other = parse_bytes(elf_header(2, 21)).unwrap();
    let e = other.check_arch(Arch::Riscv64).unwrap_err();
    assert_eq!(
        e.to_string(),
        "vmlinuz-test: a kernel for ELF machine 21 (64-bit), not riscv64"
    );
}

#[test]
fn a_bzimage_yields_its_vmlinux_in_every_supported_compression() {
    let elf = vmlinux(200_000);
    for compression in Compression::ALL {
        if compression == Compression::Lzo {
            continue;
        }
        let payload = compress(compression, &elf);
        let image = parse_bytes(bzimage(&payload, elf.len(), 0x020f, 0x1cc)).unwrap();
        assert_eq!(
            image.container,
            Container::BzImage { protocol: 0x020f },
            "{compression}"
        );
        assert_eq!(image.compression, Some(compression));
        assert_eq!(image.payload_offset, 1024 + 0x1cc);
        assert!(image.bytes == elf, "{compression}: the vmlinux differs");
        image.check_arch(Arch::X86_64).unwrap();
    }
}

#[test]
fn an_old_bzimage_is_scanned_for_its_payload() {
    // Protocol 2.07 has no payload fields: the magic is found as extract-vmlinux does,
    // past a decoy that is not a stream.
    let elf = vmlinux(5000);
    let mut payload = b"junk\x1f\x8b\x08\x00junk".to_vec();
    payload.extend(compress(Compression::Zstd, &elf));
    let mut img = bzimage(&payload, elf.len(), 0x0207, 0x40);
    img[0x248..0x250].fill(0);
    let image = parse_bytes(img).unwrap();
    assert_eq!(image.compression, Some(Compression::Zstd));
    assert_eq!(image.payload_offset, 1024 + 0x40 + 12);
    assert_eq!(image.bytes, elf);
}

#[test]
fn lzo_is_named_as_unsupported() {
    let payload = compress(Compression::Lzo, &[]);
    let e = parse_bytes(bzimage(&payload, 100, 0x020f, 0)).unwrap_err();
    assert!(
        matches!(
            e,
            ImageError::Unsupported {
                compression: Compression::Lzo,
                offset: 1024,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("vmlinuz-test: the payload at offset 0x400 is lzo"),
        "{e}"
    );
}

#[test]
fn a_bzimage_whose_payload_is_not_an_elf_is_an_error() {
    let payload = compress(Compression::Gzip, b"not an ELF at all");
    let e = parse_bytes(bzimage(&payload, 17, 0x020f, 0)).unwrap_err();
    assert!(
        matches!(
            e,
            ImageError::PayloadNotElf {
                compression: Compression::Gzip,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn truncated_images_name_the_offset() {
    let elf = vmlinux(20_000);
    let img = bzimage(&compress(Compression::Xz, &elf), elf.len(), 0x020f, 0x10);
    // Cut inside the payload: the header says it runs past the end.
    let e = parse_bytes(img[..img.len() - 100].to_vec()).unwrap_err();
    assert!(matches!(e, ImageError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("past the end of the file"), "{e}");
    // Cut inside the setup code.
    let e = parse_bytes(img[..0x300].to_vec()).unwrap_err();
    assert!(
        matches!(e, ImageError::Truncated { offset: 0x300, .. }),
        "{e}"
    );
    // A stream cut short (the header lies about the length): a decompression error.
    let mut short = img.clone();
    let len = u32::from_le_bytes(short[0x24c..0x250].try_into().unwrap());
    short[0x24c..0x250].copy_from_slice(&(len / 2).to_le_bytes());
    let e = parse_bytes(short).unwrap_err();
    assert!(
        matches!(
            e,
            ImageError::Decompress {
                compression: Compression::Xz,
                ..
            } | ImageError::UnknownCompression { .. }
        ),
        "{e}"
    );
    // Too short to be anything.
    let e = parse_bytes(b"\x7fEL".to_vec()).unwrap_err();
    assert!(matches!(e, ImageError::Truncated { .. }), "{e}");
    let e = parse_bytes(b"\x7fELF\x02".to_vec()).unwrap_err();
    assert!(e.to_string().contains("ELF header is cut"), "{e}");
}

#[test]
fn an_unknown_file_lists_the_magics_tried() {
    let e = parse_bytes(vec![0x42; 4096]).unwrap_err();
    assert!(
        matches!(e, ImageError::UnknownCompression { offset: 0, .. }),
        "{e}"
    );
    let text = e.to_string();
    for c in Compression::ALL {
        assert!(text.contains(c.name()), "{text}");
    }
    assert!(
        text.contains("gzip 1f8b08") && text.contains("zstd 28b52ffd"),
        "{text}"
    );
}

#[test]
fn decompression_bombs_stop_at_the_cap() {
    let zeros = vec![0u8; 3 << 20];
    let options = Options {
        max_payload: 1 << 20,
    };
    for compression in Compression::ALL {
        if compression == Compression::Lzo {
            continue;
        }
        let bomb = compress(compression, &zeros);
        let e = parse(Path::new("bomb"), bomb.clone(), &options).unwrap_err();
        assert!(
            matches!(e, ImageError::TooLarge { cap: 1_048_576, .. }),
            "{compression}: {e}"
        );
        assert!(e.to_string().contains("Options::max_payload"), "{e}");
        // Inside a bzImage too.
        let e = parse(
            Path::new("bomb"),
            bzimage(&bomb, zeros.len(), 0x020f, 0),
            &options,
        )
        .unwrap_err();
        assert!(
            matches!(e, ImageError::TooLarge { offset: 1024, .. }),
            "{compression}: {e}"
        );
    }
    assert_eq!(Options::default().max_payload, DEFAULT_MAX_PAYLOAD);
    // An lzma header that asks for a 1 GiB dictionary: refused before any allocation.
    let mut hostile = vec![0x5d, 0, 0, 0, 0x40];
    hostile.extend_from_slice(&[0xff; 8]);
    hostile.extend_from_slice(&[0; 64]);
    let e = parse(Path::new("bomb"), hostile, &Options::default()).unwrap_err();
    assert!(
        matches!(
            e,
            ImageError::TooLarge {
                compression: Compression::Lzma,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn arm64_and_riscv64_images_raw_and_gzipped() {
    let body: Vec<u8> = (0..10_000u32).flat_map(|i| i.to_le_bytes()).collect();
    let arm64 = raw_image(b"ARM\x64", 0x8_0000, &body);
    let image = parse_bytes(arm64.clone()).unwrap();
    assert_eq!(image.container, Container::RawImage);
    let Kernel::Raw(header) = image.kernel else {
        panic!("not raw: {:?}", image.kernel)
    };
    assert_eq!(
        (header.arch, header.text_offset, header.image_size),
        (Arch::Aarch64, 0x8_0000, arm64.len() as u64)
    );
    assert!(!image.is_elf());
    assert_eq!(image.bytes, arm64);
    image.check_arch(Arch::Aarch64).unwrap();
    let e = image.check_arch(Arch::X86_64).unwrap_err();
    assert!(
        matches!(
            e,
            ImageError::WrongArch {
                expected: Arch::X86_64,
                ..
            }
        ),
        "{e}"
    );

    let gz = parse_bytes(compress(Compression::Gzip, &arm64)).unwrap();
    assert_eq!(
        gz.container,
        Container::Compressed {
            inner: InnerContainer::RawImage
        }
    );
    assert_eq!(gz.compression, Some(Compression::Gzip));
    assert_eq!(gz.bytes, arm64);

    let riscv = parse_bytes(raw_image(b"RSC\x05", 0x20_0000, &body)).unwrap();
    assert_eq!(riscv.arch(), Some(Arch::Riscv64));

    // An EFI zboot image holding the Image, gzip or zstd.
    for c in [Compression::Gzip, Compression::Zstd] {
        let efi = parse_bytes(zboot(&compress(c, &arm64), c.name())).unwrap();
        assert_eq!(efi.container, Container::EfiZboot);
        assert_eq!((efi.compression, efi.payload_offset), (Some(c), 0x100));
        assert_eq!(efi.bytes, arm64);
        efi.check_arch(Arch::Aarch64).unwrap();
    }
    let cut = zboot(&compress(Compression::Gzip, &arm64), "gzip");
    let e = parse_bytes(cut[..cut.len() - 100].to_vec()).unwrap_err();
    assert!(matches!(e, ImageError::Truncated { .. }), "{e}");

    // A compressed ELF (vmlinux.zst).
    let elf = vmlinux(3000);
    let zst = parse_bytes(compress(Compression::Zstd, &elf)).unwrap();
    assert_eq!(
        zst.container,
        Container::Compressed {
            inner: InnerContainer::Elf
        }
    );
    assert_eq!(zst.bytes, elf);
    // A compressed something else.
    let e = parse_bytes(compress(Compression::Bzip2, &body)).unwrap_err();
    assert!(
        matches!(e, ImageError::PayloadNotElf { offset: 0, .. }),
        "{e}"
    );
}

#[test]
fn open_names_the_file_and_refuses_one_over_the_cap() {
    let dir = std::env::temp_dir().join(format!("kp-linux-image-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("vmlinux");
    std::fs::write(&path, vmlinux(5000)).unwrap();
    let image = open(&path, &Options::default()).unwrap();
    assert_eq!(image.path, path);
    let e = open(&path, &Options { max_payload: 1000 }).unwrap_err();
    assert!(
        matches!(e, ImageError::FileTooLarge { cap: 1000, .. }),
        "{e}"
    );
    let missing = dir.join("missing");
    let e = open(&missing, &Options::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read", missing.display())),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn arch_names_parse_back() {
    for arch in Arch::ALL {
        assert_eq!(arch.name().parse::<Arch>(), Ok(arch));
    }
    assert!("mips".parse::<Arch>().unwrap_err().contains("i386, x86_64"));
}
