//! The state of one allocator while its operations stream by: live blocks by pointer, blocks a
//! realloc may have moved, freed pointers, the live total and its peak. The policy for what a
//! trace cannot tell (where a realloc put its block) is documented in the crate docs; this file
//! implements it.

use kern_profile_format::memtrace::Op;
use rustc_hash::FxHashMap;

use crate::freed::{FreedSet, GENERATION};
use crate::stacks::{StackId, Stacks};
use crate::stats::AllocatorStats;
use crate::timeline::Downsampler;

/// One hooked call, as [`Tracker::apply_hooked`] takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HookedCall<'a> {
    pub op: Op,
    /// An alloc's result; the pointer a realloc or free was given.
    pub ptr: u64,
    /// A realloc's result.
    pub new_ptr: u64,
    pub size: u64,
    pub frames: &'a [u64],
    /// Byte offset of the event in the file.
    pub offset: u64,
    pub unreturned: bool,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    size: u64,
    stack: StackId,
    /// Unique per block, to tell a block from a later one at the same pointer.
    id: u64,
    /// The block's last operation was a realloc: it is kept at its old pointer, but may have
    /// moved.
    realloced: bool,
}

/// A block that a realloc may have moved: reallocated and still unconfirmed at `ptr`, or proven
/// moved (then it is in `moved` under `id`).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    id: u64,
    ptr: u64,
}

/// How deep a free with a non-zero size looks among the candidates for one of that size.
const SIZE_MATCH_DEPTH: usize = 256;

#[derive(Debug)]
pub(crate) struct Tracker {
    pub stacks: Stacks,
    pub stats: AllocatorStats,
    pub timeline: Downsampler,
    /// Blocks at a known pointer.
    live: FxHashMap<u64, Block>,
    /// Blocks a realloc moved, whose pointer is unknown, by id.
    moved: FxHashMap<u64, Block>,
    /// Blocks a realloc may have moved, most recent last. Entries whose block is gone (freed,
    /// reallocated again) are dropped lazily.
    candidates: Vec<Candidate>,
    /// Blocks in `live` with `realloced` set.
    realloced_live: usize,
    freed: FreedSet,
    total: u64,
    next_id: u64,
}

impl Tracker {
    pub fn new(timeline_points: usize) -> Self {
        Self::with_freed_generation(timeline_points, GENERATION)
    }

    pub fn with_freed_generation(timeline_points: usize, generation: usize) -> Self {
        Tracker {
            stacks: Stacks::default(),
            stats: AllocatorStats::default(),
            timeline: Downsampler::new(timeline_points),
            live: FxHashMap::default(),
            moved: FxHashMap::default(),
            candidates: Vec::new(),
            realloced_live: 0,
            freed: FreedSet::new(generation),
            total: 0,
            next_id: 0,
        }
    }

    /// One record of this allocator. `frames` are only looked at for allocations and
    /// reallocations.
    pub fn apply(&mut self, op: Op, ptr: u64, size: u64, frames: &[u64], offset: u64) {
        self.operation(offset, |t| match op {
            Op::Alloc => {
                let stack = t.allocating(op, size, frames);
                t.alloc(ptr, size, stack);
            }
            Op::Realloc => {
                let stack = t.allocating(op, size, frames);
                t.realloc(ptr, size, stack);
            }
            Op::Free => t.free(ptr, size),
        });
    }

    /// Counts an operation and applies it, then adds the timeline's point and the peak
    /// after it.
    fn operation(&mut self, offset: u64, apply: impl FnOnce(&mut Self)) {
        let index = self.stats.operations;
        self.stats.operations += 1;
        apply(self);
        self.timeline.push(index, self.total);
        if self.total > self.stats.peak_live {
            self.stats.peak_live = self.total;
            self.stats.peak_at_op = index;
            self.stats.peak_at_offset = offset;
            self.stacks.snapshot_peak();
        }
    }

    /// A hooked call (allocation events of a raw file): unlike a memtrace record, a
    /// realloc's new pointer is known, so its block is tracked exactly. `unreturned` calls
    /// and null results are counted, and change nothing.
    pub fn apply_hooked(&mut self, call: HookedCall<'_>) {
        let HookedCall {
            op,
            ptr,
            new_ptr,
            size,
            frames,
            offset,
            unreturned,
        } = call;
        if unreturned {
            if op != Op::Free {
                self.stats.unreturned += 1;
            }
            return;
        }
        let result = match op {
            Op::Realloc => new_ptr,
            _ => ptr,
        };
        if op != Op::Free && result == 0 && size != 0 {
            self.stats.failed += 1;
            return;
        }
        match op {
            Op::Realloc => self.operation(offset, |t| {
                let stack = t.allocating(op, size, frames);
                t.realloc_to(ptr, new_ptr, size, stack);
            }),
            // free(NULL) does nothing.
            Op::Free if ptr == 0 => self.operation(offset, |t| t.stats.frees += 1),
            // The rest as a memtrace record.
            _ => self.apply(op, ptr, size, frames, offset),
        }
    }

    /// A realloc whose result is known: the old block goes, the new one is where it went.
    /// realloc(NULL, n) allocates; realloc(p, 0) returning NULL frees.
    fn realloc_to(&mut self, old: u64, new: u64, size: u64, stack: StackId) {
        if old != 0 {
            match self.unlink(old) {
                Some(b) => self.retire(b),
                None => self.stats.unknown_reallocs += 1,
            }
            if new != old {
                self.freed.insert(old);
            }
        }
        if new == 0 {
            return;
        }
        if new != old {
            if let Some(b) = self.unlink(new) {
                self.retire_reused(b);
            }
            self.freed.remove(new);
        }
        self.insert(new, size, stack, false);
    }

    fn alloc(&mut self, ptr: u64, size: u64, stack: StackId) {
        if let Some(old) = self.unlink(ptr) {
            if old.realloced {
                // The realloc that last resized `old` moved it: its old pointer is free again.
                // It stays live, at an unknown pointer, and stays a candidate.
                self.moved.insert(old.id, old);
                self.stats.moves_detected += 1;
            } else {
                // Handed out twice without a free in between: the free is not in the trace.
                self.retire_reused(old);
            }
        }
        self.freed.remove(ptr);
        self.insert(ptr, size, stack, false);
    }

    fn realloc(&mut self, ptr: u64, size: u64, stack: StackId) {
        match self.unlink(ptr) {
            Some(old) => self.retire(old),
            None => {
                // Most likely where an earlier realloc moved a block: take the latest such
                // block as this one.
                self.stats.unknown_reallocs += 1;
                self.retire_moved(None);
                self.freed.remove(ptr);
            }
        }
        let id = self.insert(ptr, size, stack, true);
        self.candidates.push(Candidate { id, ptr });
        self.compact_candidates();
    }

    fn free(&mut self, ptr: u64, size: u64) {
        self.stats.frees += 1;
        match self.unlink(ptr) {
            Some(old) => self.retire(old),
            None => {
                if self.freed.contains(ptr) {
                    self.stats.double_frees += 1;
                } else {
                    self.stats.unknown_frees += 1;
                }
                self.retire_moved((size != 0).then_some(size));
            }
        }
        self.freed.insert(ptr);
    }

    fn insert(&mut self, ptr: u64, size: u64, stack: StackId, realloced: bool) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.live.insert(
            ptr,
            Block {
                size,
                stack,
                id,
                realloced,
            },
        );
        if realloced {
            self.realloced_live += 1;
        }
        self.total = self.total.saturating_add(size);
        self.stacks.add_live(stack, size);
        id
    }

    /// An allocation's or reallocation's stack, the call and its units counted.
    fn allocating(&mut self, op: Op, size: u64, frames: &[u64]) -> StackId {
        if op == Op::Realloc {
            self.stats.reallocations += 1;
        } else {
            self.stats.allocations += 1;
        }
        self.stats.bytes_allocated = self.stats.bytes_allocated.saturating_add(size);
        let stack = self.stacks.intern(frames);
        self.stacks.allocated(stack, size);
        stack
    }

    /// Takes the block at `ptr` out of the live set, no longer a realloc's if it was one.
    fn unlink(&mut self, ptr: u64) -> Option<Block> {
        let b = self.live.remove(&ptr)?;
        if b.realloced {
            self.realloced_live -= 1;
        }
        Some(b)
    }

    fn retire(&mut self, b: Block) {
        self.total = self.total.saturating_sub(b.size);
        self.stacks.sub_live(b.stack, b.size);
    }

    /// A live block's pointer was handed out again: its free is not in the trace.
    fn retire_reused(&mut self, b: Block) {
        self.retire(b);
        self.stats.reused_live += 1;
    }

    /// The candidate's block, if it is still one.
    fn peek(&self, c: Candidate) -> Option<&Block> {
        match self.live.get(&c.ptr) {
            Some(b) if b.id == c.id => Some(b),
            _ => self.moved.get(&c.id),
        }
    }

    /// Removes the candidate's block from the live set and returns it.
    fn take(&mut self, c: Candidate) -> Option<Block> {
        if self.live.get(&c.ptr).is_some_and(|b| b.id == c.id) {
            self.realloced_live -= 1;
            return self.live.remove(&c.ptr);
        }
        self.moved.remove(&c.id)
    }

    /// Retires the block a realloc moved that [`Tracker::claim_candidate`] takes for this
    /// operation's, if any.
    fn retire_moved(&mut self, size: Option<u64>) {
        if let Some(b) = self.claim_candidate(size) {
            self.retire(b);
            self.stats.matched_to_moved += 1;
        }
    }

    /// The most recent block a realloc may have moved (of exactly `size` units, if given),
    /// taken out of the live set.
    fn claim_candidate(&mut self, size: Option<u64>) -> Option<Block> {
        match size {
            None => {
                while let Some(c) = self.candidates.pop() {
                    if let Some(b) = self.take(c) {
                        return Some(b);
                    }
                }
                None
            }
            Some(size) => {
                let lo = self.candidates.len().saturating_sub(SIZE_MATCH_DEPTH);
                let i = (lo..self.candidates.len()).rev().find(|&i| {
                    self.peek(self.candidates[i])
                        .is_some_and(|b| b.size == size)
                })?;
                let c = self.candidates.remove(i);
                self.take(c)
            }
        }
    }

    /// Drops stale candidates once they outnumber the valid ones, keeping memory proportional
    /// to the live blocks.
    fn compact_candidates(&mut self) {
        let valid = self.realloced_live + self.moved.len();
        if self.candidates.len() > 2 * valid + 1024 {
            let mut cands = std::mem::take(&mut self.candidates);
            cands.retain(|&c| self.peek(c).is_some());
            self.candidates = cands;
        }
    }

    /// Fills the end-of-trace statistics.
    pub fn finish_stats(&mut self) {
        let s = &mut self.stats;
        s.live_at_end = self.total;
        s.live_blocks_at_end = (self.live.len() + self.moved.len()) as u64;
        s.live_moved_at_end = self
            .moved
            .values()
            .fold(0u64, |acc, b| acc.saturating_add(b.size));
        s.live_unconfirmed_at_end = self
            .live
            .values()
            .filter(|b| b.realloced)
            .fold(0u64, |acc, b| acc.saturating_add(b.size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &mut Tracker, ops: &[(Op, u64, u64, u64)]) {
        for (i, &(op, ptr, size, frame)) in ops.iter().enumerate() {
            t.apply(op, ptr, size, &[frame], i as u64 * 100);
        }
        t.finish_stats();
    }

    #[test]
    fn stale_candidates_are_compacted() {
        let mut t = Tracker::new(0);
        // Many reallocations each confirmed by a free of the same pointer.
        for i in 0..10_000u64 {
            t.apply(Op::Alloc, i, 8, &[1], 0);
            t.apply(Op::Realloc, i, 16, &[2], 0);
            t.apply(Op::Free, i, 0, &[], 0);
        }
        assert!(t.candidates.len() <= 1024 + 1, "{}", t.candidates.len());
        t.finish_stats();
        assert_eq!(t.stats.live_at_end, 0);
    }

    #[test]
    fn size_match_skips_other_sizes() {
        let mut t = Tracker::new(0);
        run(
            &mut t,
            &[
                (Op::Alloc, 0x10, 4, 1),
                (Op::Realloc, 0x10, 8, 2),
                (Op::Alloc, 0x20, 4, 1),
                (Op::Realloc, 0x20, 16, 3),
                // Frees 8 units at an unknown pointer: the first block, not the latest.
                (Op::Free, 0x99, 8, 0),
            ],
        );
        assert_eq!(t.stats.matched_to_moved, 1);
        assert_eq!(t.stats.live_at_end, 16);
        assert!(t.live.contains_key(&0x20) && !t.live.contains_key(&0x10));
        // No candidate of 5 units: nothing retired.
        t.apply(Op::Free, 0x98, 5, &[], 0);
        t.finish_stats();
        assert_eq!(t.stats.live_at_end, 16);
        assert_eq!(t.stats.unknown_frees, 2);
    }
}
