//! An ELF's call-frame information (`.debug_frame`, `.eh_frame`, read with gimli), reduced to
//! what the leaf and prologue correction asks of each address: unwind's [`CfiFacts`] (is the
//! CFA computed from the frame pointer, are fp and the return address saved).

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, Reader, Register, RegisterRule,
    RunTimeEndian, UnwindContext, UnwindSection,
};
use kern_profile_arch::registers::dwarf_fp_ra;
use kern_profile_format::Arch;
use kern_profile_unwind::frame_state::CfiFacts;
use kern_profile_unwind::tables::cfi::freepascal::standard_layout;
use kern_profile_unwind::tables::cfi::{for_each_fde, FdeCheck, Taken};
use kern_profile_unwind::tables::TextRanges;
use object::{Object, ObjectSection};

use crate::budget::Budget;

/// The rows of every FDE, sorted by address.
#[derive(Debug, Clone, Default)]
pub struct CfiTable {
    fdes: Vec<Fde>,
    /// The sections read, for the report.
    pub sections: Vec<&'static str>,
}

#[derive(Debug, Clone)]
struct Fde {
    start: u64,
    end: u64,
    rows: Vec<Row>,
    fp_cfa_anywhere: bool,
    ra_saved_anywhere: bool,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    start: u64,
    cfa_on_fp: bool,
    fp_saved: bool,
    ra_saved: bool,
}

impl CfiTable {
    /// Reads `file`'s `.debug_frame` and `.eh_frame` for an `arch` guest. `None` when the
    /// file has neither (or `arch` keeps return addresses on the stack). Entries are checked
    /// one by one (kern-profile-unwind's `for_each_fde`): a bad one is left out alone; a
    /// section cut short by an entry running past its end gives what came before, and the
    /// error.
    pub fn load(
        file: &object::File<'_>,
        arch: Arch,
        budget: &mut Budget,
    ) -> (Option<Self>, Option<String>) {
        let Some((fp, ra)) = dwarf_fp_ra(arch) else {
            return (None, None);
        };
        let regs = (Register(fp), Register(ra));
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut table = CfiTable::default();
        let mut error = None;
        // Entries are checked as the kernel's unwind tables check theirs (refused ones are
        // counted there, for the report's warning: kern_profile_unwind::tables::refusals_line).
        let text = TextRanges::of_elf(file);
        let address_size = if file.is_64() { 8 } else { 4 };
        let mut check = FdeCheck::new(&text, address_size);
        for name in [".debug_frame", ".eh_frame"] {
            let Some(section) = file.section_by_name(name) else {
                continue;
            };
            // Decompressed within the file's bound, shared with the DWARF sections.
            let data = match budget.section_bytes(&section) {
                Ok(data) => data,
                Err(e) => {
                    error = Some(format!("{name}: {e}"));
                    continue;
                }
            };
            let data = match name {
                ".debug_frame" => standard_layout(&data, endian, address_size, &text).0,
                _ => data,
            };
            let data = EndianSlice::new(&data, endian);
            let read = if name == ".eh_frame" {
                let mut bases = BaseAddresses::default().set_eh_frame(section.address());
                if let Some(text) = file.section_by_name(".text") {
                    bases = bases.set_text(text.address());
                }
                let mut s = EhFrame::from(data);
                s.set_address_size(address_size);
                read_section(&s, &bases, regs, &mut check, &mut table.fdes)
            } else {
                let mut s = DebugFrame::from(data);
                s.set_address_size(address_size);
                let bases = BaseAddresses::default();
                read_section(&s, &bases, regs, &mut check, &mut table.fdes)
            };
            table.sections.push(name);
            if let Some(at) = read {
                error = Some(format!(
                    "{name}: the entry at offset {at:#x} runs past the section's end"
                ));
            }
        }
        if table.sections.is_empty() {
            return (None, error);
        }
        table.fdes.sort_by_key(|f| f.start);
        (Some(table), error)
    }

    /// What the call-frame information says at `addr`; `None` when no FDE covers it.
    pub fn facts_at(&self, addr: u64) -> Option<CfiFacts> {
        let i = self.fdes.partition_point(|f| f.start <= addr);
        let fde = self.fdes[..i].iter().rev().find(|f| addr < f.end)?;
        let r = fde
            .rows
            .partition_point(|r| r.start <= addr)
            .checked_sub(1)?;
        let row = fde.rows[r];
        Some(CfiFacts {
            cfa_on_fp: row.cfa_on_fp,
            fp_saved: row.fp_saved,
            ra_saved: row.ra_saved,
            fp_cfa_before: fde.rows[..r].iter().any(|r| r.cfa_on_fp),
            fp_cfa_anywhere: fde.fp_cfa_anywhere,
            ra_saved_anywhere: fde.ra_saved_anywhere,
        })
    }
}

/// Appends the FDEs of `section` that pass `check` to `out`; the offset of an entry that ran
/// past the section's end (what follows it unread).
fn read_section<R, S>(
    section: &S,
    bases: &BaseAddresses,
    (fp, ra_default): (Register, Register),
    check: &mut FdeCheck<'_>,
    out: &mut Vec<Fde>,
) -> Option<u64>
where
    R: Reader,
    S: UnwindSection<R> + gimli::Section<R>,
{
    let mut ctx = UnwindContext::new();
    let stopped = for_each_fde(section, bases, ra_default, check, |fde, ra| {
        let mut rows = Vec::new();
        let mut rows_of = || -> gimli::Result<()> {
            let mut table = fde.rows(section, bases, &mut ctx)?;
            while let Some(row) = table.next_row()? {
                rows.push(Row {
                    start: row.start_address(),
                    cfa_on_fp: matches!(row.cfa(), CfaRule::RegisterAndOffset { register, .. } if *register == fp),
                    fp_saved: is_saved(&row.register(fp)),
                    ra_saved: is_saved(&row.register(ra)),
                });
            }
            Ok(())
        };
        if rows_of().is_err() {
            return Ok::<_, std::convert::Infallible>(Taken::Unreadable);
        }
        out.push(Fde {
            start: fde.initial_address(),
            end: fde.initial_address().saturating_add(fde.len()),
            fp_cfa_anywhere: rows.iter().any(|r| r.cfa_on_fp),
            ra_saved_anywhere: rows.iter().any(|r| r.ra_saved),
            rows,
        });
        Ok(Taken::Used)
    });
    match stopped {
        Ok(at) => at,
        Err(never) => match never {},
    }
}

/// Whether a rule keeps the register's value elsewhere than in the register itself (compilers
/// leave a register they have not touched undefined rather than "same value").
fn is_saved<T: gimli::ReaderOffset>(rule: &RegisterRule<T>) -> bool {
    !matches!(rule, RegisterRule::Undefined | RegisterRule::SameValue)
}
