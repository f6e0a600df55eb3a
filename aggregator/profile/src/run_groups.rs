//! A version-4 sample run counted by stack: its references with the same stack-table entry
//! (and word at `[SP]`, where they carry one) read as one sample standing for all of them.
//! A run is one vCPU's samples of one batch, so these share everything a report keys or
//! filters on but time (the task changes only between runs); the work per sample is then
//! reading its few bytes, and the rest is done once per distinct stack in the run.
//!
//! References carry the word at `[SP]` where it may be a caller the walk missed; for most
//! stacks the reader's symbols tell it is not ([`WordUse`]), and those group by stack alone.
//!
//! Only for readers that want counts: a per-sample consumer (a time line, a time filter)
//! reads every reference as its own sample.

use std::cell::RefCell;

use kern_profile_format::Reference;
use rustc_hash::FxHashMap;

/// Per stack-table entry, whether the consumer of the samples found that the word at
/// `[SP]` cannot change what it makes of them (told after its first sample with the entry).
#[derive(Debug, Default)]
pub struct WordUse(RefCell<Vec<bool>>);

impl WordUse {
    /// Tells whether entry `stack`'s word matters.
    pub fn set(&self, stack: u32, matters: bool) {
        let mut v = self.0.borrow_mut();
        let i = stack as usize;
        if i >= v.len() {
            if !matters {
                return;
            }
            v.resize(i + 1, true);
        }
        v[i] = !matters;
    }
}

/// Same stack in one run: the first reference (with the time of the last), and how many.
#[derive(Debug, Clone, Copy)]
pub struct Group {
    pub reference: Reference,
    pub samples: u64,
    /// The word it was grouped by (`None`: by its stack alone).
    word: Option<u64>,
}

/// The groups of the run being counted, in the order their stacks first came.
#[derive(Debug, Default)]
pub struct RunGroups {
    /// Per stack-table entry, its group's index + 1 (0: none yet) for references without
    /// a word at `[SP]`.
    slots: Vec<u32>,
    /// (entry, word) → group index, for references with one.
    with_word: FxHashMap<(u32, u64), u32>,
    groups: Vec<Group>,
    /// The group of the last reference.
    last: usize,
}

impl RunGroups {
    /// Counts the references left in `r`'s current run, until one is bad (its error), then
    /// the groups are ready for [`RunGroups::take`].
    pub fn read_run<R: std::io::Read>(
        &mut self,
        r: &mut kern_profile_format::RawReader<R>,
        words: &WordUse,
    ) -> Result<(), kern_profile_format::FormatError> {
        let unused = words.0.borrow();
        while r.run_left() > 0 {
            let x = r.next_reference()?;
            let ignored = unused.get(x.stack as usize).copied().unwrap_or(false);
            self.add(x, ignored);
        }
        Ok(())
    }

    /// Counts a reference of the run; with `ignore_word`, by its stack alone.
    #[inline]
    pub fn add(&mut self, r: Reference, ignore_word: bool) {
        let word = r.sp_word.filter(|_| !ignore_word);
        // A vCPU often stays a while: the last group again needs no lookup.
        if let Some(g) = self.groups.get_mut(self.last) {
            if g.reference.stack == r.stack && g.word == word {
                g.samples += 1;
                g.reference.time_ns = r.time_ns;
                return;
            }
        }
        let index = match word {
            None => {
                let id = r.stack as usize;
                if id >= self.slots.len() {
                    self.slots.resize(id + 1, 0);
                }
                match self.slots[id] {
                    0 => {
                        self.slots[id] = self.groups.len() as u32 + 1;
                        None
                    }
                    i => Some(i as usize - 1),
                }
            }
            Some(w) => {
                let next = self.groups.len() as u32;
                let i = *self.with_word.entry((r.stack, w)).or_insert(next);
                (i != next).then_some(i as usize)
            }
        };
        match index {
            Some(i) => {
                self.last = i;
                let g = &mut self.groups[i];
                g.samples += 1;
                g.reference.time_ns = r.time_ns;
            }
            None => {
                self.last = self.groups.len();
                self.groups.push(Group {
                    reference: r,
                    samples: 1,
                    word,
                })
            }
        }
    }

    /// The groups counted since the last call, for the next run.
    pub fn take(&mut self) -> std::vec::Drain<'_, Group> {
        for g in &self.groups {
            if g.word.is_none() {
                self.slots[g.reference.stack as usize] = 0;
            }
        }
        self.with_word.clear();
        self.last = usize::MAX;
        self.groups.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(stack: u32, time_ns: u64, sp_word: Option<u64>) -> Reference {
        Reference {
            stack,
            vcpu: 1,
            time_ns,
            icount: time_ns * 10,
            sp_word,
        }
    }

    #[test]
    fn groups_by_stack_and_word_in_first_order() {
        let mut g = RunGroups::default();
        for (i, (s, w)) in [
            (3, None),
            (1, Some(7)),
            (3, None),
            (1, Some(8)),
            (1, Some(7)),
        ]
        .into_iter()
        .enumerate()
        {
            g.add(r(s, i as u64, w), false);
        }
        let got: Vec<_> = g
            .take()
            .map(|x| {
                (
                    x.reference.stack,
                    x.reference.sp_word,
                    x.samples,
                    x.reference.time_ns,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(3, None, 2, 2), (1, Some(7), 2, 4), (1, Some(8), 1, 3)]
        );
        // The next run starts afresh.
        g.add(r(3, 9, None), false);
        // A word ignored groups by stack alone, the first word kept.
        g.add(r(1, 10, Some(7)), true);
        g.add(r(1, 11, Some(8)), true);
        let got: Vec<_> = g.take().map(|x| (x.reference.stack, x.samples)).collect();
        assert_eq!(got, vec![(3, 1), (1, 2)]);
    }
}
