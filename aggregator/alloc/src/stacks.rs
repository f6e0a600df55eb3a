//! Interned allocating stacks and what each one holds, including its share of the live total
//! at the allocator's peak, kept up to date in amortised constant time per operation.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use crate::view::View;

pub(crate) type StackId = usize;

#[derive(Debug, Clone, Default)]
struct Acc {
    /// Units live now.
    live: u64,
    /// Units live at the last peak. Stale while `dirty`: then `live` changed since the peak.
    at_peak: u64,
    allocated: u64,
    count: u64,
    dirty: bool,
}

/// The stacks of one allocator. Memory grows with the number of distinct stacks only.
#[derive(Debug, Default)]
pub(crate) struct Stacks {
    ids: FxHashMap<Box<[u64]>, StackId>,
    acc: Vec<Acc>,
    /// Stacks whose `live` changed since the last peak.
    dirty: Vec<StackId>,
}

impl Stacks {
    pub fn intern(&mut self, frames: &[u64]) -> StackId {
        if let Some(&id) = self.ids.get(frames) {
            return id;
        }
        let id = self.acc.len();
        self.ids.insert(frames.into(), id);
        self.acc.push(Acc::default());
        id
    }

    /// An allocation or reallocation of `units` by `id`.
    pub fn allocated(&mut self, id: StackId, units: u64) {
        let a = &mut self.acc[id];
        a.allocated = a.allocated.saturating_add(units);
        a.count = a.count.saturating_add(1);
    }

    pub fn add_live(&mut self, id: StackId, units: u64) {
        let a = &mut self.acc[id];
        a.live = a.live.saturating_add(units);
        self.touch(id);
    }

    pub fn sub_live(&mut self, id: StackId, units: u64) {
        let a = &mut self.acc[id];
        a.live = a.live.saturating_sub(units);
        self.touch(id);
    }

    fn touch(&mut self, id: StackId) {
        let a = &mut self.acc[id];
        if !a.dirty {
            a.dirty = true;
            self.dirty.push(id);
        }
    }

    /// The live total just reached a new peak: remember every stack's share of it. Costs one
    /// step per stack changed since the previous peak, so at most one per operation overall.
    pub fn snapshot_peak(&mut self) {
        for id in self.dirty.drain(..) {
            let a = &mut self.acc[id];
            a.at_peak = a.live;
            a.dirty = false;
        }
    }

    /// The weights of `view`, and the live units, by stack; stacks of weight 0 are left out.
    pub fn into_maps(self, view: View) -> (HashMap<Vec<u64>, u64>, HashMap<Vec<u64>, u64>) {
        let mut weights = HashMap::new();
        let mut live = HashMap::new();
        for (frames, id) in self.ids {
            let a = &self.acc[id];
            let w = match view {
                View::Live => a.live,
                View::Allocated => a.allocated,
                View::Count => a.count,
                // Changed since the last snapshot means changed since the peak.
                View::Peak => a.at_peak,
            };
            if w > 0 {
                weights.insert(frames.to_vec(), w);
            }
            if a.live > 0 {
                live.insert(frames.into_vec(), a.live);
            }
        }
        (weights, live)
    }
}
