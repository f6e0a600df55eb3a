//! The kernel's text: the address ranges of its ELF's executable sections (`SHF_EXECINSTR`:
//! `.text`, and Linux's `.init.text`, `.altinstr_replacement`… alike), which every unwind
//! table entry must lie in. An entry elsewhere describes code the kernel does not have (an
//! FDE of a function the linker discarded, at 0; a table read in the wrong layout).

use object::{Object, ObjectSection, SectionFlags};

/// Sorted, disjoint `[start, end)` ranges, merged where sections touch or overlap; `None`:
/// unknown (no executable section, or no ELF: tables built in tests and fuzzing), where
/// every address passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextRanges(Option<Vec<(u64, u64)>>);

impl TextRanges {
    /// Any address is text.
    pub fn unknown() -> TextRanges {
        TextRanges(None)
    }

    /// The executable sections of `file` (unknown when it has none).
    pub fn of_elf(file: &object::File<'_>) -> TextRanges {
        TextRanges::new(file.sections().filter_map(|s| {
            (is_exec(&s) && s.size() > 0)
                .then(|| (s.address(), s.address().saturating_add(s.size())))
        }))
    }

    /// The ranges given, merged (unknown when there is none).
    pub fn new(ranges: impl IntoIterator<Item = (u64, u64)>) -> TextRanges {
        let mut r: Vec<(u64, u64)> = ranges.into_iter().filter(|(a, b)| a < b).collect();
        if r.is_empty() {
            return TextRanges(None);
        }
        r.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(r.len());
        for (a, b) in r {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        TextRanges(Some(merged))
    }

    /// Whether the text is known.
    pub fn is_known(&self) -> bool {
        self.0.is_some()
    }

    /// The range holding `addr`, `end` included: a table's last entry for a section (Linux's
    /// ORC terminator) sits right at its end.
    fn around(&self, addr: u64) -> Option<(u64, u64)> {
        let r = self.0.as_ref()?;
        let i = r.partition_point(|&(a, _)| a <= addr).checked_sub(1)?;
        let (a, b) = r[i];
        (addr <= b).then_some((a, b))
    }

    /// Whether `addr` is in the text, or right at the end of a range of it.
    pub fn holds_address(&self, addr: u64) -> bool {
        !self.is_known() || self.around(addr).is_some()
    }

    /// Whether all of `[start, end)` is in one range of the text (`start < end`).
    pub fn holds(&self, start: u64, end: u64) -> bool {
        !self.is_known()
            || self
                .around(start)
                .is_some_and(|(_, b)| start < b && end <= b)
    }
}

/// Whether an ELF section holds code (`SHF_EXECINSTR`).
pub(crate) fn is_exec(s: &object::Section<'_, '_>) -> bool {
    matches!(s.flags(), SectionFlags::Elf { sh_flags }
        if sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_hold() {
        let t = TextRanges::new([(0x3000, 0x4000), (0x1000, 0x2000), (0x2000, 0x2800)]);
        assert!(t.holds(0x1000, 0x2800));
        assert!(t.holds(0x3000, 0x4000));
        assert!(!t.holds(0x2700, 0x3100));
        assert!(!t.holds(0x0, 0x10));
        assert!(!t.holds(0x4000, 0x4001));
        assert!(t.holds_address(0x4000));
        assert!(!t.holds_address(0x4001));
        assert!(!t.holds_address(0xfff));
        let none = TextRanges::new([]);
        assert!(!none.is_known() && none.holds(0, 0x27_0000_0000) && none.holds_address(5));
    }
}
