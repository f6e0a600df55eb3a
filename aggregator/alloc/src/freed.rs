//! Pointers freed and not allocated again since, to tell a double free from a free of an
//! unknown pointer, in bounded memory.

use rustc_hash::FxHashSet;

/// Each generation holds at most this many pointers; two generations are kept, so a double
/// free is recognised if its pointer is among at least the last `GENERATION` distinct pointers
/// freed (and not allocated again). Older ones count as unknown frees.
pub(crate) const GENERATION: usize = 1 << 20;

#[derive(Debug)]
pub(crate) struct FreedSet {
    current: FxHashSet<u64>,
    older: FxHashSet<u64>,
    generation: usize,
}

impl FreedSet {
    pub fn new(generation: usize) -> Self {
        FreedSet {
            current: FxHashSet::default(),
            older: FxHashSet::default(),
            generation: generation.max(1),
        }
    }

    pub fn insert(&mut self, ptr: u64) {
        if self.current.len() >= self.generation && !self.current.contains(&ptr) {
            self.older = std::mem::take(&mut self.current);
        }
        self.current.insert(ptr);
    }

    pub fn contains(&self, ptr: u64) -> bool {
        self.current.contains(&ptr) || self.older.contains(&ptr)
    }

    /// `ptr` was handed out again.
    pub fn remove(&mut self, ptr: u64) {
        self.current.remove(&ptr);
        self.older.remove(&ptr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_two_generations() {
        let mut f = FreedSet::new(2);
        f.insert(1);
        f.insert(2);
        f.insert(3); // 1 and 2 become the older generation
        assert!(f.contains(1) && f.contains(2) && f.contains(3));
        f.insert(4);
        f.insert(5); // 3 and 4 become older, 1 and 2 are forgotten
        assert!(!f.contains(1) && !f.contains(2));
        assert!(f.contains(3) && f.contains(4) && f.contains(5));
        f.remove(4);
        assert!(!f.contains(4));
    }
}
