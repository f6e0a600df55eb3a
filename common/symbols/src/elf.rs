//! Loading a kernel ELF: its architecture, code symbols, code bytes, DWARF and call-frame
//! information.
//!
//! Everything is copied out of the file once, so the image owns its data (no borrowed
//! buffers, no memory map held open).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use kern_profile_format::{Arch, ElfInput, ELF_MAGIC};
use object::{
    Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind, SymbolSection,
};

use super::cfi::CfiTable;
use super::table::{RawSymbol, SymbolTable};
use super::{SymbolError, SymbolWarning};
use crate::budget::Budget;

/// The DWARF reader type: reference-counted, owned section data.
pub type DwarfReader = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// A loaded kernel image.
pub struct ElfImage {
    pub path: PathBuf,
    /// `None` for an architecture samples never come from.
    pub arch: Option<Arch>,
    /// The architecture it is read as, else the ELF machine as object names it (for error
    /// messages).
    pub machine: String,
    pub symbols: SymbolTable,
    pub dwarf: Option<addr2line::Context<DwarfReader>>,
    /// Call-frame information (riscv64 and aarch64 only: for the leaf and prologue correction).
    pub cfi: Option<CfiTable>,
    /// Its unwind tables' sections that hold something (`.orc_unwind`, `.eh_frame`,
    /// `.debug_frame`): what the plugin walks a kernel without frame pointers by.
    pub unwind_sections: Vec<&'static str>,
    /// Executable sections: start address and bytes.
    code: Vec<(u64, Vec<u8>)>,
    /// The lowest of their addresses, once: the report asks of every sample.
    lowest_code: Option<u64>,
    /// Loadable segments (PT_LOAD): `[start, end)` in memory, sorted.
    segments: Vec<(u64, u64)>,
    /// Problems that did not stop loading (e.g. unreadable DWARF).
    pub warnings: Vec<SymbolWarning>,
}

impl ElfImage {
    /// Loads an ELF file: its magic is checked before the rest is read (then once, whole).
    pub fn load(path: &Path) -> Result<Self, SymbolError> {
        let open_err = |source| SymbolError::Open {
            path: path.to_path_buf(),
            source,
        };
        match kern_profile_format::read_elf_input(path).map_err(open_err)? {
            ElfInput::Elf(data) => Self::parse(&data, path),
            ElfInput::NotElf(first) => Err(not_elf(&first, path)),
        }
    }

    /// Parses ELF bytes; `path` names the file in errors.
    pub fn parse(data: &[u8], path: &Path) -> Result<Self, SymbolError> {
        check_magic(data, path)?;
        let file = object::File::parse(data).map_err(|e| SymbolError::NotElf {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let guest = kern_profile_arch::elf_guest(file.architecture(), file.is_64());
        let arch = guest.map(|g| g.arch);
        // Messages name what the file is read as (x86_64 for one re-marked i386).
        let machine = arch.map_or_else(
            || format!("{:?}", file.architecture()).to_lowercase(),
            |a| a.name().to_string(),
        );

        let mut warnings = Vec::new();
        if guest.is_some_and(|g| g.remarked) {
            warnings.push(SymbolWarning::RemarkedElf {
                path: path.to_path_buf(),
            });
        }
        let code = code_sections(&file, data.len(), path, &mut warnings);

        let mut segments: Vec<(u64, u64)> = file
            .segments()
            .filter(|s| s.size() > 0)
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        segments.sort_unstable();

        let mut raw = code_symbols(&file);
        // Symbols name the image's own memory only: an absolute or physical-address symbol
        // outside its sections (xv6's `_start` at 0x0010000c, below a kernel at 0x80100000)
        // would otherwise run up to the next symbol over whatever lies between.
        let allocated = allocated_sections(&file);
        if !allocated.is_empty() {
            raw.retain(|r| within(&allocated, r.start).is_some());
        }
        let code_ranges: Vec<(u64, u64)> =
            code.iter().map(|(a, b)| (*a, a + b.len() as u64)).collect();
        let symbols = SymbolTable::new(raw, |start| {
            within(&code_ranges, start).or_else(|| within(&allocated, start))
        });

        // One bound for everything decompressed from this file.
        let mut budget = Budget::for_file(data.len());
        let has_dwarf = file
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0);
        let dwarf = if has_dwarf {
            match load_dwarf(&file, &mut budget) {
                Ok(ctx) => Some(ctx),
                Err(e) => {
                    warnings.push(SymbolWarning::UnreadableDwarf {
                        path: path.to_path_buf(),
                        error: e.to_string(),
                    });
                    None
                }
            }
        } else {
            None
        };
        let (cfi, cfi_error) = arch.map_or((None, None), |a| CfiTable::load(&file, a, &mut budget));
        if let Some(e) = cfi_error {
            warnings.push(SymbolWarning::UnreadableCfi {
                path: path.to_path_buf(),
                error: e.to_string(),
            });
        }
        let unwind_sections = [".orc_unwind", ".eh_frame", ".debug_frame"]
            .into_iter()
            .filter(|n| file.section_by_name(n).is_some_and(|s| s.size() > 0))
            .collect();
        Ok(ElfImage {
            path: path.to_path_buf(),
            arch,
            machine,
            symbols,
            dwarf,
            cfi,
            unwind_sections,
            lowest_code: code.iter().map(|(a, _)| *a).min(),
            code,
            segments,
            warnings,
        })
    }

    /// True when the image can name nothing: no code symbols and no DWARF.
    pub fn is_stripped(&self) -> bool {
        self.symbols.is_empty() && self.dwarf.is_none()
    }

    /// True when a loadable segment (PT_LOAD) of the image holds `addr` in memory.
    pub fn loads(&self, addr: u64) -> bool {
        let i = self.segments.partition_point(|(a, _)| *a <= addr);
        self.segments[..i].iter().any(|&(_, end)| addr < end)
    }

    /// The loadable segments, `[start, end)`, sorted by start.
    /// The lowest address of its executable sections.
    pub fn lowest_code(&self) -> Option<u64> {
        self.lowest_code
    }

    pub fn segments(&self) -> &[(u64, u64)] {
        &self.segments
    }

    /// The code bytes at `addr`, up to `n`, when `addr` is in an executable section.
    pub fn code_at(&self, addr: u64, n: usize) -> Option<&[u8]> {
        let i = self
            .code
            .partition_point(|(a, _)| *a <= addr)
            .checked_sub(1)?;
        let (start, bytes) = &self.code[i];
        let off = usize::try_from(addr - start).ok()?;
        if off >= bytes.len() {
            return None;
        }
        Some(&bytes[off..(off + n).min(bytes.len())])
    }
}

/// Tells a file that is no ELF from its first bytes.
fn check_magic(data: &[u8], path: &Path) -> Result<(), SymbolError> {
    match data.starts_with(ELF_MAGIC) {
        true => Ok(()),
        false => Err(not_elf(data, path)),
    }
}

/// Why a file whose first bytes are `first` is no ELF.
pub(crate) fn not_elf(first: &[u8], path: &Path) -> SymbolError {
    let reason = if first.starts_with(kern_profile_format::MAGIC) {
        "this is a kern-profile raw sample file; the ELF comes second: `kern-profile RAW ELF`"
    } else {
        "no ELF magic (\\x7fELF) at offset 0"
    };
    SymbolError::NotElf {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The end of the range of `ranges` (`[start, end)`) that holds `addr`.
fn within(ranges: &[(u64, u64)], addr: u64) -> Option<u64> {
    ranges
        .iter()
        .find(|(a, e)| *a <= addr && addr < *e)
        .map(|(_, e)| *e)
}

/// The memory ranges of the sections the image occupies (`SHF_ALLOC`, not empty).
fn allocated_sections(file: &object::File<'_>) -> Vec<(u64, u64)> {
    file.sections()
        .filter(|s| {
            s.size() > 0
                && matches!(s.flags(), object::SectionFlags::Elf { sh_flags }
                    if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0)
        })
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect()
}

/// Executable sections' start addresses and bytes, sorted. Section headers may point many
/// sections at the same bytes: the copies together stay within the file's size.
fn code_sections(
    file: &object::File<'_>,
    file_size: usize,
    path: &Path,
    warnings: &mut Vec<SymbolWarning>,
) -> Vec<(u64, Vec<u8>)> {
    let mut code = Vec::new();
    let mut copied = 0usize;
    for s in file.sections() {
        if s.kind() != SectionKind::Text || s.size() == 0 {
            continue;
        }
        let Ok(bytes) = s.data() else { continue };
        copied += bytes.len();
        if copied > file_size {
            warnings.push(SymbolWarning::OverlappingCode {
                path: path.to_path_buf(),
                section: s.name().unwrap_or("?").to_string(),
            });
            break;
        }
        code.push((s.address(), bytes.to_vec()));
    }
    code.sort_by_key(|c| c.0);
    code
}

/// The code symbols of the symbol table, else of the dynamic symbol table.
pub fn code_symbols(file: &object::File<'_>) -> Vec<RawSymbol> {
    let raw = collect_symbols(file, file.symbols());
    if raw.is_empty() {
        return collect_symbols(file, file.dynamic_symbols());
    }
    raw
}

fn collect_symbols<'data, 'file>(
    file: &'file object::File<'data>,
    syms: object::read::SymbolIterator<'data, 'file>,
) -> Vec<RawSymbol> {
    let mut raw = Vec::new();
    for sym in syms {
        if sym.is_undefined() {
            continue;
        }
        let is_function = match sym.kind() {
            SymbolKind::Text => true,
            SymbolKind::Unknown | SymbolKind::Label => false,
            _ => continue,
        };
        // Untyped labels count only inside executable sections.
        let in_code = match sym.section() {
            SymbolSection::Section(idx) => file
                .section_by_index(idx)
                .is_ok_and(|s| s.kind() == SectionKind::Text),
            _ => false,
        };
        if !is_function && !in_code {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() || name.starts_with(".L") || name.starts_with('$') {
            continue;
        }
        raw.push(RawSymbol {
            start: sym.address(),
            size: Some(sym.size()).filter(|&s| s > 0),
            name: name.to_string(),
            is_function,
        });
    }
    raw
}

/// The DWARF sections, decompressed within the file's [`Budget`]; a section that cannot be
/// read makes the whole DWARF unusable (an error naming it), never empty.
fn load_dwarf(
    file: &object::File<'_>,
    budget: &mut Budget,
) -> Result<addr2line::Context<DwarfReader>, String> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut bad = None;
    let load = |id: gimli::SectionId| -> Result<DwarfReader, gimli::Error> {
        let data: Rc<[u8]> = match file.section_by_name(id.name()) {
            Some(s) => match budget.section_bytes(&s) {
                Ok(d) => Rc::from(&*d),
                Err(e) => {
                    bad.get_or_insert_with(|| format!("section {}: {e}", id.name()));
                    Rc::from(&[][..])
                }
            },
            None => Rc::from(&[][..]),
        };
        Ok(gimli::EndianRcSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(load).map_err(|e| e.to_string())?;
    if let Some(e) = bad {
        return Err(e);
    }
    addr2line::Context::from_dwarf(dwarf).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
