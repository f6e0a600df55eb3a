//! The lookup both tables share: the value of the rightmost of sorted keys at or before an
//! address, by an index of where each block of `1 << shift` bytes of code starts among the
//! keys (Linux's `.orc_lookup`, made at load), then a count over a fixed window of the keys
//! that follow; and a cache of recent lookups. The values are ids of the tables' distinct
//! rules, which are few (a few thousand in a vmlinux) and stay in the CPU's caches.
//!
//! The count has no dependent loads (vector compares of eight keys), where a binary search
//! has one per step and a branch: a table walk does a lookup per frame, each waiting on the
//! stack read before it. The keys are padded with `WINDOW` maxima, so a count never runs
//! past their end; a key beyond the block is beyond the address too and is not counted.
//! Blocks with more keys than `WINDOW` (hostile tables) get a binary search.

use std::sync::atomic::{AtomicU64, Ordering};

/// The most keys a block's lookup counts (more: a binary search), eight at a time.
pub(crate) const WINDOW: usize = 32;
const CHUNK: usize = 8;

/// Blocks of 128 bytes (Linux's are 256; the x86_64 kernel's densest code has about 30
/// entries in 128 bytes), larger where the table spans more than [`MAX_BLOCKS`] of them.
const MIN_SHIFT: u32 = 7;
/// At most 1 Mi blocks (4 MiB; Debian's amd64 kernels span about 290 Ki of 128 bytes).
const MAX_BLOCKS: u64 = 1 << 20;

/// A key type: `u64` addresses (CFI), or [`Packed`] offsets and values (ORC).
pub(crate) trait Key: Copy {
    const MAX: Self;
    fn to_u64(self) -> u64;
    /// Whether the key is at or before `at`, as cheaply as the type allows.
    fn le(self, at: Self) -> bool;
    /// The value stored with the key, when it is.
    fn value(self) -> Option<u32> {
        None
    }
}

/// A `u32` offset and its `u32` value in one word, the offset high: the keys a lookup counts
/// hold the value it finds (one memory access less). Ordered by the offset alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed(u64);

impl Packed {
    pub fn new(off: u32, value: u32) -> Packed {
        Packed((off as u64) << 32 | value as u64)
    }

    /// What a lookup of `off` compares with.
    pub fn probe(off: u32) -> Packed {
        Packed::new(off, u32::MAX)
    }
}

impl Key for Packed {
    const MAX: Self = Packed(u64::MAX);
    fn to_u64(self) -> u64 {
        self.0 >> 32
    }
    /// By the offsets alone: a 32-bit compare.
    #[inline(always)]
    fn le(self, at: Self) -> bool {
        (self.0 >> 32) as u32 <= (at.0 >> 32) as u32
    }
    fn value(self) -> Option<u32> {
        Some(self.0 as u32)
    }
}

impl Key for u64 {
    const MAX: Self = u64::MAX;
    fn to_u64(self) -> u64 {
        self
    }
    #[inline(always)]
    fn le(self, at: Self) -> bool {
        self <= at
    }
}

/// Sorted keys, padded, their values, their block index and a cache of recent lookups.
#[derive(Debug)]
pub(crate) struct BlockIndex<K> {
    /// The keys, then `WINDOW` maxima.
    keys: Vec<K>,
    /// The keys' values, where they are not stored with them.
    values: Vec<u32>,
    /// How many keys there are (without the padding).
    n: usize,
    /// The lowest key: block 0 starts there.
    low: u64,
    shift: u32,
    /// `blocks[b]`: the first key at or after block `b`'s start (one more block at the end).
    blocks: Vec<u32>,
    cache: Cache,
}

impl<K: Clone> Clone for BlockIndex<K> {
    fn clone(&self) -> Self {
        BlockIndex {
            keys: self.keys.clone(),
            values: self.values.clone(),
            n: self.n,
            low: self.low,
            shift: self.shift,
            blocks: self.blocks.clone(),
            cache: Cache::new(),
        }
    }
}

/// Slots in the cache of recent lookups, two a set: 64 KiB.
const CACHE_SLOTS: usize = 1 << 13;

/// The values recent lookups found (a stack's return addresses recur from sample to sample),
/// in sets of two slots chosen by the address looked up, the more recent first: each slot
/// one word, `offset << 32 | value + 1` (0: empty), so that threads sharing the table read
/// a whole slot or none, without a lock (a race may lose an entry, never mix two). A lookup whose offset from the lowest key does not fit 32 bits, or whose
/// value is `u32::MAX`, is not cached.
#[derive(Debug)]
struct Cache(Box<[AtomicU64]>);

impl Cache {
    fn new() -> Cache {
        Cache((0..CACHE_SLOTS).map(|_| AtomicU64::new(0)).collect())
    }

    /// The set of `off`'s lookups.
    #[inline(always)]
    fn set(&self, off: u32) -> [&AtomicU64; 2] {
        let sets = CACHE_SLOTS / 2;
        let h = off.wrapping_mul(0x9e37_79b1) >> (32 - sets.trailing_zeros());
        let i = 2 * (h as usize & (sets - 1));
        [&self.0[i], &self.0[i + 1]]
    }

    #[inline(always)]
    fn get(&self, off: u32) -> Option<u32> {
        let hit = |v: u64| (v >> 32 == off as u64 && v as u32 != 0).then(|| v as u32 - 1);
        let [a, b] = self.set(off);
        hit(a.load(Ordering::Relaxed)).or_else(|| hit(b.load(Ordering::Relaxed)))
    }

    #[inline]
    fn put(&self, off: u32, value: u32) {
        if let Some(v) = value.checked_add(1) {
            let [a, b] = self.set(off);
            b.store(a.load(Ordering::Relaxed), Ordering::Relaxed);
            a.store((off as u64) << 32 | v as u64, Ordering::Relaxed);
        }
    }
}

impl<K: Key> BlockIndex<K> {
    /// The index of `keys`, sorted, and their `values` (none for keys that hold theirs; at
    /// most `u32::MAX` keys: the tables' limits are far below).
    pub fn new(mut keys: Vec<K>, values: Vec<u32>) -> BlockIndex<K> {
        debug_assert!(keys.is_sorted_by_key(|k| k.to_u64()));
        debug_assert_eq!(
            values.len(),
            keys.first().map_or(0, |k| match k.value() {
                Some(_) => 0,
                None => keys.len(),
            })
        );
        let n = keys.len();
        let (low, high) = match (keys.first(), keys.last()) {
            (Some(l), Some(h)) => (l.to_u64(), h.to_u64()),
            _ => (0, 0),
        };
        let span = high - low;
        let mut shift = MIN_SHIFT;
        while span >> shift >= MAX_BLOCKS {
            shift += 1;
        }
        let n_blocks = (span >> shift) as usize + 2;
        let mut blocks = Vec::with_capacity(n_blocks);
        let mut i = 0usize;
        for b in 0..n_blocks as u64 {
            while i < n && (keys[i].to_u64() - low) >> shift < b {
                i += 1;
            }
            blocks.push(i as u32);
        }
        keys.extend(std::iter::repeat_n(K::MAX, WINDOW));
        keys.shrink_to_fit();
        BlockIndex {
            keys,
            values,
            n,
            low,
            shift,
            blocks,
            cache: Cache::new(),
        }
    }

    /// The keys, padding excluded.
    pub fn keys(&self) -> &[K] {
        &self.keys[..self.n]
    }

    /// The value of the rightmost key at or before `at`, if any.
    #[inline(always)]
    pub fn get(&self, at: K) -> Option<u32> {
        let off = at.to_u64().checked_sub(self.low)?;
        let Ok(key) = u32::try_from(off) else {
            return self.value_at(self.search(at, off)?);
        };
        // Loaded beside the cache's slot, so that a lookup the cache misses waits on one
        // memory access less.
        std::hint::black_box(self.blocks.get((off >> self.shift) as usize));
        if let Some(v) = self.cache.get(key) {
            return Some(v);
        }
        let v = self.value_at(self.search(at, off)?)?;
        self.cache.put(key, v);
        Some(v)
    }

    #[inline(always)]
    fn value_at(&self, pos: usize) -> Option<u32> {
        match self.keys.get(pos)?.value() {
            Some(v) => Some(v),
            None => self.values.get(pos).copied(),
        }
    }

    /// The lookup by the block index, `off` being `at`'s offset from the lowest key (out of
    /// line: the cache answers most lookups).
    #[inline(never)]
    fn search(&self, at: K, off: u64) -> Option<usize> {
        let b = (off >> self.shift) as usize;
        let (lo, hi) = match (self.blocks.get(b), self.blocks.get(b + 1)) {
            (Some(&lo), Some(&hi)) => (lo as usize, hi as usize),
            // Beyond the last key's block: the last key.
            _ => return self.n.checked_sub(1),
        };
        let k = match hi.checked_sub(lo)? {
            // Eight keys at a time (a vector compare each), as many as the block holds.
            len if len <= WINDOW => {
                let mut k = 0;
                for i in (lo..hi).step_by(CHUNK) {
                    let chunk: &[K; CHUNK] = self.keys.get(i..i + CHUNK)?.try_into().ok()?;
                    k += chunk.iter().map(|&k| k.le(at) as usize).sum::<usize>();
                }
                k
            }
            _ => self.keys.get(lo..hi)?.partition_point(|&k| k.le(at)),
        };
        // A padding key counted means every real key from `lo` on was.
        (lo + k).min(self.n).checked_sub(1)
    }

    /// The same by a binary search over every key, without the index or the cache (what
    /// tests check them against).
    pub fn get_by_search(&self, at: K) -> Option<u32> {
        self.value_at(self.keys().partition_point(|&k| k.le(at)).checked_sub(1)?)
    }

    /// Bytes of memory the index holds (keys included).
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<K>()
            + self.values.capacity() * 4
            + self.blocks.capacity() * 4
            + CACHE_SLOTS * 8
    }
}

/// The distinct items of `items` and, for each item, its id among them.
pub(crate) fn distinct<T: Copy + Eq + std::hash::Hash>(
    items: impl Iterator<Item = T>,
) -> (Vec<T>, Vec<u32>) {
    let mut ids = std::collections::HashMap::new();
    let mut unique = Vec::new();
    let of = items
        .map(|t| {
            *ids.entry(t).or_insert_with(|| {
                unique.push(t);
                (unique.len() - 1) as u32
            })
        })
        .collect();
    unique.shrink_to_fit();
    (unique, of)
}

#[cfg(test)]
mod tests;
