//! A CFI section's FDEs one by one, each checked before it is used: one that does not parse,
//! whose CIE's pointer size is not the ELF's, whose range is empty, wraps, lies outside the
//! kernel's text or overlaps an FDE kept before it is refused alone and counted; the walk
//! over the section goes on with the next entry (gimli's own iterator stops at the first
//! error). Only a length that runs past the section ends it: nothing after it can be found.

use std::collections::BTreeMap;

use gimli::{
    BaseAddresses, Format, FrameDescriptionEntry, Reader, ReaderOffset, Register, Section,
    SectionId, UnwindSection,
};

use crate::tables::stats::{EntryCounts, Refusal};
use crate::tables::text::TextRanges;

/// What the caller of [`for_each_fde`] made of an FDE the checks let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    Used,
    /// Its instructions do not decode (or give no row): refused.
    Unreadable,
}

/// The checks of one table's FDEs, over all its sections, and their counts.
#[derive(Debug)]
pub struct FdeCheck<'t> {
    text: &'t TextRanges,
    /// The ELF's pointer size.
    address_size: u8,
    /// The ranges kept, `start -> end`, disjoint.
    kept: BTreeMap<u64, u64>,
    pub counts: EntryCounts,
}

impl<'t> FdeCheck<'t> {
    pub fn new(text: &'t TextRanges, address_size: u8) -> FdeCheck<'t> {
        FdeCheck {
            text,
            address_size,
            kept: BTreeMap::new(),
            counts: EntryCounts::default(),
        }
    }

    /// The range `[start, start + len)` of an FDE whose CIE has `cie_address_size`-byte
    /// pointers, or why it is refused.
    fn verify(&self, start: u64, len: u64, cie_address_size: u8) -> Result<(u64, u64), Refusal> {
        if cie_address_size != self.address_size {
            return Err(Refusal::PointerSize);
        }
        let end = start
            .checked_add(len)
            .filter(|&e| len > 0 && (self.address_size == 8 || e <= 1 << 32))
            .ok_or(Refusal::Range)?;
        if !self.text.holds(start, end) {
            return Err(Refusal::OutsideText);
        }
        // Kept ranges are disjoint, so their ends grow with their starts: the last one
        // starting before `end` is the only one that can reach past `start`.
        if let Some((_, &e)) = self.kept.range(..end).next_back() {
            if e > start {
                return Err(Refusal::Overlapping);
            }
        }
        Ok((start, end))
    }

    fn keep(&mut self, start: u64, end: u64) {
        self.kept.insert(start, end);
        self.counts.used += 1;
    }
}

/// Why gimli could not parse an FDE.
fn refusal_of(e: &gimli::Error) -> Refusal {
    match e {
        gimli::Error::UnexpectedEof(_) => Refusal::Length,
        gimli::Error::UnsupportedAddressSize(_) => Refusal::PointerSize,
        _ => Refusal::Unreadable,
    }
}

/// Calls `f` with each FDE of `section` that passes `check` and the column its CIE gives the
/// return address in (`ra` where the CIE says 0: compilers use the architecture's); counts
/// the FDEs in `check`. Returns the offset of an entry whose length runs past the section
/// (the rest of it unread), or the first error of `f`.
pub fn for_each_fde<R, S, E>(
    section: &S,
    bases: &BaseAddresses,
    ra: Register,
    check: &mut FdeCheck<'_>,
    mut f: impl FnMut(&FrameDescriptionEntry<R>, Register) -> Result<Taken, E>,
) -> Result<Option<u64>, E>
where
    R: Reader,
    S: UnwindSection<R> + Section<R>,
{
    let eh = S::id() == SectionId::EhFrame;
    let whole = section.reader();
    let mut input = whole.clone();
    while !input.is_empty() {
        let offset = input.offset_from(whole);
        let body = input
            .read_initial_length()
            .and_then(|(length, format)| Ok((length, format, input.split(length)?)));
        let (length, format, mut body) = match body {
            Ok(b) => b,
            Err(_) => {
                check.counts.refuse(Refusal::Length);
                return Ok(Some(offset.into_u64()));
            }
        };
        if length.into_u64() == 0 {
            // `.eh_frame`'s terminator; in `.debug_frame` a bug of old assemblers (NASM),
            // skipped as gimli does.
            if eh {
                break;
            }
            continue;
        }
        // CIEs are read when an FDE names them.
        let id = match (eh, format) {
            (true, _) | (false, Format::Dwarf32) => body.read_u32().map(u64::from),
            (false, Format::Dwarf64) => body.read_u64(),
        };
        let is_cie = match (eh, format, id) {
            (_, _, Err(_)) => {
                check.counts.refuse(Refusal::Length);
                continue;
            }
            (true, _, Ok(id)) => id == 0,
            (false, Format::Dwarf32, Ok(id)) => id == u64::from(u32::MAX),
            (false, Format::Dwarf64, Ok(id)) => id == u64::MAX,
        };
        if is_cie {
            continue;
        }
        let partial = match section.partial_fde_from_offset(bases, S::Offset::from(offset)) {
            Ok(p) => p,
            Err(e) => {
                check.counts.refuse(refusal_of(&e));
                continue;
            }
        };
        // Whatever is wrong with the CIE (none at the pointer), the FDE is unreadable.
        let mut cie = match section.cie_from_offset(bases, partial.cie_offset()) {
            Ok(c) => Some(c),
            Err(gimli::Error::UnsupportedAddressSize(_)) => {
                check.counts.refuse(Refusal::PointerSize);
                continue;
            }
            Err(_) => {
                check.counts.refuse(Refusal::Unreadable);
                continue;
            }
        };
        let fde = match partial.parse(|_, _, _| cie.take().ok_or(gimli::Error::NotCieId)) {
            Ok(fde) => fde,
            Err(e) => {
                check.counts.refuse(refusal_of(&e));
                continue;
            }
        };
        let (start, end) =
            match check.verify(fde.initial_address(), fde.len(), fde.cie().address_size()) {
                Ok(r) => r,
                Err(why) => {
                    check.counts.refuse(why);
                    continue;
                }
            };
        let column = match fde.cie().return_address_register() {
            Register(0) => ra,
            r => r,
        };
        match f(&fde, column)? {
            Taken::Used => check.keep(start, end),
            Taken::Unreadable => check.counts.refuse(Refusal::Unreadable),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
