//! Unwind tables read once from a kernel ELF: x86_64 Linux's ORC ([`orc`]) and DWARF CFI
//! ([`cfi`]), for walks of kernels built without frame pointers ([`crate::walk_tables`]).
//! Bounded in memory: a table with more entries than [`Limits`] allows is refused with an
//! error that says so.

use kern_profile_arch::{guest, ElfGuest};
use kern_profile_format::Arch;
use object::{Object, ObjectSection, ObjectSymbol};

use crate::stubs::EntryStubs;

pub mod cfi;
mod index;
mod kernel;
pub mod orc;
mod stats;
mod text;
pub mod user;
pub mod walk;

pub use cfi::{CfaBase, CfiRow, CfiTable, Rule};
pub use kernel::{kernel_tables_of_elf, load_kernel_tables, KernelTables, KernelTablesError};
pub use orc::{OrcEntry, OrcKind, OrcLayout, OrcTable};
pub use stats::{EntryCounts, Refusal, TableStats};
pub use text::TextRanges;
pub use user::{UserAdded, UserProgram, UserTables};

/// What is wrong with a kernel's unwind tables.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("not an ELF kern-profile can read: {0}")]
    Elf(String),
    #[error("the ELF's machine is not one kern-profile profiles")]
    UnknownMachine,
    #[error("a program for {found}, and the guest is {guest}")]
    WrongArch {
        found: &'static str,
        guest: &'static str,
    },
    #[error("section {0} cannot be read: {1}")]
    Section(&'static str, String),
    #[error(".orc_unwind_ip ({ips} bytes) and .orc_unwind ({entries} bytes) do not hold the same number of 4- and 6-byte entries")]
    OrcSizes { ips: usize, entries: usize },
    #[error("the ORC table is empty")]
    OrcEmpty,
    #[error("the ORC table spans {low:#x}..{high:#x}, more than 4 GiB of code")]
    OrcSpan { low: u64, high: u64 },
    #[error("{count} {what} is more than the {cap} kern-profile reads (a memory bound)")]
    TooLarge {
        what: &'static str,
        count: usize,
        cap: usize,
    },
}

/// How much of a table is read at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub orc_entries: usize,
    pub cfi_rows: usize,
}

impl Default for Limits {
    /// 4 Mi ORC entries (32 MiB once indexed, 8 bytes each, 20 while they are read;
    /// Debian's 6.12 amd64 kernel has 440 Ki) and 2 Mi CFI rows (24 MiB once indexed, 12
    /// bytes each, 32 while they are read; a vmlinux's `.debug_frame` has a few hundred
    /// thousand).
    fn default() -> Self {
        Limits {
            orc_entries: 4 << 20,
            cfi_rows: 2 << 20,
        }
    }
}

/// A kernel's unwind tables.
#[derive(Debug, Clone)]
pub struct UnwindTables {
    pub arch: Arch,
    pub orc: Option<OrcTable>,
    pub cfi: Option<CfiTable>,
    /// The entry stubs among the code the tables do not cover ([`crate::stubs`]).
    pub stubs: EntryStubs,
    /// The user programs' CFI (the plugin's `user=`), for walks that reach them.
    pub user: UserTables,
}

impl UnwindTables {
    /// The tables of the kernel ELF in `elf`: ORC on x86_64, CFI on any architecture. `None`
    /// tables where the ELF has no such sections.
    pub fn from_elf(elf: &[u8], limits: Limits) -> Result<UnwindTables, TableError> {
        Self::from_elf_guest(elf, limits).map(|(tables, _)| tables)
    }

    /// As [`from_elf`](Self::from_elf), with the guest the ELF's header gave (whether it was
    /// re-marked, for the caller to say). Every entry is checked against the ELF's
    /// executable sections ([`TextRanges`]) and the entries kept before it; the counts are
    /// [`stats`](Self::stats). A table whose every entry was refused stays, empty, for its
    /// counts.
    pub fn from_elf_guest(
        elf: &[u8],
        limits: Limits,
    ) -> Result<(UnwindTables, ElfGuest), TableError> {
        let parts = ElfTables::of(elf)?;
        let orc = match &parts.orc {
            Some(o) => Some(OrcTable::parse_in(
                o.ip_addr,
                o.ips,
                o.entries,
                o.layout,
                limits.orc_entries,
                &parts.text,
            )?),
            None => None,
        };
        let cfi = parts.cfi_table(limits)?;
        let mut tables = UnwindTables {
            arch: parts.guest.arch,
            orc,
            cfi,
            stubs: EntryStubs::default(),
            user: UserTables::default(),
        };
        tables.stubs = parts.stubs(&tables);
        Ok((tables, parts.guest))
    }

    /// The counts of each table's entries, used and refused.
    pub fn stats(&self) -> TableStats {
        TableStats {
            orc: self.orc.as_ref().map(|t| t.stats()),
            cfi: self.cfi.as_ref().map(|t| t.stats()),
        }
    }

    /// Whether there is any table to walk with (none, or every entry refused).
    pub fn is_empty(&self) -> bool {
        self.orc.as_ref().is_none_or(|t| t.is_empty())
            && self.cfi.as_ref().is_none_or(|t| t.is_empty())
    }

    /// Bytes of memory the tables hold.
    pub fn heap_bytes(&self) -> usize {
        self.orc.as_ref().map_or(0, |t| t.heap_bytes())
            + self.cfi.as_ref().map_or(0, |t| t.heap_bytes())
            + self.stubs.heap_bytes()
            + self.user.heap_bytes()
    }

    /// One line for the plugin's start message: what was read.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = &self.orc {
            parts.push(format!("ORC {} entries ({:?} layout)", t.len(), t.layout));
        }
        if let Some(t) = &self.cfi {
            parts.push(format!("CFI {} rows ({})", t.len(), t.sections.join(", ")));
        }
        if let Some(r) = self.stats().refusals() {
            parts.push(r);
        }
        if !self.stubs.is_empty() {
            parts.push(format!(
                "{} code symbols without a table row read as entry stubs",
                self.stubs.stubs()
            ));
        }
        if parts.is_empty() {
            parts.push("no ORC or CFI".into());
        }
        for p in self.user.programs() {
            parts.push(format!("{}: CFI {} rows", p.name, p.cfi.len()));
        }
        format!(
            "{}, {} KiB",
            parts.join(", "),
            self.heap_bytes().div_ceil(1024)
        )
    }
}

impl TableStats {
    /// The counts the tables of the kernel ELF in `elf` would have, without building them
    /// (no CFI rows, no ORC index: what the report says of a kernel).
    pub fn of_elf(elf: &[u8]) -> Result<TableStats, TableError> {
        let parts = ElfTables::of(elf)?;
        let orc = match &parts.orc {
            Some(o) => Some(OrcTable::check(
                o.ip_addr,
                o.ips,
                o.entries,
                o.layout,
                &parts.text,
            )?),
            None => None,
        };
        let width = parts.guest.arch.ptr_width();
        let cfi = (!parts.cfi.is_empty()).then(|| CfiTable::check(&parts.cfi, width, &parts.text));
        Ok(TableStats { orc, cfi })
    }
}

/// `unwind tables of kernel.elf: CFI 1234 entries used, 17 refused (outside the kernel's
/// text 12, overlapping 5)` for the kernel ELF in `elf` named `name`, when some entry of its
/// tables is refused; `None` when none is (or the ELF cannot be read: loading it says why).
pub fn refusals_line(name: &str, elf: &[u8]) -> Option<String> {
    let stats = TableStats::of_elf(elf).ok()?;
    (stats.refused() > 0).then(|| format!("unwind tables of {name}: {}", stats.counts()))
}

/// Where an ELF's tables are.
struct ElfTables<'a> {
    guest: ElfGuest,
    text: TextRanges,
    /// The ELF, for its code symbols and bytes (the entry stubs).
    file: object::File<'a>,
    orc: Option<OrcSections<'a>>,
    cfi: Vec<cfi::CfiSection<'a>>,
}

/// x86_64 Linux's ORC sections.
struct OrcSections<'a> {
    ip_addr: u64,
    ips: &'a [u8],
    entries: &'a [u8],
    layout: OrcLayout,
}

impl<'a> ElfTables<'a> {
    fn of(elf: &'a [u8]) -> Result<ElfTables<'a>, TableError> {
        let file = object::File::parse(elf).map_err(|e| TableError::Elf(e.to_string()))?;
        let guest = kern_profile_arch::elf_guest(file.architecture(), file.is_64())
            .ok_or(TableError::UnknownMachine)?;
        let bytes = |name: &'static str| -> Result<Option<(u64, &'a [u8])>, TableError> {
            let Some(s) = file.section_by_name(name) else {
                return Ok(None);
            };
            // A compressed `.debug_frame` (`SHF_COMPRESSED`, `objcopy
            // --compress-debug-sections`) is not read: its bytes are no table.
            let compressed = matches!(s.flags(), object::SectionFlags::Elf { sh_flags }
                if sh_flags & u64::from(object::elf::SHF_COMPRESSED) != 0);
            if compressed {
                return Ok(None);
            }
            let data = s
                .data()
                .map_err(|e| TableError::Section(name, e.to_string()))?;
            Ok(Some((s.address(), data)))
        };
        let orc = match (guest.arch, bytes(".orc_unwind_ip")?, bytes(".orc_unwind")?) {
            (Arch::X86_64, Some((ip_addr, ips)), Some((_, entries))) => {
                let header = file.section_by_name(".orc_header").is_some();
                Some(OrcSections {
                    ip_addr,
                    ips,
                    entries,
                    layout: OrcLayout::detect(header, entries),
                })
            }
            _ => None,
        };
        let text_base = file.section_by_name(".text").map(|s| s.address());
        let mut cfi = Vec::new();
        for name in [".eh_frame", ".debug_frame"] {
            if let Some((address, data)) = bytes(name)? {
                if !data.is_empty() {
                    cfi.push(cfi::CfiSection {
                        name,
                        data,
                        address,
                        text: text_base,
                    });
                }
            }
        }
        Ok(ElfTables {
            guest,
            text: TextRanges::of_elf(&file),
            file,
            orc,
            cfi,
        })
    }

    /// The CFI sections' rows, checked against the text (`None` where there is no section;
    /// a table whose every entry was refused stays, empty, for its counts).
    fn cfi_table(&self, limits: Limits) -> Result<Option<CfiTable>, TableError> {
        if self.cfi.is_empty() {
            return Ok(None);
        }
        let arch = self.guest.arch;
        let (sp, fp) = guest(arch).dwarf_sp_fp();
        let ra = guest(arch).dwarf_return_column();
        let regs = cfi::CfiRegisters { sp, fp, ra };
        let t = CfiTable::parse_in(
            &self.cfi,
            arch.ptr_width(),
            regs,
            limits.cfi_rows,
            &self.text,
        )?;
        Ok((!t.is_empty() || t.stats().refused() > 0).then_some(t))
    }

    /// The entry stubs among the code symbols `tables` have no row for (read only when
    /// tables are built: reports that count entries need none).
    fn stubs(&self, tables: &UnwindTables) -> EntryStubs {
        let sections: Vec<(u64, &[u8])> = self
            .file
            .sections()
            .filter(text::is_exec)
            .filter_map(|s| Some((s.address(), s.data().ok()?)))
            .collect();
        // The section holding `addr`, and its offset there.
        let place = |addr: u64| {
            sections.iter().find_map(|&(base, data)| {
                let off = usize::try_from(addr.checked_sub(base)?).ok()?;
                (off < data.len()).then_some((data, off))
            })
        };
        let mut symbols: Vec<u64> = self
            .file
            .symbols()
            .filter(|s| {
                matches!(
                    s.kind(),
                    object::SymbolKind::Text | object::SymbolKind::Unknown
                ) && s.section_index().is_some()
                    && s.address() != 0
                    && place(s.address()).is_some()
            })
            .map(|s| s.address())
            .collect();
        symbols.sort_unstable();
        symbols.dedup();
        let uncovered = symbols.into_iter().filter(|&a| {
            tables
                .orc
                .as_ref()
                .and_then(|t| t.find(a))
                .is_none_or(|e| e.kind == OrcKind::Undefined)
                && tables.cfi.as_ref().and_then(|t| t.find(a)).is_none()
        });
        let code = |addr: u64, buf: &mut [u8]| match place(addr) {
            Some((data, off)) => match data.get(off..off.saturating_add(buf.len())) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                None => false,
            },
            None => false,
        };
        EntryStubs::read(self.guest.arch, uncovered, code, self.text.clone())
    }
}
