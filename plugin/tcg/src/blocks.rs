//! The translated blocks the sampler knows: what a sample needs of a block, made once per
//! distinct block.

use std::hash::BuildHasher;

use hashbrown::{HashMap, HashTable};
use kern_profile_unwind::EntryState;
use rustc_hash::FxBuildHasher;

/// What the sampler needs to know of a translated block: its instructions' addresses (a
/// sample lands on the one its budget ran out at) and its frame state at entry.
#[derive(Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub insns: Box<[u64]>,
    pub entry: EntryState,
}

impl BlockInfo {
    /// The address of the block's `index`th instruction (0 past its end).
    pub fn pc(&self, index: usize) -> u64 {
        self.insns.get(index).copied().unwrap_or(0)
    }
}

/// Blocks are retranslated (after a flush, or in another vCPU's TB cache): one [`BlockInfo`]
/// per distinct block, kept for the process's lifetime because QEMU's callbacks hold it, so
/// memory is bounded by the code run.
///
/// A lookup runs at every translation (a Linux guest makes hundreds of thousands), so it
/// hashes the borrowed addresses and allocates only for a new block.
#[derive(Debug, Default)]
pub struct BlockTable {
    blocks: HashTable<&'static BlockInfo>,
    /// With [`BlockTable::track_starts`]: the block starting at each address, or `None` where
    /// several different blocks start there (other address spaces, other lengths).
    starts: Option<HashMap<u64, Option<&'static BlockInfo>, FxBuildHasher>>,
}

fn key_hash(insns: &[u64], entry: EntryState) -> u64 {
    FxBuildHasher.hash_one((insns, entry))
}

impl BlockTable {
    /// The block's description, made on its first translation.
    pub fn intern(&mut self, insns: &[u64], entry: EntryState) -> &'static BlockInfo {
        let hash = key_hash(insns, entry);
        if let Some(info) = self
            .blocks
            .find(hash, |b| b.entry == entry && *b.insns == *insns)
        {
            return info;
        }
        let info: &'static BlockInfo = Box::leak(Box::new(BlockInfo {
            insns: insns.into(),
            entry,
        }));
        self.blocks
            .insert_unique(hash, info, |b| key_hash(&b.insns, b.entry));
        if let (Some(starts), Some(&first)) = (&mut self.starts, insns.first()) {
            starts
                .entry(first)
                .and_modify(|s| *s = None)
                .or_insert(Some(info));
        }
        info
    }

    /// From now on, also index new blocks by their first address ([`BlockTable::starting_at`]):
    /// `trigger=interrupt` learns only where the interrupted block would have started.
    pub fn track_starts(&mut self) {
        self.starts.get_or_insert_with(HashMap::default);
    }

    /// The one block seen that starts at `pc`; `None` for none, or for several different ones.
    pub fn starting_at(&self, pc: u64) -> Option<&'static BlockInfo> {
        self.starts.as_ref()?.get(&pc).copied().flatten()
    }

    /// Distinct blocks seen.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_description_per_distinct_block() {
        let mut t = BlockTable::default();
        let a = t.intern(&[0x10, 0x12], EntryState::Framed);
        let again = t.intern(&[0x10, 0x12], EntryState::Framed);
        assert!(std::ptr::eq(a, again));
        let other = t.intern(&[0x10, 0x12], EntryState::BeforePush);
        assert!(!std::ptr::eq(a, other));
        t.intern(&[0x10], EntryState::Framed);
        assert_eq!(t.len(), 3);
        assert_eq!((a.pc(0), a.pc(1), a.pc(2)), (0x10, 0x12, 0));
    }

    #[test]
    fn blocks_by_their_start_when_one_starts_there() {
        let mut t = BlockTable::default();
        t.intern(&[0x10, 0x12], EntryState::Framed);
        assert_eq!(t.starting_at(0x10), None, "not tracked before track_starts");
        t.track_starts();
        let a = t.intern(&[0x20, 0x22], EntryState::Framed);
        assert!(std::ptr::eq(t.starting_at(0x20).unwrap(), a));
        // The same block again changes nothing; another one starting there makes it ambiguous.
        t.intern(&[0x20, 0x22], EntryState::Framed);
        assert!(t.starting_at(0x20).is_some());
        t.intern(&[0x20], EntryState::Framed);
        assert_eq!(t.starting_at(0x20), None);
        assert_eq!(t.starting_at(0x22), None);
    }
}
