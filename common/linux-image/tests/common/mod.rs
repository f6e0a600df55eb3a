//! Small synthetic inputs: kallsyms tables laid out as Linux's scripts/kallsyms.c writes them,
//! ELF headers, bzImage setup headers and Image headers.
#![allow(dead_code)]

use std::io::Write;

use kern_profile_linux_image::Compression;

/// One symbol to put in the tables.
#[derive(Debug, Clone)]
pub struct Sym {
    pub address: u64,
    pub kind: char,
    pub name: String,
}

pub fn sym(address: u64, kind: char, name: &str) -> Sym {
    Sym {
        address,
        kind,
        name: name.to_owned(),
    }
}

/// Where the addresses go and whether `kallsyms_seqs_of_names` stands before the tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Up to 6.1: addresses, num_syms, names, markers, token table, token index.
    Old,
    /// 6.2, 6.3 and Debian's 6.1.y: Old with the seqs between markers and tokens.
    OldWithSeqs,
    /// 6.4 on: num_syms, names, markers, tokens, token index, addresses, seqs.
    New,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Absolute,
    Relative,
    /// `A` symbols absolute, the others counted down from the base.
    AbsolutePercpu,
}

#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub ptr: usize,
    pub marker_size: usize,
    pub order: Order,
    pub encoding: Encoding,
    /// Write 0 for the relative base (a relocatable raw Image does).
    pub zero_base: bool,
}

/// Multi-character tokens for the codes no character uses (as the compressor's pairs).
const COMPOUND: &[&str] = &[
    "do_", "sys_", "_init", "sched", "ule", "start_", "kernel", "_64", "irq", "get_", "set_",
];

/// The 256 tokens: every character of the names stands for itself, the free codes get
/// compound tokens, then fillers.
pub fn token_table(names: &[String]) -> Vec<Vec<u8>> {
    let mut used = [false; 256];
    for n in names {
        for &b in n.as_bytes() {
            used[b as usize] = true;
        }
    }
    let mut compounds = COMPOUND.iter();
    let mut filler = 0u32;
    (0..256)
        .map(|code| {
            if used[code] {
                vec![code as u8]
            } else if let Some(c) = compounds.next() {
                c.as_bytes().to_vec()
            } else {
                filler += 1;
                format!("~{filler}~").into_bytes()
            }
        })
        .collect()
}

/// A name encoded with the tokens, longest match first.
fn encode(name: &[u8], tokens: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < name.len() {
        let (code, len) = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| name[at..].starts_with(t))
            .map(|(c, t)| (c, t.len()))
            .max_by_key(|&(_, len)| len)
            .expect("every character is a token");
        out.push(code as u8);
        at += len;
    }
    out
}

fn pad(out: &mut Vec<u8>, align: usize) {
    while !out.len().is_multiple_of(align) {
        out.push(0);
    }
}

fn word(out: &mut Vec<u8>, value: u64, size: usize) {
    out.extend_from_slice(&value.to_le_bytes()[..size]);
}

/// The tables for `syms` (sorted by address here), after `prefix` bytes of filler: the
/// bytes and the offset of the token table.
pub fn build_tables(syms: &[Sym], layout: Layout, prefix: usize) -> (Vec<u8>, usize) {
    let mut syms = syms.to_vec();
    syms.sort_by_key(|s| s.address);
    let ptr = layout.ptr;
    let full: Vec<String> = syms
        .iter()
        .map(|s| format!("{}{}", s.kind, s.name))
        .collect();
    let tokens = token_table(&full);

    let mut out: Vec<u8> = (0..prefix).map(|i| (i * 7 + 1) as u8 | 1).collect();
    pad(&mut out, ptr);

    let addresses = |out: &mut Vec<u8>| {
        pad(out, ptr);
        let base = syms
            .iter()
            .filter(|s| layout.encoding != Encoding::AbsolutePercpu || s.kind != 'A')
            .map(|s| s.address)
            .min()
            .unwrap_or(0);
        for s in &syms {
            match layout.encoding {
                Encoding::Absolute => word(out, s.address, ptr),
                Encoding::Relative => word(out, s.address - base, 4),
                Encoding::AbsolutePercpu if s.kind == 'A' => word(out, s.address, 4),
                Encoding::AbsolutePercpu => word(
                    out,
                    (base as i64 - s.address as i64 - 1) as i32 as u32 as u64,
                    4,
                ),
            }
        }
        if layout.encoding != Encoding::Absolute {
            pad(out, ptr);
            word(out, if layout.zero_base { 0 } else { base }, ptr);
        }
    };
    let seqs = |out: &mut Vec<u8>| {
        pad(out, ptr);
        let mut order: Vec<usize> = (0..syms.len()).collect();
        order.sort_by_key(|&i| &syms[i].name);
        for i in order {
            out.extend_from_slice(&(i as u32).to_be_bytes()[1..]);
        }
    };

    if layout.order != Order::New {
        addresses(&mut out);
    }
    pad(&mut out, ptr);
    word(&mut out, syms.len() as u64, 4);
    pad(&mut out, ptr);
    let names_start = out.len();
    let mut markers = Vec::new();
    for (i, n) in full.iter().enumerate() {
        if i % 256 == 0 {
            markers.push((out.len() - names_start) as u64);
        }
        let codes = encode(n.as_bytes(), &tokens);
        if codes.len() < 0x80 {
            out.push(codes.len() as u8);
        } else {
            out.push((codes.len() & 0x7f) as u8 | 0x80);
            out.push((codes.len() >> 7) as u8);
        }
        out.extend_from_slice(&codes);
    }
    pad(&mut out, ptr);
    for m in markers {
        word(&mut out, m, layout.marker_size);
    }
    if layout.order == Order::OldWithSeqs {
        seqs(&mut out);
    }
    pad(&mut out, ptr);
    let token_table_at = out.len();
    let mut index = Vec::new();
    for t in &tokens {
        index.push((out.len() - token_table_at) as u16);
        out.extend_from_slice(t);
        out.push(0);
    }
    pad(&mut out, ptr);
    for i in index {
        out.extend_from_slice(&i.to_le_bytes());
    }
    if layout.order == Order::New {
        addresses(&mut out);
        seqs(&mut out);
    }
    out.extend_from_slice(&[0x5a; 40]);
    (out, token_table_at)
}

/// Symbols that use every digit (so the tokens "0" to "9" stand in a row), `count` of them.
pub fn many_syms(count: usize, base: u64) -> Vec<Sym> {
    let mut syms = vec![
        sym(base, 'T', "_text"),
        sym(base, 'T', "_stext"),
        sym(base + 0x10, 'T', "start_kernel"),
        sym(base + 0x40, 'T', "schedule"),
        sym(base + 0x80, 't', "do_syscall_64"),
    ];
    for i in syms.len()..count {
        let kind = ['T', 't', 'D', 'r'][i % 4];
        syms.push(sym(
            base + 0x100 + 0x20 * i as u64,
            kind,
            &format!("fn_{i}_0123456789"),
        ));
    }
    syms
}

/// A 64-byte ELF header: class (1: 32-bit, 2: 64-bit) and machine, little-endian.
pub fn elf_header(class: u8, machine: u16) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = class;
    h[5] = 1;
    h[6] = 1;
    h[16] = 2;
    h[18..20].copy_from_slice(&machine.to_le_bytes());
    h
}

/// A bzImage: a setup header (protocol `protocol`, one setup sector), then `payload` at
/// `payload_offset` within the protected-mode part, its length counting a size trailer.
pub fn bzimage(payload: &[u8], unpacked_len: usize, protocol: u16, payload_offset: u32) -> Vec<u8> {
    let mut img = vec![0u8; 1024 + payload_offset as usize];
    img[0x1f1] = 1;
    img[0x1fe] = 0x55;
    img[0x1ff] = 0xaa;
    img[0x202..0x206].copy_from_slice(b"HdrS");
    img[0x206..0x208].copy_from_slice(&protocol.to_le_bytes());
    img[0x248..0x24c].copy_from_slice(&payload_offset.to_le_bytes());
    img[0x24c..0x250].copy_from_slice(&(payload.len() as u32 + 4).to_le_bytes());
    img.extend_from_slice(payload);
    img.extend_from_slice(&(unpacked_len as u32).to_le_bytes());
    img.extend_from_slice(&[0u8; 32]);
    img
}

/// An arm64 (`ARM\x64`) or riscv64 (`RSC\x05`) Image header followed by `body`.
pub fn raw_image(magic: &[u8; 4], text_offset: u64, body: &[u8]) -> Vec<u8> {
    let mut img = vec![0u8; 64];
    img[8..16].copy_from_slice(&text_offset.to_le_bytes());
    img[16..24].copy_from_slice(&((64 + body.len()) as u64).to_le_bytes());
    img[0x38..0x3c].copy_from_slice(magic);
    img.extend_from_slice(body);
    img
}

/// `data` compressed as Linux's build compresses a kernel (lzo: only a header).
pub fn compress(compression: Compression, data: &[u8]) -> Vec<u8> {
    match compression {
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compression::Xz => {
            // As Linux's scripts/xz_wrap.sh: the x86 BCJ filter before LZMA2, CRC32.
            let mut options = lzma_rust2::XzOptions::with_preset(6);
            options.prepend_pre_filter(lzma_rust2::FilterType::BcjX86, 0);
            options.set_check_sum_type(lzma_rust2::CheckType::Crc32);
            let mut w = lzma_rust2::XzWriter::new(Vec::new(), options).unwrap();
            w.write_all(data).unwrap();
            w.finish().unwrap()
        }
        Compression::Lzma => {
            let options = lzma_rust2::LzmaOptions::with_preset(6);
            let mut w = lzma_rust2::LzmaWriter::new_use_header(Vec::new(), &options, None).unwrap();
            w.write_all(data).unwrap();
            w.finish().unwrap()
        }
        Compression::Bzip2 => {
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
        Compression::Lz4 => {
            // lz4 -l: the legacy magic, then 8 MiB blocks behind their compressed lengths.
            let mut out = 0x184C_2102u32.to_le_bytes().to_vec();
            for chunk in data.chunks(8 << 20) {
                let block = lz4_flex::block::compress(chunk);
                out.extend_from_slice(&(block.len() as u32).to_le_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Lzo => {
            // Only the lzop header: no LZO decoder is built in.
            let mut out = Compression::Lzo.magic().to_vec();
            out.extend_from_slice(&[0x10, 0x30, 0x20, 0x60, 0x09, 0x40, 0x01]);
            out
        }
    }
}

/// An EFI zboot image (arm64 `vmlinuz.efi`): "MZ", "zimg", the payload's offset and size, the
/// compression's name, then `payload` at 0x100 and its 4-byte size trailer.
pub fn zboot(payload: &[u8], compression: &str) -> Vec<u8> {
    let mut img = vec![0u8; 0x100];
    img[..2].copy_from_slice(b"MZ");
    img[4..8].copy_from_slice(b"zimg");
    img[8..12].copy_from_slice(&0x100u32.to_le_bytes());
    img[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    img[24..24 + compression.len()].copy_from_slice(compression.as_bytes());
    img[0x38..0x3c].copy_from_slice(b"\x64\xaa\x64\xaa");
    img.extend_from_slice(payload);
    img.extend_from_slice(&[0u8; 4]);
    img
}
