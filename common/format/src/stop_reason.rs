//! Why a frame-pointer walk stopped, and how often it stopped for each reason.

use std::borrow::Cow;
use std::fmt;

/// Why a frame-pointer walk stopped. Stored as one byte in each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum StopReason {
    /// The frame pointer was null: the normal end of a chain.
    NullFramePointer = 0,
    /// The frame pointer was not aligned to the pointer width.
    Misaligned = 1,
    /// The next frame pointer was not above the current one (a loop, or garbage).
    NotIncreasing = 2,
    /// Guest memory at the frame pointer could not be read.
    Unreadable = 3,
    /// The configured maximum depth was reached.
    DepthLimit = 4,
    /// A frame held a null return address, or the fake one (all ones) a classic exec puts
    /// at the top of a new program's stack: the program's first frame.
    NullReturnAddress = 5,
    /// The sample read as much guest memory as one sample may (the recorder's bound on
    /// its cost, whatever the guest's stacks look like).
    ReadBudget = 6,
    /// The next frame pointer lay beyond the stack's span (recorder: 128 KiB above where the
    /// stack's walk began): not read, since it may point at device memory.
    OffStack = 7,
    /// The walk reached a kernel entry stub that left no unwind information, and found no
    /// frame there the CPU could have pushed: the interrupted context is not known.
    EntryNotCrossed = 8,
}

impl StopReason {
    /// All reasons, indexed by their byte value.
    pub const ALL: [StopReason; 9] = [
        StopReason::NullFramePointer,
        StopReason::Misaligned,
        StopReason::NotIncreasing,
        StopReason::Unreadable,
        StopReason::DepthLimit,
        StopReason::NullReturnAddress,
        StopReason::ReadBudget,
        StopReason::OffStack,
        StopReason::EntryNotCrossed,
    ];

    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::NullFramePointer => "null frame pointer",
            StopReason::Misaligned => "misaligned frame pointer",
            StopReason::NotIncreasing => "frame pointer not increasing",
            StopReason::Unreadable => "unreadable memory",
            StopReason::DepthLimit => "depth limit",
            StopReason::NullReturnAddress => "null return address",
            StopReason::ReadBudget => "read budget spent",
            StopReason::OffStack => "frame pointer off the stack",
            StopReason::EntryNotCrossed => "entry not crossed: no CPU frame found",
        }
    }

    /// The name of a stop byte as stored in a file, with its walker and crossing
    /// ([`crate::WalkEnd`]): `reason N` for a reason this version does not know (a newer
    /// recorder's).
    pub fn name_of_byte(b: u8) -> Cow<'static, str> {
        crate::WalkEnd::of_byte(b).name()
    }
}

/// Unwind stops counted per reason, indexed by the reason's byte. Bytes this version does not
/// name are counted too, so counts read from a newer recorder's file survive.
///
/// It dereferences to the counts as a slice; two tallies are equal when they count the same
/// stops, whatever the number of trailing zero counters.
#[derive(Debug, Clone)]
pub struct StopCounts(Vec<u64>);

/// A counter for every reason this version knows, all zero.
impl Default for StopCounts {
    fn default() -> Self {
        StopCounts(vec![0; StopReason::ALL.len()])
    }
}

impl StopCounts {
    /// Counts as stored (a statistics record's), indexed by reason byte.
    pub fn from_counts(counts: Vec<u64>) -> Self {
        StopCounts(counts)
    }

    pub fn add(&mut self, r: StopReason) {
        self.add_byte(r as u8);
    }

    /// Counts one walk's end.
    pub fn add_end(&mut self, e: crate::WalkEnd) {
        self.add_byte(e.byte());
    }

    /// Counts one stop given by its stored byte.
    #[inline]
    pub fn add_byte(&mut self, b: u8) {
        self.add_n(b, 1);
    }

    /// Counts `n` stops given by their stored byte.
    #[inline]
    pub fn add_n(&mut self, b: u8, n: u64) {
        let i = b as usize;
        if i >= self.0.len() {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = self.0[i].saturating_add(n);
    }

    pub fn merge(&mut self, other: &StopCounts) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = a.saturating_add(*b);
        }
    }

    /// Stops for reason `r`, whatever walker met it and wherever ([`crate::WalkEnd`]).
    pub fn get(&self, r: StopReason) -> u64 {
        self.nonzero()
            .filter(|&(b, _)| crate::WalkEnd::of_byte(b).reason() == Some(r))
            .fold(0u64, |t, (_, n)| t.saturating_add(n))
    }

    /// The counts by reason alone, as an older recorder's file counts them.
    pub fn by_reason(&self) -> StopCounts {
        let mut out = StopCounts::default();
        for (b, n) in self.nonzero() {
            out.add_n(crate::WalkEnd::of_byte(b).reason_byte(), n);
        }
        out
    }

    /// All stops; saturating, as counts come from files.
    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |t, &n| t.saturating_add(n))
    }

    /// `(reason byte, count)` of every reason counted at least once, in byte order.
    pub fn nonzero(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (i as u8, n))
    }

    /// The counters without trailing zeros.
    fn significant(&self) -> &[u64] {
        let end = self.0.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
        &self.0[..end]
    }
}

impl std::ops::Deref for StopCounts {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        &self.0
    }
}

impl PartialEq for StopCounts {
    fn eq(&self, other: &Self) -> bool {
        self.significant() == other.significant()
    }
}

impl Eq for StopCounts {}

impl PartialEq<[u64]> for StopCounts {
    fn eq(&self, other: &[u64]) -> bool {
        *self == StopCounts(other.to_vec())
    }
}

impl PartialEq<Vec<u64>> for StopCounts {
    fn eq(&self, other: &Vec<u64>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[u64; N]> for StopCounts {
    fn eq(&self, other: &[u64; N]) -> bool {
        *self == other[..]
    }
}

/// `null frame pointer 2, depth limit 1`, or `none`.
impl fmt::Display for StopCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut any = false;
        for (b, n) in self.nonzero() {
            let sep = if any { ", " } else { "" };
            write!(f, "{sep}{} {n}", StopReason::name_of_byte(b))?;
            any = true;
        }
        if !any {
            f.write_str("none")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_known_and_unknown_reasons() {
        let mut c = StopCounts::default();
        c.add(StopReason::NullFramePointer);
        c.add(StopReason::NullFramePointer);
        c.add(StopReason::DepthLimit);
        assert_eq!(c, [2, 0, 0, 0, 1]);
        assert_eq!(c, vec![2, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(c.get(StopReason::DepthLimit), 1);
        assert_eq!(c.get(StopReason::NullReturnAddress), 0);
        assert_eq!(c.to_string(), "null frame pointer 2, depth limit 1");
        c.add_byte(9);
        assert_eq!(c.total(), 4);
        assert_eq!(c.len(), 10);
        assert_eq!(
            c.to_string(),
            "null frame pointer 2, depth limit 1, reason 9 1"
        );
        let mut d = StopCounts::from_counts(vec![1]);
        d.merge(&c);
        assert_eq!(d.nonzero().collect::<Vec<_>>(), [(0, 3), (4, 1), (9, 1)]);
        assert_eq!(StopCounts::default().to_string(), "none");
        assert_eq!(StopCounts::default().len(), StopReason::ALL.len());
        assert_eq!(StopCounts::default(), StopCounts::from_counts(vec![]));
    }
}
