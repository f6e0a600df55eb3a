//! Keys built once per distinct recorded stack. Building a sample's key asks the symbols
//! about each of its addresses (is it code, was the caller skipped), which cost more than
//! the rest of reading together, while a recording repeats a few thousand distinct stacks
//! millions of times. So a sample's fields that go into its key are looked up first, and
//! the key is built only for a stack not seen before; equal keys share one id, which runs
//! of samples compare and counts are kept by ([`crate::counts::IdRuns`]).

use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::counts::hash_words;
use crate::input::Sample;
use crate::stacks::{Built, KeyBuilder};
use crate::stuck::chain_hash;
use crate::symbolize::Symbolizer;

/// A recorded stack seen: where its words are, its key's id, what building it told the
/// symbolizer, and what the caller derived from the sample (`T`).
#[derive(Debug)]
struct Recorded<T> {
    hash: u64,
    off: usize,
    len: usize,
    id: usize,
    built: Built,
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
    recorded: HashTable<Recorded<T>>,
    recorded_words: Vec<u64>,
    keys: Vec<Key>,
    key_words: Vec<u64>,
    key_ids: HashTable<usize>,
    /// The sample's recorded words, then a key being built.
    words: Vec<u64>,
    key: Vec<u64>,
}

impl<T> Default for KeyMemo<T> {
    fn default() -> Self {
        KeyMemo {
            recorded: HashTable::new(),
            recorded_words: Vec::new(),
            keys: Vec::new(),
            key_words: Vec::new(),
            key_ids: HashTable::new(),
            words: Vec::with_capacity(256),
            key: Vec::with_capacity(256),
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
        self.recorded_words(s, keys.by_vcpu());
        let words = &self.words;
        let hash = hash_recorded(words);
        let arena = &self.recorded_words;
        let found = self.recorded.find(hash, |r| {
            r.hash == hash && r.len == words.len() && arena[r.off..r.off + r.len] == words[..]
        });
        let (id, extra) = match found {
            Some(r) => {
                let (id, built, extra) = (r.id, r.built, r.extra);
                if built.cut {
                    sym.count_no_code_cut();
                }
                if built.register_checked {
                    KeyBuilder::caller_in_register(s, sym);
                }
                (id, extra)
            }
            None => {
                let built = keys.build_kept(s, sym, &mut self.key);
                let id = self.intern_key();
                let extra = extra(s, sym);
                let off = self.recorded_words.len();
                self.recorded_words.extend_from_slice(&self.words);
                self.recorded.insert_unique(
                    hash,
                    Recorded {
                        hash,
                        off,
                        len: self.words.len(),
                        id,
                        built,
                        extra,
                    },
                    |r| r.hash,
                );
                (id, extra)
            }
        };
        let k = &self.keys[id];
        Found {
            id,
            key: &self.key_words[k.off..k.off + k.len],
            chain: k.chain,
            extra,
        }
    }

    /// The key of id `id`.
    pub fn key(&self, id: usize) -> &[u64] {
        let k = &self.keys[id];
        &self.key_words[k.off..k.off + k.len]
    }

    /// Every field of `s` a key is built from, as words: the mode, privilege, which optional
    /// fields are there and the vCPU when keys carry it; the page-table base, the
    /// return-address register and the word at `[SP]` when there; the addresses.
    fn recorded_words(&mut self, s: &Sample<'_>, by_vcpu: bool) {
        let w = &mut self.words;
        w.clear();
        let vcpu_tag = if by_vcpu { s.vcpu as u64 + 1 } else { 0 };
        w.push(
            s.user as u64
                | (s.cpu.firmware as u64) << 1
                | (s.cpu.mode as u8 as u64) << 8
                | (s.page_table.is_some() as u64) << 16
                | (s.return_register.is_some() as u64) << 17
                | (s.sp_word.is_some() as u64) << 18
                | vcpu_tag << 24,
        );
        w.extend(s.page_table);
        w.extend(s.return_register);
        w.extend(s.sp_word);
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

/// The hash recorded stacks are looked up by: Fx over the words' bytes, fewer instructions
/// than [`hash_words`] (which the counts keep: their tables' order is the outputs').
fn hash_recorded(words: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    words.hash(&mut h);
    h.finish()
}
