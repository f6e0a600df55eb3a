//! Collapsed ("folded") stacks: `root;…;leaf COUNT`, the format speedscope, inferno and
//! flamegraph.pl read. Different address stacks that name the same frames merge here.

use std::io::{self, Write};
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::counts::StackCounts;
use crate::filter::NameRules;
use crate::stacks::StackNamer;

/// Named stacks with their counts, sorted by stack (the order inferno wants).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    /// `(frames joined by ';', count)`, sorted, without duplicates.
    pub lines: Vec<(String, u64)>,
    pub total: u64,
}

/// Accumulates named stacks.
#[derive(Debug, Default)]
pub struct FoldedBuilder {
    map: FxHashMap<String, u64>,
    buf: String,
    total: u64,
}

impl FoldedBuilder {
    /// Adds a stack given root first. Empty stacks are dropped.
    pub fn add(&mut self, frames: &[Rc<str>], count: u64) {
        if frames.is_empty() || count == 0 {
            return;
        }
        self.buf.clear();
        for (i, f) in frames.iter().enumerate() {
            if i > 0 {
                self.buf.push(';');
            }
            self.buf.push_str(f);
        }
        self.total = self.total.saturating_add(count);
        if let Some(c) = self.map.get_mut(self.buf.as_str()) {
            *c = c.saturating_add(count);
        } else {
            self.map.insert(self.buf.clone(), count);
        }
    }

    pub fn finish(self) -> Folded {
        let mut lines: Vec<(String, u64)> = self.map.into_iter().collect();
        lines.sort_unstable();
        Folded {
            lines,
            total: self.total,
        }
    }
}

impl Folded {
    /// Names every interned CPU stack, shaped by `rules` (`--focus`, `--exclude`).
    pub fn from_counts(
        counts: &StackCounts,
        namer: &mut StackNamer<'_>,
        rules: &NameRules,
    ) -> Folded {
        let mut b = FoldedBuilder::default();
        let mut frames = Vec::new();
        counts.for_each(|key, n| {
            if namer.name_key_shaped(key, rules, &mut frames).is_some() {
                b.add(&frames, n);
            }
        });
        b.finish()
    }

    /// Several profiles' named stacks as one (e.g. every vCPU's, for `top`'s table of all).
    pub fn merge<'a>(parts: impl IntoIterator<Item = &'a Folded>) -> Folded {
        let mut lines: Vec<(String, u64)> = Vec::new();
        let mut total = 0u64;
        for p in parts {
            lines.extend(p.lines.iter().cloned());
            total = total.saturating_add(p.total);
        }
        lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        lines.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 = kept.1.saturating_add(next.1);
            }
            same
        });
        Folded { lines, total }
    }

    /// Writes `stack count` lines.
    pub fn write(&self, mut out: impl Write) -> io::Result<()> {
        for (stack, n) in &self.lines {
            writeln!(out, "{stack} {n}")?;
        }
        Ok(())
    }

    /// The lines as inferno takes them.
    pub fn line_strings(&self) -> Vec<String> {
        self.lines.iter().map(|(s, n)| format!("{s} {n}")).collect()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write(&mut v).expect("writing to a Vec cannot fail");
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_and_sorts() {
        let mut b = FoldedBuilder::default();
        let f = |s: &str| -> Vec<Rc<str>> { s.split(';').map(Rc::from).collect() };
        b.add(&f("b;c"), 2);
        b.add(&f("a"), 1);
        b.add(&f("b;c"), 3);
        b.add(&[], 7);
        let folded = b.finish();
        assert_eq!(folded.total, 6);
        assert_eq!(
            String::from_utf8(folded.to_bytes()).unwrap(),
            "a 1\nb;c 5\n"
        );
    }

    #[test]
    fn merging_sums_the_same_stacks() {
        let f = |lines: &[(&str, u64)]| {
            let mut b = FoldedBuilder::default();
            for (s, n) in lines {
                b.add(&s.split(';').map(Rc::from).collect::<Vec<_>>(), *n);
            }
            b.finish()
        };
        let a = f(&[("a;b", 2), ("c", 1)]);
        let b = f(&[("a", 4), ("a;b", 3)]);
        assert_eq!(
            Folded::merge([&a, &b]),
            f(&[("a;b", 2), ("c", 1), ("a", 4), ("a;b", 3)])
        );
        assert_eq!(Folded::merge([&a, &b]).total, 10);
        assert_eq!(Folded::merge([]), Folded::default());
    }
}
