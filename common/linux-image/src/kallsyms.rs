//! The kallsyms tables Linux compiles into its image (scripts/kallsyms.c writes them,
//! kernel/kallsyms.c reads them), found by scanning, without any symbol table:
//!
//! - `kallsyms_token_table`: 256 NUL-terminated tokens; every character used in a name is
//!   its own one-byte token, so "0\0" to "9\0" stand in a row at code 0x30. Found by that.
//! - `kallsyms_token_index`: 256 u16 offsets of the tokens, right after the token table;
//!   it confirms the table and gives its start.
//! - `kallsyms_markers`: before the token table, the offset in `kallsyms_names` of every
//!   256th name (u32 since 6.x, `PTR` before), starting at 0.
//! - `kallsyms_names`: per symbol a length (one byte, or two with the high bit set from 6.1
//!   on) and that many token codes; the first character is the `nm` type. Before it,
//!   `kallsyms_num_syms`.
//! - The addresses: `kallsyms_addresses` (absolute pointers), or `kallsyms_offsets` (u32)
//!   and `kallsyms_relative_base`, either before `kallsyms_num_syms` (up to 6.3) or after
//!   the token index (6.4 on); with `KALLSYMS_ABSOLUTE_PERCPU` (x86_64 SMP up to 6.14) a
//!   non-negative offset is an absolute address and a negative one counts down from the
//!   base. Every table starts aligned to a pointer. Which layout an image has is found by
//!   trying each and keeping the one whose addresses are sorted, as the tables are.
//!
//! In 6.2 and 6.3 (and Debian's 6.1.y, which has the backport) `kallsyms_seqs_of_names`
//! (3 bytes a symbol) stands between the markers and the token table; from 6.4 on after the
//! relative base. Not handled: big-endian kernels.

use std::path::Path;

use crate::ImageError;

mod addresses;
mod names;
mod tokens;

use addresses::{addresses_at, relocated_base};
use names::{entry_at, markers_and_names};
use tokens::tokens_at;

/// One symbol of the kernel, as `/proc/kallsyms` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSymbol {
    pub address: u64,
    /// Distance to the next higher symbol address (kallsyms has no sizes); 0 for the last.
    pub size: u64,
    pub name: String,
    /// `nm`'s type character: `T`/`t` text, `D`/`d` data, `R`/`r` read-only, `B`/`b` bss...
    pub kind: char,
}

impl KernelSymbol {
    /// A text (code) symbol.
    pub fn is_text(&self) -> bool {
        matches!(self.kind, 'T' | 't' | 'W' | 'w')
    }
}

/// How the addresses are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressEncoding {
    /// `kallsyms_addresses`: one pointer per symbol.
    Absolute,
    /// `kallsyms_offsets` from `kallsyms_relative_base`.
    Relative,
    /// Relative, with absolute per-CPU symbols (`KALLSYMS_ABSOLUTE_PERCPU`).
    RelativeAbsolutePercpu,
}

/// Where the tables were found (file offsets in the kernel bytes) and how they are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KallsymsLayout {
    pub num_syms: u32,
    pub names: u64,
    pub markers: u64,
    /// Size of one marker: 4, or a pointer in older kernels.
    pub marker_size: usize,
    /// `kallsyms_seqs_of_names` when it stands before the token table (6.2, 6.3, 6.1.y).
    pub seqs_of_names: Option<u64>,
    pub token_table: u64,
    pub token_index: u64,
    /// `kallsyms_addresses` or `kallsyms_offsets`.
    pub addresses: u64,
    pub relative_base: Option<u64>,
    pub encoding: AddressEncoding,
    /// The addresses stand after the token index (Linux 6.4 on), not before the names.
    pub addresses_after_tokens: bool,
}

/// A kernel's symbols from its kallsyms tables.
#[derive(Debug, Clone)]
pub struct Kallsyms {
    /// Sorted by address (ties in the tables' order).
    pub symbols: Vec<KernelSymbol>,
    /// `_text`, `_stext` and `_etext` (the start of the image, of its code, and the end of
    /// the code), when the tables have them: a run-time `_text` minus this one is the slide.
    pub text: Option<u64>,
    pub stext: Option<u64>,
    pub etext: Option<u64>,
    /// The link-time virtual address of the kernel bytes' offset 0, when the tables had to
    /// be relocated to be read (a raw arm64/riscv64 Image: see [`KernelImage::virtual_base`]).
    ///
    /// [`KernelImage::virtual_base`]: crate::KernelImage::virtual_base
    pub image_base: Option<u64>,
    pub layout: KallsymsLayout,
}

impl Kallsyms {
    /// The address of the first symbol called `name`.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.symbols
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.address)
    }

    /// Writes the symbols as `/proc/kallsyms` lists them ("ffffffff81000000 T _text", the
    /// address as wide as a pointer of `pointer_size` bytes), for the tools that read that.
    pub fn write_proc_format(
        &self,
        out: &mut impl std::io::Write,
        pointer_size: usize,
    ) -> std::io::Result<()> {
        let width = 2 * pointer_size;
        for s in &self.symbols {
            writeln!(out, "{:0width$x} {} {}", s.address, s.kind, s.name)?;
        }
        Ok(())
    }

    /// The symbol covering `address` (the last one at or below it).
    pub fn lookup(&self, address: u64) -> Option<&KernelSymbol> {
        let i = self.symbols.partition_point(|s| s.address <= address);
        i.checked_sub(1).map(|i| &self.symbols[i])
    }
}

/// The ten digit tokens at codes 0x30-0x39.
const DIGITS: &[u8] = b"0\x001\x002\x003\x004\x005\x006\x007\x008\x009\x00";
/// Token-table candidates tried before giving up (a hostile image full of digits).
const MAX_CANDIDATES: usize = 64;

/// A table that did not check out: the error names the candidate that got furthest.
struct Reject {
    table: &'static str,
    offset: usize,
    why: String,
}

/// How far reading got when a table was rejected.
fn stage(table: &str) -> u8 {
    match table {
        "kallsyms_token_table" => 0,
        "kallsyms_markers" => 1,
        "kallsyms_offsets" => 2,
        _ => 3,
    }
}

fn reject(table: &'static str, offset: usize, why: impl Into<String>) -> Reject {
    Reject {
        table,
        offset,
        why: why.into(),
    }
}

/// Finds and decodes the kallsyms tables in `data` (a vmlinux or a raw Image; `ptr` is the
/// kernel's pointer size, 4 or 8).
pub fn read(path: &Path, data: &[u8], ptr: usize) -> Result<Kallsyms, ImageError> {
    let mut last = None;
    for hit in memchr::memmem::find_iter(data, DIGITS).take(MAX_CANDIDATES) {
        // Token 0x2f ends right before token 0x30.
        if hit == 0 || data[hit - 1] != 0 {
            continue;
        }
        match read_at(data, hit, ptr) {
            Ok(kallsyms) => return Ok(kallsyms),
            // Report the candidate that got furthest: a token table whose names did not
            // check out says more than a run of digits elsewhere.
            Err(r) => {
                if last
                    .as_ref()
                    .is_none_or(|l: &Reject| stage(r.table) >= stage(l.table))
                {
                    last = Some(r);
                }
            }
        }
    }
    Err(match last {
        Some(r) => ImageError::BadKallsyms {
            path: path.to_owned(),
            table: r.table,
            offset: r.offset as u64,
            why: r.why,
        },
        None => ImageError::NoKallsyms {
            path: path.to_owned(),
            why: "no kallsyms_token_table (the tokens \"0\" to \"9\" in a row) in the kernel: \
                  built without CONFIG_KALLSYMS?"
                .into(),
        },
    })
}

fn u16_at(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn word_at(data: &[u8], at: usize, size: usize) -> Option<u64> {
    match size {
        4 => u32_at(data, at).map(u64::from),
        _ => Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?)),
    }
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// The tables around the token table whose code 0x30 is at `digits`.
fn read_at(data: &[u8], digits: usize, ptr: usize) -> Result<Kallsyms, Reject> {
    let (token_table, token_index, tokens) = tokens_at(data, digits)?;

    let (marker_size, markers, names, num_syms, seqs_of_names) =
        markers_and_names(data, token_table, ptr).ok_or_else(|| {
            reject(
                "kallsyms_markers",
                token_table,
                "no kallsyms_markers and kallsyms_names before the token table",
            )
        })?;
    let count = num_syms as usize;
    let num_syms_at = names - ptr;

    // The addresses: before kallsyms_num_syms (up to 6.3) or after the token index.
    let after_tokens = align_up(token_index + 512, ptr);
    let relative_before = num_syms_at
        .checked_sub(ptr)
        .and_then(|base| base.checked_sub(align_up(4 * count, ptr)));
    let absolute_before = num_syms_at.checked_sub(ptr * count);
    let mut candidates = Vec::new();
    for (at, after) in [(relative_before, false), (Some(after_tokens), true)] {
        for encoding in [
            AddressEncoding::Relative,
            AddressEncoding::RelativeAbsolutePercpu,
        ] {
            candidates.push((at, after, encoding));
        }
    }
    candidates.push((absolute_before, false, AddressEncoding::Absolute));
    candidates.push((Some(after_tokens), true, AddressEncoding::Absolute));
    let (mut addresses, relative_base, addresses_at_offset, encoding, after) = candidates
        .into_iter()
        .find_map(|(at, after, encoding)| {
            let at = at?;
            let (addresses, base) = addresses_at(data, at, count, ptr, encoding)?;
            // A relative table's base must sit right before kallsyms_num_syms when the
            // table comes before it.
            if !after && encoding != AddressEncoding::Absolute && base != Some(num_syms_at - ptr) {
                return None;
            }
            Some((addresses, base, at, encoding, after))
        })
        .ok_or_else(|| {
            reject(
                "kallsyms_offsets",
                num_syms_at,
                "no sorted kallsyms_addresses or kallsyms_offsets before kallsyms_num_syms or after kallsyms_token_index",
            )
        })?;

    // A relocatable raw Image (arm64, riscv64) holds 0 for the base, which a RELA
    // relocation fills at boot: take the base, and the image's own address, from it.
    let mut image_base = None;
    if let Some(base_at) = relative_base {
        if word_at(data, base_at, ptr) == Some(0) && ptr == 8 {
            let (image, base) = relocated_base(data, base_at, &addresses).ok_or_else(|| {
                reject(
                    "kallsyms_relative_base",
                    base_at,
                    "0 in the image (relocated at boot), and no RELA relocation for it found",
                )
            })?;
            image_base = Some(image);
            for address in &mut addresses {
                *address = address.wrapping_add(base);
            }
        }
    }

    // The names.
    let mut symbols = Vec::with_capacity(count);
    let mut at = names;
    let mut name = Vec::new();
    for address in addresses {
        let (codes, next) = entry_at(data, at)
            .ok_or_else(|| reject("kallsyms_names", at, "a name runs past the image"))?;
        name.clear();
        for &code in codes {
            name.extend_from_slice(tokens[usize::from(code)]);
        }
        let (kind, rest) = name
            .split_first()
            .ok_or_else(|| reject("kallsyms_names", at, "an empty name"))?;
        symbols.push(KernelSymbol {
            address,
            size: 0,
            name: String::from_utf8_lossy(rest).into_owned(),
            kind: char::from(*kind),
        });
        at = next;
    }
    // Sizes: the distance to the next higher address.
    let mut next_higher = 0;
    for i in (0..symbols.len()).rev() {
        if i + 1 < symbols.len() && symbols[i + 1].address > symbols[i].address {
            next_higher = symbols[i + 1].address;
        }
        symbols[i].size = next_higher.saturating_sub(symbols[i].address);
    }
    let find = |wanted: &str| symbols.iter().find(|s| s.name == wanted).map(|s| s.address);
    let (text, stext, etext) = (find("_text"), find("_stext"), find("_etext"));
    Ok(Kallsyms {
        image_base,
        text,
        stext,
        etext,
        layout: KallsymsLayout {
            num_syms,
            names: names as u64,
            markers: markers as u64,
            marker_size,
            seqs_of_names: seqs_of_names.map(|at| at as u64),
            token_table: token_table as u64,
            token_index: token_index as u64,
            addresses: addresses_at_offset as u64,
            relative_base: relative_base.map(|at| at as u64),
            encoding,
            addresses_after_tokens: after,
        },
        symbols,
    })
}
