//! Keys built once per distinct recorded stack. Building a sample's key asks the symbols
//! about each of its addresses (is it code, was the caller skipped), which cost more than
//! the rest of reading together, while a recording repeats a few thousand distinct stacks
//! millions of times. So a sample's fields that go into its key are looked up first, and
//! the key is built only for a stack not seen before; equal keys share one id, which runs
//! of samples compare and counts are kept by ([`crate::counts::IdRuns`]).
//!
//! The word at `[SP]` is looked up apart: it is whatever the stack held (a local variable,
//! most of the time), and goes into the key only where it is a caller the walk missed. A
//! recorded stack is therefore looked up without it, and the word is asked about only where
//! building the key asked about it; the stacks it was taken in are kept by word, the others
//! share one key. Memory then follows the distinct stacks, not the values at `[SP]`.

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rustc_hash::{FxHashMap, FxHasher};

use crate::counts::hash_words;
use crate::input::Sample;
use crate::stacks::{Built, KeyBuilder};
use crate::stuck::chain_hash;
use crate::symbolize::Symbolizer;

/// A recorded stack seen (all but its `[SP]` word): where its words are, its key when the
/// `[SP]` word is not taken (with what building it told the symbolizer), whether building it
/// asked about that word, and what the caller derived from the sample (`T`).
#[derive(Debug)]
struct Recorded<T> {
    hash: u64,
    off: usize,
    len: usize,
    untaken: Option<(usize, Built)>,
    asks_sp_word: bool,
    extra: T,
}

/// A distinct key: where its words are, and its hashes.
#[derive(Debug)]
struct Key {
    hash: u64,
    off: usize,
    len: usize,
    chain: u64,
}

/// What [`KeyMemo::key_of`] found for a sample.
#[derive(Debug)]
pub struct Found<'m, T> {
    /// The key's id: equal ids, equal keys.
    pub id: usize,
    pub key: &'m [u64],
    /// The key's [`chain_hash`].
    pub chain: u64,
    /// What the caller derived from the first sample of this recorded stack.
    pub extra: T,
}

/// Recorded stacks → interned keys.
#[derive(Debug)]
pub struct KeyMemo<T> {
    recorded: Vec<Recorded<T>>,
    recorded_index: HashTable<usize>,
    recorded_words: Vec<u64>,
    /// (recorded stack, `[SP]` word) → key, where the word was taken for the caller.
    taken: FxHashMap<(usize, u64), (usize, Built)>,
    keys: Vec<Key>,
    key_words: Vec<u64>,
    key_ids: HashTable<usize>,
    /// The sample's recorded words, then a key being built.
    words: Vec<u64>,
    key: Vec<u64>,
    /// Format version 4: per stack-table entry, what besides the entry made its last
    /// sample's recorded stack (see [`BesidesEntry`]), and that recorded stack.
    by_stack: Vec<Option<(BesidesEntry, usize)>>,
}

/// What a sample's recorded stack is made of besides its stack-table entry: its vCPU and
/// task where keys carry them, and its address space (whose program can change over the
/// recording). Equal entries and equal these, equal recorded stacks: no hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BesidesEntry {
    vcpu_tag: u64,
    task: Option<u32>,
    page_table: Option<u64>,
}

impl<T> Default for KeyMemo<T> {
    fn default() -> Self {
        KeyMemo {
            recorded: Vec::new(),
            recorded_index: HashTable::new(),
            recorded_words: Vec::new(),
            taken: FxHashMap::default(),
            keys: Vec::new(),
            key_words: Vec::new(),
            key_ids: HashTable::new(),
            words: Vec::with_capacity(256),
            key: Vec::with_capacity(256),
            by_stack: Vec::new(),
        }
    }
}

impl<T: Copy> KeyMemo<T> {
    /// The key `keys` builds for `s` (a sample its filters keep), built only when no sample
    /// with the same recorded stack came before; then `extra` derives what the caller keeps
    /// per recorded stack. A key found tells the symbolizer again what building it did
    /// (counted cuts and return-address checks), so its counts are those of building it.
    pub fn key_of(
        &mut self,
        s: &Sample<'_>,
        keys: &KeyBuilder<'_>,
        sym: &mut Symbolizer,
        extra: impl FnOnce(&Sample<'_>, &mut Symbolizer) -> T,
    ) -> Found<'_, T> {
        let (by_vcpu, by_task) = (keys.by_vcpu(), keys.by_task());
        let tag = s.stack.map(|id| {
            let besides = BesidesEntry {
                vcpu_tag: if by_vcpu { s.vcpu as u64 + 1 } else { 0 },
                task: s.task.filter(|_| by_task).map(|t| t.id),
                page_table: s.page_table,
            };
            (id as usize, besides)
        });
        let known = tag.and_then(|(id, besides)| match self.by_stack.get(id) {
            Some(&Some((b, slot))) if b == besides => Some(slot),
            _ => None,
        });
        let found = match known {
            Some(slot) => Ok(slot),
            None => self.find_recorded(s, by_vcpu, by_task),
        };
        self.key_in(s, found, tag, keys, sym, extra)
    }

    /// The recorded stack of `s`, looked up by its words; when there is none, the hash of
    /// its words (left in `self.words`).
    fn find_recorded(
        &mut self,
        s: &Sample<'_>,
        by_vcpu: bool,
        by_task: bool,
    ) -> Result<usize, u64> {
        self.recorded_words(s, by_vcpu, by_task);
        let words = &self.words;
        let hash = hash_recorded(words);
        let (recorded, arena) = (&self.recorded, &self.recorded_words);
        self.recorded_index
            .find(hash, |&i| {
                let r = &recorded[i];
                r.hash == hash && r.len == words.len() && arena[r.off..r.off + r.len] == words[..]
            })
            .copied()
            .ok_or(hash)
    }

    /// [`KeyMemo::key_of`] once the recorded stack is known (`found`), or not (the hash of
    /// its words, which are in `self.words`).
    fn key_in(
        &mut self,
        s: &Sample<'_>,
        found: Result<usize, u64>,
        tag: Option<(usize, BesidesEntry)>,
        keys: &KeyBuilder<'_>,
        sym: &mut Symbolizer,
        extra: impl FnOnce(&Sample<'_>, &mut Symbolizer) -> T,
    ) -> Found<'_, T> {
        let (slot, cached) = match found {
            Ok(i) => {
                let r = &self.recorded[i];
                let taken = r.asks_sp_word && KeyBuilder::caller_skipped(s, sym);
                let cached = match (taken, s.sp_word) {
                    (true, Some(w)) => self.taken.get(&(i, w)).copied(),
                    _ => r.untaken,
                };
                (i, cached)
            }
            Err(hash) => {
                let i = self.recorded.len();
                let off = self.recorded_words.len();
                self.recorded_words.extend_from_slice(&self.words);
                self.recorded.push(Recorded {
                    hash,
                    off,
                    len: self.words.len(),
                    untaken: None,
                    asks_sp_word: false,
                    extra: extra(s, sym),
                });
                let recorded = &self.recorded;
                self.recorded_index
                    .insert_unique(hash, i, |&i| recorded[i].hash);
                (i, None)
            }
        };
        let id = match cached {
            Some((id, built)) => {
                retell(built, s, sym, s.weight);
                id
            }
            None => {
                let built = keys.build_kept(s, sym, &mut self.key);
                // Building it told the first of the samples it stands for.
                retell(built, s, sym, s.weight.saturating_sub(1));
                let id = self.intern_key();
                let r = &mut self.recorded[slot];
                r.asks_sp_word = built.sp_word_asked;
                match (built.sp_word_taken, s.sp_word) {
                    (true, Some(w)) => {
                        self.taken.insert((slot, w), (id, built));
                    }
                    _ => r.untaken = Some((id, built)),
                }
                id
            }
        };
        if let Some((entry, besides)) = tag {
            if self.by_stack.len() <= entry {
                self.by_stack.resize(entry + 1, None);
            }
            self.by_stack[entry] = Some((besides, slot));
        }
        let k = &self.keys[id];
        Found {
            id,
            key: &self.key_words[k.off..k.off + k.len],
            chain: k.chain,
            extra: self.recorded[slot].extra,
        }
    }

    /// The key of id `id`.
    pub fn key(&self, id: usize) -> &[u64] {
        let k = &self.keys[id];
        &self.key_words[k.off..k.off + k.len]
    }

    /// Every field of `s` a key is built from but the `[SP]` word's value, as words: the
    /// mode, privilege, which optional fields are there and the vCPU when keys carry it; the
    /// page-table base and the return-address register when there, the task when keys carry
    /// it; the addresses.
    fn recorded_words(&mut self, s: &Sample<'_>, by_vcpu: bool, by_task: bool) {
        let w = &mut self.words;
        w.clear();
        let vcpu_tag = if by_vcpu { s.vcpu as u64 + 1 } else { 0 };
        let task = s.task.filter(|_| by_task).map(|t| u64::from(t.id));
        w.push(
            s.user as u64
                | (s.cpu.firmware as u64) << 1
                | (s.cpu.mode as u8 as u64) << 8
                | (s.page_table.is_some() as u64) << 16
                | (s.return_register.is_some() as u64) << 17
                | (s.sp_word.is_some() as u64) << 18
                | (task.is_some() as u64) << 19
                | vcpu_tag << 24,
        );
        w.extend(s.page_table);
        w.extend(s.return_register);
        w.extend(task);
        w.extend_from_slice(s.addrs);
    }

    /// The id of the key just built (`self.key`), a new one when no equal key has one.
    fn intern_key(&mut self) -> usize {
        let key = &self.key;
        let hash = hash_words(key);
        let (keys, arena) = (&self.keys, &self.key_words);
        let found = self.key_ids.find(hash, |&id| {
            let k = &keys[id];
            k.hash == hash && arena[k.off..k.off + k.len] == key[..]
        });
        if let Some(&id) = found {
            return id;
        }
        let id = self.keys.len();
        let off = self.key_words.len();
        self.key_words.extend_from_slice(key);
        self.keys.push(Key {
            hash,
            off,
            len: key.len(),
            chain: chain_hash(key),
        });
        let keys = &self.keys;
        self.key_ids.insert_unique(hash, id, |&id| keys[id].hash);
        id
    }
}

/// Tells the symbolizer again, `times` times, what building a key told it (its counts are
/// per sample).
fn retell(built: Built, s: &Sample<'_>, sym: &mut Symbolizer, times: u64) {
    if built.cut {
        sym.count_no_code_cuts(times);
    }
    if built.register_checked {
        for _ in 0..times {
            KeyBuilder::caller_in_register(s, sym);
        }
    }
}

/// The hash recorded stacks are looked up by: Fx over the words' bytes, fewer instructions
/// than [`hash_words`] (which the counts keep: their tables' order is the outputs').
fn hash_recorded(words: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    words.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::filter::SampleFilter;
    use crate::options::Options;
    use crate::symbolize::{symbol_map, SymbolTable};

    fn symbolizer() -> Symbolizer {
        let text = "1000 T root\n1100 T middle\n1200 T leaf\n1300 T entered\n1500 T end\n";
        let map = SymbolTable::new(symbol_map::parse(text, Path::new("m")).unwrap(), |_| None);
        Symbolizer::new(None, vec![map]).unwrap()
    }

    #[test]
    fn keys_are_those_built_sample_by_sample() {
        let filter = SampleFilter::from_options(&Options::default());
        let keys = KeyBuilder::new(&filter);
        let (mut sym, mut built_sym) = (symbolizer(), symbolizer());
        let mut memo: KeyMemo<()> = KeyMemo::default();
        let mut seen: Vec<(Vec<u64>, usize)> = Vec::new();
        // At an entry (0x1300) the word at [SP] is taken for the caller (a symbol map has no
        // code to check the call with: any word); elsewhere (0x1301) it is ignored. Each
        // stack comes back with other words.
        let stacks: [&[u64]; 3] = [&[0x1300, 0x1100], &[0x1301, 0x1100], &[0x1300, 0x1210]];
        for round in 0..3u64 {
            for addrs in stacks {
                for w in [None, Some(0x1210), Some(0x10 + round), Some(0x1210)] {
                    let mut s = Sample::of_addresses(0, addrs);
                    s.sp_word = w;
                    let mut want = Vec::new();
                    assert!(keys.build(&s, &mut built_sym, &mut want));
                    let found = memo.key_of(&s, &keys, &mut sym, |_, _| ());
                    assert_eq!(found.key, &want[..], "{addrs:x?} {w:x?}");
                    // Equal keys, equal ids; different keys, different ids.
                    for (k, id) in &seen {
                        assert_eq!(*k == want, *id == found.id);
                    }
                    seen.push((want, found.id));
                }
            }
        }
        // One recorded stack per (addresses, word there or not); the words taken at the two
        // entries kept apart (0x1210, 0x10, 0x11, 0x12), the ignored ones not at all.
        assert_eq!(memo.recorded.len(), 6);
        assert_eq!(memo.taken.len(), 8);
        assert_eq!(memo.keys.len(), 1 + 4 + 1 + 4 + 1);
    }
}
