//! DWARF call-frame information (`.eh_frame`, `.debug_frame`), read once with gimli into
//! compact rows: for each address range, where the canonical frame address (CFA, the
//! caller's stack pointer) is, and where the caller's frame pointer and return address are.
//! Only what a stack walk needs: a CFA on the stack or frame pointer plus an offset, and
//! registers saved at an offset from the CFA; any other rule leaves the range uncovered, so
//! the walk falls back to frame pointers there.
//!
//! Entry code annotated as kernels did before ORC (Linux's `RING0_INT_FRAME` and `INTR_FRAME`
//! in entry_32.S and entry_64.S up to 4.1): the CIE's `S` augmentation (`.cfi_signal_frame`)
//! marks an interrupt frame, whose return address is the interrupted instruction, and the
//! interrupted stack pointer may be saved in it (`.cfi_offset rsp`, x86_64's frame).

use std::borrow::Cow;
use std::num::NonZeroI16;

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, FrameDescriptionEntry, Reader,
    Register, RegisterRule, RunTimeEndian, UnwindContext, UnwindSection,
};

use super::index::{self, BlockIndex};
use super::stats::EntryCounts;
use super::text::TextRanges;
use super::TableError;

mod entries;
pub mod freepascal;

pub use entries::{for_each_fde, FdeCheck, Taken};

/// Where the CFA is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CfaBase {
    StackPointer,
    FramePointer,
}

/// Where a caller's register value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Not saved: the register still holds it (or, for the return address on x86, the
    /// outermost frame).
    Unchanged,
    /// In memory at `CFA + offset`.
    AtCfa(i32),
    /// The value `CFA + offset` itself.
    CfaPlus(i32),
}

/// The rule set of one address range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CfiRow {
    pub cfa_base: CfaBase,
    pub cfa_offset: i32,
    pub fp: Rule,
    pub ra: Rule,
    /// Where the caller's stack pointer is saved, as an offset from the CFA; `None`: it is
    /// the CFA (DWARF's convention).
    pub sp_saved: Option<NonZeroI16>,
    /// An interrupt or exception frame (the CIE's `S`): the return address is the
    /// interrupted instruction itself, in an interrupted context.
    pub signal: bool,
}

impl CfiRow {
    /// A function's frame: the caller's stack pointer is the CFA.
    pub fn call(cfa_base: CfaBase, cfa_offset: i32, fp: Rule, ra: Rule) -> CfiRow {
        CfiRow {
            cfa_base,
            cfa_offset,
            fp,
            ra,
            sp_saved: None,
            signal: false,
        }
    }
}

/// A row and the first address it covers; `None` rows end a range (an FDE's end, or a rule
/// the walk cannot follow).
#[derive(Debug, Clone, Copy)]
struct Row {
    start: u64,
    row: Option<CfiRow>,
}

/// The rows of every FDE of an ELF's CFI sections, sorted by address, with the index of
/// where each block of code starts among them (a block index, `index.rs`).
#[derive(Debug, Clone)]
pub struct CfiTable {
    /// The first address of each row, and its rule set's id.
    index: BlockIndex<u64>,
    /// The distinct rule sets (`None`: not covered), by id.
    distinct: Vec<Option<CfiRow>>,
    len: usize,
    /// The sections read.
    pub sections: Vec<&'static str>,
    /// Each section whose reading ended early, at an entry running past its end (what came
    /// before it is kept).
    pub warnings: Vec<String>,
    /// The FDEs used and refused.
    stats: EntryCounts,
}

/// What a CFI section is: its name, contents, load address (`.eh_frame`'s pointers may be
/// relative to it) and the `.text` address.
pub struct CfiSection<'a> {
    pub name: &'static str,
    pub data: &'a [u8],
    pub address: u64,
    pub text: Option<u64>,
}

/// The DWARF register numbers the rows are about.
#[derive(Debug, Clone, Copy)]
pub struct CfiRegisters {
    pub sp: u16,
    pub fp: u16,
    /// The return-address column when the CIE names none (it always does in practice).
    pub ra: u16,
}

impl CfiTable {
    /// Reads `.eh_frame` and `.debug_frame` sections (little-endian, `address_size` bytes a
    /// pointer), with at most `max_rows` rows in all, the kernel's text unknown.
    pub fn parse(
        sections: &[CfiSection<'_>],
        address_size: u8,
        regs: CfiRegisters,
        max_rows: usize,
    ) -> Result<CfiTable, TableError> {
        Self::parse_in(
            sections,
            address_size,
            regs,
            max_rows,
            &TextRanges::unknown(),
        )
    }

    /// As [`parse`](Self::parse), each FDE checked against the kernel's `text` and the FDEs
    /// kept before it (the `entries` module); FreePascal's layout read as such (the `freepascal`
    /// module).
    pub fn parse_in(
        sections: &[CfiSection<'_>],
        address_size: u8,
        regs: CfiRegisters,
        max_rows: usize,
        text: &TextRanges,
    ) -> Result<CfiTable, TableError> {
        let mut rows = Vec::new();
        let out = Some(RowsOut {
            regs,
            max_rows,
            rows: &mut rows,
        });
        let (stats, names, warnings) = read_sections(sections, address_size, text, out)?;
        let mut table = CfiTable::sorted(rows);
        (table.sections, table.warnings, table.stats) = (names, warnings, stats);
        Ok(table)
    }

    /// The counts of [`parse_in`](Self::parse_in) without its rows (what the report says of
    /// a kernel's tables, at a fraction of the cost). Instructions are not run: an FDE whose
    /// instructions do not decode counts as used here.
    pub fn check(sections: &[CfiSection<'_>], address_size: u8, text: &TextRanges) -> EntryCounts {
        // Without rows there is no row bound to pass: no error.
        read_sections(sections, address_size, text, None)
            .map_or_else(|_| EntryCounts::default(), |r| r.0)
    }

    /// The table of `rows`, sorted by address; at one address a range's end before another's
    /// start (so the start wins the lookup's rightmost match).
    fn sorted(mut rows: Vec<Row>) -> CfiTable {
        rows.sort_by_key(|r| (r.start, r.row.is_some()));
        let (distinct, ids) = index::distinct(rows.iter().map(|r| r.row));
        CfiTable {
            index: BlockIndex::new(rows.iter().map(|r| r.start).collect(), ids),
            distinct,
            len: rows.len(),
            sections: Vec::new(),
            warnings: Vec::new(),
            stats: EntryCounts::default(),
        }
    }

    /// A table of `(first address, rule set)` rows as they are (tests).
    #[cfg(test)]
    pub(crate) fn from_rows(rows: &[(u64, Option<CfiRow>)]) -> CfiTable {
        CfiTable::sorted(
            rows.iter()
                .map(|&(start, row)| Row { start, row })
                .collect(),
        )
    }

    /// The rule set covering `addr`, if any.
    #[inline(always)]
    pub fn find(&self, addr: u64) -> Option<CfiRow> {
        *self.distinct.get(self.index.get(addr)? as usize)?
    }

    /// The same by a binary search over every row, without the block index (tests check
    /// the index against it).
    pub fn find_by_search(&self, addr: u64) -> Option<CfiRow> {
        *self
            .distinct
            .get(self.index.get_by_search(addr)? as usize)?
    }

    /// The FDEs used and refused.
    pub fn stats(&self) -> EntryCounts {
        self.stats
    }

    /// How many rows (range ends included) the table holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of memory the table holds.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes() + self.distinct.capacity() * std::mem::size_of::<Option<CfiRow>>()
    }
}

/// Where [`read_sections`] puts the rows, and their bound.
struct RowsOut<'a> {
    regs: CfiRegisters,
    max_rows: usize,
    rows: &'a mut Vec<Row>,
}

/// More rows than [`RowsOut::max_rows`].
struct TooLarge;

/// Reads the FDEs of `sections`, checked, and their rows into `out` when given: the counts,
/// the sections' names, and a warning for each section whose reading ended early.
fn read_sections(
    sections: &[CfiSection<'_>],
    address_size: u8,
    text: &TextRanges,
    mut out: Option<RowsOut<'_>>,
) -> Result<(EntryCounts, Vec<&'static str>, Vec<String>), TableError> {
    let mut check = FdeCheck::new(text, address_size);
    let (mut names, mut warnings) = (Vec::new(), Vec::new());
    let mut ctx = UnwindContext::new();
    let endian = RunTimeEndian::Little;
    for s in sections {
        let data = match s.name {
            ".debug_frame" => {
                let (data, wide) = freepascal::standard_layout(s.data, endian, address_size, text);
                check.counts.wide_cie_pointers += wide;
                data
            }
            _ => Cow::Borrowed(s.data),
        };
        let data = EndianSlice::new(&data, endian);
        let read = if s.name == ".eh_frame" {
            let mut bases = BaseAddresses::default().set_eh_frame(s.address);
            if let Some(text) = s.text {
                bases = bases.set_text(text);
            }
            let mut section = EhFrame::from(data);
            section.set_address_size(address_size);
            read_section(&section, &bases, &mut check, &mut ctx, out.as_mut())
        } else {
            let mut section = DebugFrame::from(data);
            section.set_address_size(address_size);
            let bases = BaseAddresses::default();
            read_section(&section, &bases, &mut check, &mut ctx, out.as_mut())
        };
        names.push(s.name);
        match read {
            Ok(None) => {}
            Ok(Some(offset)) => warnings.push(format!(
                "{}: the entry at offset {offset:#x} runs past the section's end; what follows is not read",
                s.name
            )),
            Err(TooLarge) => {
                let (count, cap) = out.map_or((0, 0), |o| (o.rows.len(), o.max_rows));
                return Err(TableError::TooLarge {
                    what: "CFI rows",
                    count,
                    cap,
                });
            }
        }
    }
    Ok((check.counts, names, warnings))
}

/// Appends the rows of `section`'s FDEs that pass `check` to `out`, if any; the offset of an
/// entry that ran past the section's end.
fn read_section<R, S>(
    section: &S,
    bases: &BaseAddresses,
    check: &mut FdeCheck<'_>,
    ctx: &mut UnwindContext<R::Offset>,
    mut out: Option<&mut RowsOut<'_>>,
) -> Result<Option<u64>, TooLarge>
where
    R: Reader,
    S: UnwindSection<R> + gimli::Section<R>,
{
    let ra = Register(out.as_ref().map_or(0, |o| o.regs.ra));
    for_each_fde(section, bases, ra, check, |fde, ra| {
        match out.as_deref_mut() {
            Some(out) => {
                let at = out.rows.len();
                match push_rows(fde, ra, section, bases, ctx, out) {
                    Ok(true) => Ok(Taken::Used),
                    Ok(false) | Err(RowError::Gimli) => {
                        out.rows.truncate(at);
                        Ok(Taken::Unreadable)
                    }
                    Err(RowError::TooLarge) => Err(TooLarge),
                }
            }
            None => Ok(Taken::Used),
        }
    })
}

enum RowError {
    TooLarge,
    Gimli,
}

impl From<gimli::Error> for RowError {
    fn from(_: gimli::Error) -> Self {
        RowError::Gimli
    }
}

/// Appends `fde`'s rows and its end to `out`; whether it had any.
fn push_rows<R, S>(
    fde: &FrameDescriptionEntry<R>,
    ra: Register,
    section: &S,
    bases: &BaseAddresses,
    ctx: &mut UnwindContext<R::Offset>,
    out: &mut RowsOut<'_>,
) -> Result<bool, RowError>
where
    R: Reader,
    S: UnwindSection<R>,
{
    let (regs, signal) = (out.regs, fde.cie().is_signal_trampoline());
    let mut rows = fde.rows(section, bases, ctx)?;
    let mut end = None;
    while let Some(row) = rows.next_row()? {
        if out.rows.len() + 2 > out.max_rows {
            return Err(RowError::TooLarge);
        }
        let rules = Rules {
            fp: row.register(Register(regs.fp)),
            ra: row.register(ra),
            sp: row.register(Register(regs.sp)),
        };
        out.rows.push(Row {
            start: row.start_address(),
            row: compact(row.cfa(), &rules, signal, regs),
        });
        end = Some(row.end_address());
    }
    let Some(end) = end else { return Ok(false) };
    out.rows.push(Row {
        start: end,
        row: None,
    });
    Ok(true)
}

/// A row's rules for the registers the walk restores.
struct Rules<T: gimli::ReaderOffset> {
    fp: RegisterRule<T>,
    ra: RegisterRule<T>,
    sp: RegisterRule<T>,
}

/// A row as the walk can follow it, or `None`.
fn compact<T: gimli::ReaderOffset>(
    cfa: &CfaRule<T>,
    rules: &Rules<T>,
    signal: bool,
    regs: CfiRegisters,
) -> Option<CfiRow> {
    let (cfa_base, cfa_offset) = match *cfa {
        CfaRule::RegisterAndOffset { register, offset } => {
            let base = match register.0 {
                r if r == regs.sp => CfaBase::StackPointer,
                r if r == regs.fp => CfaBase::FramePointer,
                _ => return None,
            };
            (base, i32::try_from(offset).ok()?)
        }
        CfaRule::Expression(_) => return None,
    };
    let rule = |r: &RegisterRule<T>| match *r {
        RegisterRule::Undefined | RegisterRule::SameValue => Some(Rule::Unchanged),
        RegisterRule::Offset(o) => Some(Rule::AtCfa(i32::try_from(o).ok()?)),
        RegisterRule::ValOffset(o) => Some(Rule::CfaPlus(i32::try_from(o).ok()?)),
        _ => None,
    };
    let sp_saved = match rules.sp {
        RegisterRule::Undefined | RegisterRule::SameValue => None,
        // Saved at the CFA itself is no frame layout there is: refused with the others.
        RegisterRule::Offset(o) => Some(NonZeroI16::new(i16::try_from(o).ok()?)?),
        _ => return None,
    };
    Some(CfiRow {
        cfa_base,
        cfa_offset,
        fp: rule(&rules.fp)?,
        ra: rule(&rules.ra)?,
        sp_saved,
        signal,
    })
}

#[cfg(test)]
mod tests;
