//! Writes the seed corpus of the `linux_image` fuzz target (small synthetic images: an ELF
//! and a raw Image holding kallsyms tables in each layout, bzImages in every compression,
//! an Image.gz, an EFI zboot image, cut and unknown files) into the folder given.
//!
//! usage: cargo run -p kern-profile-linux-image --example fuzz_seeds -- fuzz/corpus/linux_image

#[path = "../tests/common/mod.rs"]
mod common;

use common::{
    build_tables, bzimage, compress, elf_header, many_syms, raw_image, zboot, Encoding, Layout,
    Order,
};
use kern_profile_linux_image::Compression;

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: fuzz_seeds DIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, data: &[u8]| std::fs::write(dir.join(name), data).unwrap();
    let layout = |ptr, order, encoding| Layout {
        ptr,
        marker_size: 4,
        order,
        encoding,
        zero_base: false,
    };

    // vmlinux stand-ins: an ELF header (class, machine), then the tables.
    let vmlinux = |class, machine, syms: &[_], layout, prefix| {
        let mut elf = elf_header(class, machine);
        elf.extend(build_tables(syms, layout, prefix).0);
        elf
    };
    let mut syms = many_syms(300, 0xffff_ffff_8100_0000);
    syms.push(common::sym(0, 'A', "fixed_percpu_data"));
    let percpu = layout(8, Order::OldWithSeqs, Encoding::AbsolutePercpu);
    let x86_64 = vmlinux(2, 62, &syms, percpu, 16);
    write("x86_64-6.1.elf", &x86_64);
    let syms = many_syms(300, 0xffff_ffff_8100_0000);
    let new = vmlinux(2, 62, &syms, layout(8, Order::New, Encoding::Relative), 16);
    write("x86_64-6.12.elf", &new);
    let syms = many_syms(260, 0xc100_0000);
    let i386 = vmlinux(1, 3, &syms, layout(4, Order::Old, Encoding::Absolute), 12);
    write("i386-old.elf", &i386);

    // An arm64 Image whose kallsyms base is 0 until a RELA entry fills it.
    let link = 0xffff_8000_0800_0000u64;
    let mut l = layout(8, Order::Old, Encoding::Relative);
    l.zero_base = true;
    let syms = many_syms(40, link + 0x100);
    let (tables, _) = build_tables(&syms, l, 0);
    let with_base = build_tables(
        &syms,
        Layout {
            zero_base: false,
            ..l
        },
        0,
    )
    .0;
    let slot = (0..tables.len())
        .find(|&i| tables[i] != with_base[i])
        .unwrap()
        / 8
        * 8;
    let mut body = tables;
    while body.len() % 8 != 0 {
        body.push(0);
    }
    for (offset, addend) in [
        (link + 64 + slot as u64, link + 0x100),
        (link + 0x80, link + 0x110),
    ] {
        body.extend_from_slice(&offset.to_le_bytes());
        body.extend_from_slice(&1027u64.to_le_bytes());
        body.extend_from_slice(&addend.to_le_bytes());
    }
    let arm64 = raw_image(b"ARM\x64", 0, &body);
    write("arm64.Image", &arm64);
    write("arm64.Image.gz", &compress(Compression::Gzip, &arm64));
    write(
        "arm64.efi-zboot",
        &zboot(&compress(Compression::Zstd, &arm64), "zstd"),
    );

    // bzImages of the x86_64 ELF in every compression.
    for c in Compression::ALL {
        write(
            &format!("bzImage-{c}"),
            &bzimage(&compress(c, &x86_64), x86_64.len(), 0x020f, 0x40),
        );
    }
    let mut old = bzimage(&compress(Compression::Xz, &i386), i386.len(), 0x0207, 0);
    old[0x248..0x250].fill(0);
    write("bzImage-2.07-scan", &old);
    let cut = bzimage(
        &compress(Compression::Zstd, &x86_64),
        x86_64.len(),
        0x020f,
        0,
    );
    write("bzImage-cut", &cut[..cut.len() / 2]);
    write("unknown", &[0x42; 256]);
}
