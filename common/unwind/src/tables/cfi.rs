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

use std::num::NonZeroI16;

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, EndianSlice, FrameDescriptionEntry,
    Reader, Register, RegisterRule, RunTimeEndian, UnwindContext, UnwindSection,
};

use super::index::{self, BlockIndex};
use super::TableError;

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
    /// The first entry of each section that did not parse (what came before it is kept).
    pub warnings: Vec<String>,
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
    /// pointer), with at most `max_rows` rows in all.
    pub fn parse(
        sections: &[CfiSection<'_>],
        address_size: u8,
        regs: CfiRegisters,
        max_rows: usize,
    ) -> Result<CfiTable, TableError> {
        let (mut rows, mut names, mut warnings) = (Vec::new(), Vec::new(), Vec::new());
        let mut ctx = UnwindContext::new();
        for s in sections {
            let data = EndianSlice::new(s.data, RunTimeEndian::Little);
            let read = if s.name == ".eh_frame" {
                let mut bases = BaseAddresses::default().set_eh_frame(s.address);
                if let Some(text) = s.text {
                    bases = bases.set_text(text);
                }
                let mut section = EhFrame::from(data);
                section.set_address_size(address_size);
                read_section(&section, &bases, regs, &mut ctx, max_rows, &mut rows)
            } else {
                let mut section = DebugFrame::from(data);
                section.set_address_size(address_size);
                let bases = BaseAddresses::default();
                read_section(&section, &bases, regs, &mut ctx, max_rows, &mut rows)
            };
            names.push(s.name);
            match read {
                Ok(()) => {}
                Err(ReadError::TooLarge) => {
                    return Err(TableError::TooLarge {
                        what: "CFI rows",
                        count: rows.len(),
                        cap: max_rows,
                    })
                }
                Err(ReadError::Gimli(e)) => warnings.push(format!("{}: {e}", s.name)),
            }
        }
        let mut table = CfiTable::sorted(rows);
        (table.sections, table.warnings) = (names, warnings);
        Ok(table)
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

enum ReadError {
    TooLarge,
    Gimli(gimli::Error),
}

impl From<gimli::Error> for ReadError {
    fn from(e: gimli::Error) -> Self {
        ReadError::Gimli(e)
    }
}

/// Appends the rows of `section`'s FDEs to `out`, up to the first entry that does not parse.
fn read_section<R, S>(
    section: &S,
    bases: &BaseAddresses,
    regs: CfiRegisters,
    ctx: &mut UnwindContext<R::Offset>,
    max_rows: usize,
    out: &mut Vec<Row>,
) -> Result<(), ReadError>
where
    R: Reader,
    S: UnwindSection<R>,
{
    for_each_fde(section, bases, Register(regs.ra), |fde, ra| {
        let signal = fde.cie().is_signal_trampoline();
        let mut rows = fde.rows(section, bases, ctx)?;
        let mut end = None;
        while let Some(row) = rows.next_row()? {
            if out.len() + 2 > max_rows {
                return Err(ReadError::TooLarge);
            }
            let rules = Rules {
                fp: row.register(Register(regs.fp)),
                ra: row.register(ra),
                sp: row.register(Register(regs.sp)),
            };
            out.push(Row {
                start: row.start_address(),
                row: compact(row.cfa(), &rules, signal, regs),
            });
            end = Some(row.end_address());
        }
        if let Some(end) = end {
            out.push(Row {
                start: end,
                row: None,
            });
        }
        Ok(())
    })
}

/// Calls `f` with each FDE of `section` and the column its CIE gives the return address in
/// (`ra` where the CIE says 0: compilers use the architecture's), up to the first entry that
/// does not parse or the first error of `f`.
pub fn for_each_fde<R, S, E>(
    section: &S,
    bases: &BaseAddresses,
    ra: Register,
    mut f: impl FnMut(&FrameDescriptionEntry<R>, Register) -> Result<(), E>,
) -> Result<(), E>
where
    R: Reader,
    S: UnwindSection<R>,
    E: From<gimli::Error>,
{
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let CieOrFde::Fde(partial) = entry else {
            continue;
        };
        let fde = partial.parse(S::cie_from_offset)?;
        let column = match fde.cie().return_address_register() {
            Register(0) => ra,
            r => r,
        };
        f(&fde, column)?;
    }
    Ok(())
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
