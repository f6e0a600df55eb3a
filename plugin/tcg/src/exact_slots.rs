//! Counter slots for exact per-block counts (`exact=on`).
//!
//! Every translated block gets one `u64` counter slot, incremented inline by the block
//! itself. Slots live in scoreboards of [`CHUNK_SLOTS`] counters per vCPU (a scoreboard
//! element may hold many counters); a block translated again with the same instruction
//! addresses reuses its slot, so retranslation costs no memory.

use std::collections::HashMap;

/// Counters per scoreboard chunk.
pub const CHUNK_SLOTS: usize = 8192;

/// Where slot `slot` lives: its chunk and its byte offset in the chunk's element.
pub fn slot_location(slot: u32) -> (usize, usize) {
    let s = slot as usize;
    (s / CHUNK_SLOTS, (s % CHUNK_SLOTS) * 8)
}

/// Translated blocks and their counter slots.
#[derive(Debug, Default)]
pub struct ExactTable {
    by_insns: HashMap<Box<[u64]>, u32>,
    /// Instruction addresses, indexed by slot.
    blocks: Vec<Box<[u64]>>,
}

impl ExactTable {
    pub fn new() -> Self {
        ExactTable::default()
    }

    /// The slot of the block with these instruction addresses, and whether it is new.
    /// `None` once 2^32 slots are taken.
    pub fn slot(&mut self, insns: &[u64]) -> Option<(u32, bool)> {
        if let Some(&s) = self.by_insns.get(insns) {
            return Some((s, false));
        }
        let s = u32::try_from(self.blocks.len()).ok()?;
        let key: Box<[u64]> = insns.into();
        self.blocks.push(key.clone());
        self.by_insns.insert(key, s);
        Some((s, true))
    }

    /// Number of slots taken.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Chunks needed for the slots taken.
    pub fn chunks(&self) -> usize {
        self.blocks.len().div_ceil(CHUNK_SLOTS)
    }

    /// `(slot, instruction addresses)` of every block.
    pub fn blocks(&self) -> impl Iterator<Item = (u32, &[u64])> {
        self.blocks
            .iter()
            .enumerate()
            .map(|(i, b)| (i as u32, &b[..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_dense_and_reused() {
        let mut t = ExactTable::new();
        assert_eq!(t.slot(&[1, 2, 3]), Some((0, true)));
        assert_eq!(t.slot(&[4]), Some((1, true)));
        assert_eq!(t.slot(&[1, 2, 3]), Some((0, false)));
        assert_eq!(t.slot(&[1, 2]), Some((2, true)));
        assert_eq!(t.len(), 3);
        assert_eq!(t.chunks(), 1);
        let b: Vec<_> = t.blocks().collect();
        assert_eq!(
            b,
            vec![(0, &[1u64, 2, 3][..]), (1, &[4][..]), (2, &[1, 2][..])]
        );
    }

    #[test]
    fn locations() {
        assert_eq!(slot_location(0), (0, 0));
        assert_eq!(slot_location(1), (0, 8));
        assert_eq!(
            slot_location(CHUNK_SLOTS as u32 - 1),
            (0, (CHUNK_SLOTS - 1) * 8)
        );
        assert_eq!(slot_location(CHUNK_SLOTS as u32), (1, 0));
        let mut t = ExactTable::new();
        for i in 0..=CHUNK_SLOTS as u64 {
            t.slot(&[i]);
        }
        assert_eq!(t.chunks(), 2);
    }
}
