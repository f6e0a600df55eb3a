//! How many stacks are whole and how many were cut, by reason: the first thing to know of a
//! recording's stacks, for the report's first lines and the plugin's exit line.

use std::fmt;

use crate::stop_reason::StopCounts;
use crate::walk_end::{Outcome, WalkEnd};

/// `stacks: 98.1% whole (thread root 60.2%, from user space 37.9%); cut 1.9%: ORC: stack
/// pointer not increasing 1.2%, depth limit 0.7%` over a tally of walk ends.
pub struct StackSummary<'a>(pub &'a StopCounts);

impl StackSummary<'_> {
    /// Stacks that reached a thread's root, crossed in from user space, and were cut, with
    /// the cut ones by name (largest first; names that several bytes share added up).
    pub fn split(&self) -> (u64, u64, Vec<(String, u64)>) {
        let (mut root, mut from_user) = (0u64, 0u64);
        let mut cut: Vec<(String, u64)> = Vec::new();
        for (b, n) in self.0.nonzero() {
            let end = WalkEnd::of_byte(b);
            match end.outcome() {
                Outcome::Root => root = root.saturating_add(n),
                Outcome::FromUser => from_user = from_user.saturating_add(n),
                Outcome::Cut => {
                    let name = end.name().into_owned();
                    match cut.iter_mut().find(|(c, _)| *c == name) {
                        Some((_, m)) => *m = m.saturating_add(n),
                        None => cut.push((name, n)),
                    }
                }
            }
        }
        cut.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        (root, from_user, cut)
    }
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    }
}

impl fmt::Display for StackSummary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.0.total();
        let (root, from_user, cut) = self.split();
        let cut_n = cut.iter().fold(0u64, |t, (_, n)| t.saturating_add(*n));
        let whole = pct(root.saturating_add(from_user), total);
        // An older recorder's ends name no walker, and its crossings are not known.
        let recorded = self
            .0
            .nonzero()
            .any(|(b, _)| WalkEnd::of_byte(b).walker().is_some());
        // No crossing at all (user samples, a kernel without programs): no such part.
        match (recorded, from_user) {
            (true, 0) => write!(
                f,
                "{whole:.1}% whole (thread root {:.1}%)",
                pct(root, total)
            )?,
            (true, _) => write!(
                f,
                "{whole:.1}% whole (thread root {:.1}%, entered from user space {:.1}%)",
                pct(root, total),
                pct(from_user, total),
            )?,
            (false, _) => write!(f, "{whole:.1}% whole (a thread's root)")?,
        }
        write!(f, "; cut {:.1}%", pct(cut_n, total))?;
        for (i, (name, n)) in cut.iter().enumerate() {
            let sep = if i == 0 { ": " } else { ", " };
            write!(f, "{sep}{name} {:.1}%", pct(*n, total))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StopReason, Walker};

    #[test]
    fn whole_and_cut_by_name() {
        let mut c = StopCounts::default();
        let orc = |r| WalkEnd::new(r, Walker::Orc, false);
        for _ in 0..6 {
            c.add_end(orc(StopReason::NullFramePointer));
        }
        for _ in 0..3 {
            c.add_end(WalkEnd::new(
                StopReason::NotIncreasing,
                Walker::FramePointers,
                true,
            ));
        }
        c.add_end(orc(StopReason::NotIncreasing));
        assert_eq!(
            StackSummary(&c).to_string(),
            "90.0% whole (thread root 60.0%, entered from user space 30.0%); cut 10.0%: \
             ORC: stack pointer not increasing 10.0%"
        );
        // No crossing: no "entered from user space" part.
        let mut user = StopCounts::default();
        user.add_end(WalkEnd::new(
            StopReason::NullReturnAddress,
            Walker::FramePointers,
            false,
        ));
        assert_eq!(
            StackSummary(&user).to_string(),
            "100.0% whole (thread root 100.0%); cut 0.0%"
        );
        // An older recorder's bytes: the reason alone.
        let old = StopCounts::from_counts(vec![1, 1, 0, 0, 0, 0]);
        assert_eq!(
            StackSummary(&old).to_string(),
            "50.0% whole (a thread's root); cut 50.0%: misaligned frame pointer 50.0%"
        );
    }
}
