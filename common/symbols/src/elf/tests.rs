use super::*;

/// An ELF32 i386 image built by hand: `.text` (16 bytes at `text_at`) and a symbol table of
/// `(name, value, size, type, section index)`.
fn elf32(text_at: u32, syms: &[(&str, u32, u32, u8, u16)]) -> Vec<u8> {
    let text = [0x90u8; 16];
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 16];
    for &(name, value, size, kind, shndx) in syms {
        let at = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        symtab.extend_from_slice(&at.to_le_bytes());
        symtab.extend_from_slice(&value.to_le_bytes());
        symtab.extend_from_slice(&size.to_le_bytes());
        symtab.push(0x10 | kind); // STB_GLOBAL
        symtab.push(0);
        symtab.extend_from_slice(&shndx.to_le_bytes());
    }
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    let mut out = vec![0u8; 52];
    let place = |bytes: &[u8], out: &mut Vec<u8>| {
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        let at = out.len() as u32;
        out.extend_from_slice(bytes);
        at
    };
    let text_off = place(&text, &mut out);
    let sym_off = place(&symtab, &mut out);
    let str_off = place(&strtab, &mut out);
    let shstr_off = place(shstrtab, &mut out);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    let shoff = out.len() as u32;
    // (name, type, flags, addr, offset, size, link, info, align, entsize)
    let sections: [[u32; 10]; 5] = [
        [0; 10],
        [1, 1, 0x6, text_at, text_off, 16, 0, 0, 16, 0], // PROGBITS, ALLOC | EXECINSTR
        [7, 2, 0, 0, sym_off, symtab.len() as u32, 3, 1, 4, 16], // SYMTAB
        [15, 3, 0, 0, str_off, strtab.len() as u32, 0, 0, 1, 0],
        [23, 3, 0, 0, shstr_off, shstrtab.len() as u32, 0, 0, 1, 0],
    ];
    for s in sections {
        for v in s {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let h = &mut out[..52];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4..7].copy_from_slice(&[1, 1, 1]); // ELFCLASS32, little-endian, version 1
    h[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    h[18..20].copy_from_slice(&3u16.to_le_bytes()); // EM_386
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[24..28].copy_from_slice(&text_at.to_le_bytes());
    h[32..36].copy_from_slice(&shoff.to_le_bytes());
    h[40..42].copy_from_slice(&52u16.to_le_bytes()); // e_ehsize
    h[46..48].copy_from_slice(&40u16.to_le_bytes()); // e_shentsize
    h[48..50].copy_from_slice(&5u16.to_le_bytes()); // e_shnum
    h[50..52].copy_from_slice(&4u16.to_le_bytes()); // e_shstrndx
    out
}

const STT_NOTYPE: u8 = 0;
const STT_FUNC: u8 = 2;
const SHN_ABS: u16 = 0xfff1;

/// xv6's kernel: `_start = V2P_WO(entry)`, a label of `.text` at the physical entry
/// 0x0010000c, below the kernel at 0x80100000; many multiboot kernels have an absolute
/// function symbol there instead. Neither names anything: between them and the kernel lie
/// user programs' addresses.
#[test]
fn symbols_outside_the_images_sections_name_nothing() {
    for (name, kind, shndx) in [
        ("_start", STT_NOTYPE, 1),
        ("_entry_phys", STT_FUNC, SHN_ABS),
    ] {
        let data = elf32(
            0x8010_0000,
            &[
                ("entry", 0x8010_0000, 16, STT_FUNC, 1),
                (name, 0x0010_000c, 0, kind, shndx),
            ],
        );
        let image = ElfImage::parse(&data, Path::new("kernel")).unwrap();
        assert_eq!(
            image.symbols.lookup(0x8010_0004).map(|s| &*s.name),
            Some("entry")
        );
        for user in [0x0010_000c, 0x0020_1234, 0x8000_0000] {
            assert_eq!(image.symbols.lookup(user), None, "{name} at {user:#x}");
        }
        assert_eq!(image.symbols.len(), 1);
    }
}

/// A label of unknown size in the image's code runs to the section's end, no further.
#[test]
fn unsized_labels_stop_at_their_section_end() {
    let data = elf32(0x1000, &[("label", 0x1008, 0, STT_NOTYPE, 1)]);
    let image = ElfImage::parse(&data, Path::new("x")).unwrap();
    assert_eq!(
        image.symbols.lookup(0x100f).map(|s| &*s.name),
        Some("label")
    );
    assert_eq!(image.symbols.lookup(0x1010), None);
}
