//! What the entry checks made of a kernel's tables: entries used, and refused by reason. A
//! table is used without its bad entries; these counts are how the user learns of them (the
//! plugin's start and exit lines, the report's warnings).

use std::fmt;

/// Why an entry (an ORC entry, a CFI FDE) was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Its addresses are not in the ELF's executable sections.
    OutsideText,
    /// It covers addresses an entry kept before it covers.
    Overlapping,
    /// Its range is empty or runs past the end of the address space.
    Range,
    /// Its CIE's pointer size is not the ELF's.
    PointerSize,
    /// Its length runs past its section, or leaves no room for its fields.
    Length,
    /// It does not parse otherwise (a CIE pointer to no CIE, an unknown CIE version or
    /// augmentation, instructions that do not decode).
    Unreadable,
}

impl Refusal {
    pub const ALL: [Refusal; 6] = [
        Refusal::OutsideText,
        Refusal::Overlapping,
        Refusal::Range,
        Refusal::PointerSize,
        Refusal::Length,
        Refusal::Unreadable,
    ];

    /// The words a count follows in messages.
    pub fn words(self) -> &'static str {
        match self {
            Refusal::OutsideText => "outside the kernel's text",
            Refusal::Overlapping => "overlapping",
            Refusal::Range => "empty or wrapping range",
            Refusal::PointerSize => "pointer size unlike the ELF's",
            Refusal::Length => "bad length",
            Refusal::Unreadable => "unreadable",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One table's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryCounts {
    /// Entries kept.
    pub used: u64,
    refused: [u64; Refusal::ALL.len()],
    /// CFI: FDEs written with an 8-byte CIE pointer in the 32-bit format (FreePascal's
    /// `.debug_frame`), read as such (`cfi/freepascal.rs`); among those used or refused.
    pub wide_cie_pointers: u64,
}

impl EntryCounts {
    pub fn refuse(&mut self, why: Refusal) {
        self.refused[why.index()] += 1;
    }

    /// How many were refused for `why`.
    pub fn refused_for(&self, why: Refusal) -> u64 {
        self.refused[why.index()]
    }

    /// How many were refused in all.
    pub fn refused(&self) -> u64 {
        self.refused.iter().sum()
    }

    /// `outside the kernel's text 12, overlapping 5`: the reasons with a count.
    pub fn reasons(&self) -> String {
        Refusal::ALL
            .iter()
            .filter(|&&r| self.refused_for(r) > 0)
            .map(|&r| format!("{} {}", r.words(), self.refused_for(r)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Adds `other`'s counts (a table read from several sections).
    pub fn add(&mut self, other: &EntryCounts) {
        self.used += other.used;
        self.wide_cie_pointers += other.wide_cie_pointers;
        for (a, b) in self.refused.iter_mut().zip(other.refused) {
            *a += b;
        }
    }
}

/// `1234 entries used, 17 refused (outside the kernel's text 12, overlapping 5)`.
impl fmt::Display for EntryCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} entries used", self.used)?;
        if self.refused() > 0 {
            write!(f, ", {} refused ({})", self.refused(), self.reasons())?;
        }
        if self.wide_cie_pointers > 0 {
            write!(
                f,
                ", {} with FreePascal's 8-byte CIE pointers",
                self.wide_cie_pointers
            )?;
        }
        Ok(())
    }
}

/// The counts of a kernel's tables: `None` for a table it does not have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableStats {
    pub orc: Option<EntryCounts>,
    pub cfi: Option<EntryCounts>,
}

impl TableStats {
    fn tables(&self) -> impl Iterator<Item = (&'static str, &EntryCounts)> {
        [("ORC", &self.orc), ("CFI", &self.cfi)]
            .into_iter()
            .filter_map(|(name, c)| Some((name, c.as_ref()?)))
    }

    /// Entries refused in all tables.
    pub fn refused(&self) -> u64 {
        self.tables().map(|(_, c)| c.refused()).sum()
    }

    /// `17 of 1251 CFI entries refused (outside the kernel's text 12, overlapping 5)`, one
    /// part a table with refusals, or `None` when nothing was refused: what the plugin's
    /// start and exit lines add.
    pub fn refusals(&self) -> Option<String> {
        let parts: Vec<String> = self
            .tables()
            .filter(|(_, c)| c.refused() > 0)
            .map(|(name, c)| {
                format!(
                    "{} of {} {name} entries refused ({})",
                    c.refused(),
                    c.used + c.refused(),
                    c.reasons()
                )
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// `CFI 1234 entries used, 17 refused (…)`, the tables joined by `; ` (without the
    /// colons of the [`Display`](fmt::Display) form, for a line that has one already).
    pub fn counts(&self) -> String {
        self.tables()
            .map(|(name, c)| format!("{name} {c}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `ORC: 440000 entries used; CFI: 1234 entries used, 17 refused (…)`, or `no ORC or CFI`.
impl fmt::Display for TableStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .tables()
            .map(|(name, c)| format!("{name}: {c}"))
            .collect();
        if parts.is_empty() {
            return f.write_str("no ORC or CFI");
        }
        f.write_str(&parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_was_refused() {
        let mut cfi = EntryCounts {
            used: 1234,
            ..Default::default()
        };
        for _ in 0..12 {
            cfi.refuse(Refusal::OutsideText);
        }
        for _ in 0..5 {
            cfi.refuse(Refusal::Overlapping);
        }
        let s = TableStats {
            orc: None,
            cfi: Some(cfi),
        };
        assert_eq!(
            s.to_string(),
            "CFI: 1234 entries used, 17 refused (outside the kernel's text 12, overlapping 5)"
        );
        assert_eq!(
            s.refusals().unwrap(),
            "17 of 1251 CFI entries refused (outside the kernel's text 12, overlapping 5)"
        );
        assert_eq!(
            s.counts(),
            "CFI 1234 entries used, 17 refused (outside the kernel's text 12, overlapping 5)"
        );
        let clean = TableStats {
            orc: Some(EntryCounts {
                used: 7,
                ..Default::default()
            }),
            cfi: None,
        };
        assert_eq!(clean.to_string(), "ORC: 7 entries used");
        assert_eq!(clean.refusals(), None);
        assert_eq!(TableStats::default().to_string(), "no ORC or CFI");
    }
}
