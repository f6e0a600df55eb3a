//! Counting samples by address stack, fast: the one hash-table lookup per sample is most of
//! the reading time, so it is made cache-friendly.
//!
//! - Keys whose words all fit in 32 bits (every i386 stack) are stored at half the size.
//! - Keys are hashed once and appended to one of 16 partitions by hash; a partition's
//!   pending keys are merged into its own table (and key arena) in a batch when they reach
//!   1 MiB. A partition's table holds a 16th of the distinct stacks and a batch holds many
//!   samples of each, so the batch's lookups mostly hit the cache instead of memory (one
//!   lookup per sample in one big table missed the cache two or three times). Memory: the
//!   distinct stacks, plus at most 16 MiB of pending keys.
//! - [`RunCoalescer`] in front counts runs of identical keys per vCPU with one comparison.

use hashbrown::HashTable;
use rustc_hash::FxHashMap;

const PARTITIONS: usize = 16;
/// Pending words per partition before its batch is merged.
const FLUSH_WORDS: usize = 256 * 1024;
/// Pending record header: key length, count (2 words), hash (2 words).
const HEADER: usize = 5;

#[derive(Debug)]
struct Entry {
    hash: u64,
    off: usize,
    len: u32,
    count: u64,
}

#[derive(Debug, Default)]
struct Partition {
    /// Records `[len, count lo, count hi, hash lo, hash hi, key words…]`.
    pending: Vec<u32>,
    table: HashTable<Entry>,
    arena: Vec<u32>,
}

impl Partition {
    fn flush(&mut self) {
        let Partition {
            pending,
            table,
            arena,
        } = self;
        let mut i = 0;
        while i + HEADER <= pending.len() {
            let len = pending[i] as usize;
            let count = pending[i + 1] as u64 | (pending[i + 2] as u64) << 32;
            let hash = pending[i + 3] as u64 | (pending[i + 4] as u64) << 32;
            let key = &pending[i + HEADER..i + HEADER + len];
            let found = table.find_mut(hash, |e| {
                e.hash == hash && e.len as usize == len && &arena[e.off..e.off + len] == key
            });
            match found {
                Some(e) => e.count = e.count.saturating_add(count),
                None => {
                    let off = arena.len();
                    arena.extend_from_slice(key);
                    table.insert_unique(
                        hash,
                        Entry {
                            hash,
                            off,
                            len: len as u32,
                            count,
                        },
                        |e| e.hash,
                    );
                }
            }
            i += HEADER + len;
        }
        pending.clear();
    }
}

/// Hashes a key of 32-bit words (given as u64): four independent multiply lanes (so the
/// multiplications overlap), folded and finished with MurmurHash3's 64-bit mixer.
pub(crate) fn hash_words(key: &[u64]) -> u64 {
    const K: [u64; 4] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0x27d4_eb2f_1656_67c5,
    ];
    let mut lanes = [1u64, 2, 3, 4];
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        for i in 0..4 {
            lanes[i] = (lanes[i] ^ c[i]).wrapping_mul(K[i]).rotate_left(29);
        }
    }
    for (i, &w) in chunks.remainder().iter().enumerate() {
        lanes[i] = (lanes[i] ^ w).wrapping_mul(K[i]).rotate_left(29);
    }
    let mut h = lanes[0]
        ^ lanes[1].rotate_left(16)
        ^ lanes[2].rotate_left(32)
        ^ lanes[3].rotate_left(48)
        ^ (key.len() as u64).wrapping_mul(K[1]);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Counts per distinct key.
#[derive(Debug)]
pub struct StackCounts {
    parts: Vec<Partition>,
    /// Keys with a word above 32 bits (x86_64 stacks).
    wide: FxHashMap<Box<[u64]>, u64>,
    total: u64,
}

impl Default for StackCounts {
    fn default() -> Self {
        StackCounts {
            parts: (0..PARTITIONS).map(|_| Partition::default()).collect(),
            wide: FxHashMap::default(),
            total: 0,
        }
    }
}

impl StackCounts {
    pub fn add(&mut self, key: &[u64], n: u64) {
        self.total = self.total.saturating_add(n);
        if key.len() > u32::MAX as usize || key.iter().any(|&w| w > u32::MAX as u64) {
            if let Some(c) = self.wide.get_mut(key) {
                *c = c.saturating_add(n);
            } else {
                self.wide.insert(key.into(), n);
            }
            return;
        }
        let hash = hash_words(key);
        // Bits 32..36 pick the partition: neither the low bits the table indexes with nor
        // the top ones it tags entries with.
        let part = &mut self.parts[(hash >> 32) as usize % PARTITIONS];
        let p = &mut part.pending;
        p.reserve(HEADER + key.len());
        p.extend_from_slice(&[
            key.len() as u32,
            n as u32,
            (n >> 32) as u32,
            hash as u32,
            (hash >> 32) as u32,
        ]);
        p.extend(key.iter().map(|&w| w as u32));
        if p.len() >= FLUSH_WORDS {
            part.flush();
        }
    }

    /// Merges every pending key into the tables.
    pub fn flush(&mut self) {
        for p in &mut self.parts {
            p.flush();
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Distinct keys (exact after [`StackCounts::flush`]).
    pub fn distinct(&self) -> usize {
        self.parts.iter().map(|p| p.table.len()).sum::<usize>() + self.wide.len()
    }

    /// Every key with its count (keys widened back to 64 bits), in no particular order.
    /// Before a [`StackCounts::flush`], a key may come more than once; its counts add up.
    pub fn for_each(&self, mut f: impl FnMut(&[u64], u64)) {
        let mut buf: Vec<u64> = Vec::new();
        for part in &self.parts {
            for e in &part.table {
                buf.clear();
                buf.extend(
                    part.arena[e.off..e.off + e.len as usize]
                        .iter()
                        .map(|&w| w as u64),
                );
                f(&buf, e.count);
            }
            let p = &part.pending;
            let mut i = 0;
            while i + HEADER <= p.len() {
                let len = p[i] as usize;
                let count = p[i + 1] as u64 | (p[i + 2] as u64) << 32;
                buf.clear();
                buf.extend(p[i + HEADER..i + HEADER + len].iter().map(|&w| w as u64));
                f(&buf, count);
                i += HEADER + len;
            }
        }
        for (k, &v) in &self.wide {
            f(k, v);
        }
    }
}

/// Coalesces runs of identical keys per vCPU before they reach [`StackCounts`]: a vCPU
/// sampled in a loop (or idle in `hlt`) repeats its stack, and comparing with the previous
/// key, still in cache, is cheaper than hashing it.
#[derive(Debug, Default)]
pub struct RunCoalescer {
    /// Per vCPU (the first [`RunCoalescer::MAX_VCPUS`]): the current run's key and length.
    runs: Vec<(Vec<u64>, u64)>,
}

impl RunCoalescer {
    /// vCPUs above this go straight to the counts.
    pub const MAX_VCPUS: usize = 256;

    pub fn add(&mut self, vcpu: u32, key: &[u64], counts: &mut StackCounts) {
        let v = vcpu as usize;
        if v >= Self::MAX_VCPUS {
            counts.add(key, 1);
            return;
        }
        if v >= self.runs.len() {
            self.runs.resize_with(v + 1, Default::default);
        }
        let (run, n) = &mut self.runs[v];
        if *n > 0 && run.as_slice() == key {
            *n += 1;
            return;
        }
        if *n > 0 {
            counts.add(run, *n);
        }
        run.clear();
        run.extend_from_slice(key);
        *n = 1;
    }

    /// Adds the pending runs to `counts`.
    pub fn flush(&mut self, counts: &mut StackCounts) {
        for (run, n) in &mut self.runs {
            if *n > 0 {
                counts.add(run, *n);
                *n = 0;
            }
        }
    }
}

/// [`RunCoalescer`] over interned keys ([`crate::key_memo::KeyMemo`]'s ids, equal for equal
/// keys): runs compare ids, and a run that ends adds to its key's total instead of hashing
/// the key again. [`IdRuns::into_counts`] then adds each key once, in the order it first
/// reached the counts: the order [`RunCoalescer`] would have added it in, so the tables
/// (whose layout depends only on which keys came in which order) and the order
/// [`StackCounts::for_each`] gives them in are the same as counting sample by sample.
#[derive(Debug, Default)]
pub struct IdRuns {
    /// Per vCPU (the first [`RunCoalescer::MAX_VCPUS`]): the current run's id and length.
    runs: Vec<(usize, u64)>,
    /// Samples per id, of the runs that ended.
    totals: Vec<u64>,
    /// Ids in the order their first run ended.
    order: Vec<usize>,
}

impl IdRuns {
    pub fn add(&mut self, vcpu: u32, id: usize) {
        self.add_n(vcpu, id, 1);
    }

    /// Adds `samples` samples of `vcpu` with key `id`.
    pub fn add_n(&mut self, vcpu: u32, id: usize, samples: u64) {
        let v = vcpu as usize;
        if v >= RunCoalescer::MAX_VCPUS {
            self.end_run(id, samples);
            return;
        }
        if v >= self.runs.len() {
            self.runs.resize(v + 1, (0, 0));
        }
        let (run, n) = self.runs[v];
        if n > 0 && run == id {
            self.runs[v].1 += samples;
            return;
        }
        if n > 0 {
            self.end_run(run, n);
        }
        self.runs[v] = (id, samples);
    }

    fn end_run(&mut self, id: usize, n: u64) {
        let i = id;
        if i >= self.totals.len() {
            self.totals.resize(i + 1, 0);
        }
        if self.totals[i] == 0 {
            self.order.push(id);
        }
        self.totals[i] = self.totals[i].saturating_add(n);
    }

    /// Ends the pending runs (in vCPU order, as [`RunCoalescer::flush`]) and counts every
    /// key, `key(id)` giving it, into fresh counts (flushed).
    pub fn into_counts<'k>(mut self, key: impl Fn(usize) -> &'k [u64]) -> StackCounts {
        for v in 0..self.runs.len() {
            let (id, n) = self.runs[v];
            if n > 0 {
                self.end_run(id, n);
            }
        }
        let mut counts = StackCounts::default();
        for &id in &self.order {
            counts.add(key(id), self.totals[id]);
        }
        counts.flush();
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(c: &StackCounts) -> Vec<(Vec<u64>, u64)> {
        let mut m: std::collections::BTreeMap<Vec<u64>, u64> = Default::default();
        c.for_each(|k, n| *m.entry(k.to_vec()).or_insert(0) += n);
        m.into_iter().collect()
    }

    #[test]
    fn counts_intern_keys() {
        let mut c = StackCounts::default();
        c.add(&[0, 1, 2], 1);
        c.add(&[0, 1, 2], 2);
        c.add(&[0, 1], 1);
        c.add(&[0, u64::MAX], 1);
        c.add(&[0, u64::MAX], 1);
        c.add(&[], 1);
        // Before and after merging, the same answer.
        let before = collect(&c);
        c.flush();
        assert_eq!(collect(&c), before);
        assert_eq!(
            before,
            [
                (vec![], 1),
                (vec![0, 1], 1),
                (vec![0, 1, 2], 3),
                (vec![0, u64::MAX], 2)
            ]
        );
        assert_eq!(c.total(), 7);
        assert_eq!(c.distinct(), 4);
    }

    #[test]
    fn many_keys_across_flushes() {
        let mut c = StackCounts::default();
        let mut x = 1u64;
        for i in 0..200_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = (x >> 33) % 5000;
            c.add(&[0, k, k * 7, 0xc010_0000 + (i % 3)], 1);
        }
        c.flush();
        assert_eq!(c.total(), 200_000);
        let mut sum = 0;
        let mut n = 0;
        c.for_each(|k, v| {
            assert_eq!(k.len(), 4);
            sum += v;
            n += 1;
        });
        assert_eq!(sum, 200_000);
        assert_eq!(n, c.distinct());
        assert!(n <= 15_000);
    }

    /// Keys in `StackCounts::for_each`'s order, with their counts.
    fn in_order(c: &StackCounts) -> Vec<(Vec<u64>, u64)> {
        let mut v = Vec::new();
        c.for_each(|k, n| v.push((k.to_vec(), n)));
        v
    }

    #[test]
    fn id_runs_count_as_sample_by_sample() {
        // Many keys (tables grow, colliding entries land by arrival), three vCPUs, long and
        // short runs, a vCPU past the coalesced ones, and wide keys.
        let keys: Vec<Vec<u64>> = (0..3000u64)
            .map(|k| match k % 5 {
                0 => vec![0, 0xc000_0000 + k, k * 3],
                1 => vec![0, 0xffff_8000_0000_0000 + k],
                _ => vec![1, k, k + 1, 0xc010_0000],
            })
            .collect();
        let (mut c, mut r, mut ids) = (
            StackCounts::default(),
            RunCoalescer::default(),
            IdRuns::default(),
        );
        let mut x = 7u64;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let vcpu = [0u32, 1, 2, 300][(x >> 20) as usize % 4];
            let id = if (x >> 40).is_multiple_of(3) {
                5
            } else {
                (x >> 33) % 3000
            } as usize;
            r.add(vcpu, &keys[id], &mut c);
            ids.add(vcpu, id);
        }
        r.flush(&mut c);
        c.flush();
        let by_ids = ids.into_counts(|id| &keys[id]);
        assert_eq!(in_order(&by_ids), in_order(&c));
        assert_eq!(by_ids.total(), c.total());
    }

    #[test]
    fn runs_coalesce_per_vcpu() {
        let mut c = StackCounts::default();
        let mut r = RunCoalescer::default();
        for (cpu, key) in [(0, 1), (1, 2), (0, 1), (0, 1), (1, 3), (0, 2), (300, 2)] {
            r.add(cpu, &[0, key], &mut c);
        }
        r.flush(&mut c);
        let seen: Vec<(u64, u64)> = collect(&c).into_iter().map(|(k, n)| (k[1], n)).collect();
        assert_eq!(seen, [(1, 3), (2, 3), (3, 1)]);
        assert_eq!(c.total(), 7);
    }
}
