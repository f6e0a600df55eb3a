//! The translated blocks the sampler knows: what a sample needs of a block, made once per
//! distinct block.

use std::hash::BuildHasher;

use hashbrown::HashTable;
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
pub struct BlockTable(HashTable<&'static BlockInfo>);

fn key_hash(insns: &[u64], entry: EntryState) -> u64 {
    FxBuildHasher.hash_one((insns, entry))
}

impl BlockTable {
    /// The block's description, made on its first translation.
    pub fn intern(&mut self, insns: &[u64], entry: EntryState) -> &'static BlockInfo {
        let hash = key_hash(insns, entry);
        if let Some(info) = self
            .0
            .find(hash, |b| b.entry == entry && *b.insns == *insns)
        {
            return info;
        }
        let info: &'static BlockInfo = Box::leak(Box::new(BlockInfo {
            insns: insns.into(),
            entry,
        }));
        self.0
            .insert_unique(hash, info, |b| key_hash(&b.insns, b.entry));
        info
    }

    /// Distinct blocks seen.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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
}
