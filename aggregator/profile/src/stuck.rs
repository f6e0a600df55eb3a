//! Finds a vCPU that never left one stack: on a real OS guest that is usually a CPU whose
//! bring-up failed and that spun in it for the whole run (Linux's `cpu_init` when
//! "do_boot_cpu failed"), which a user should hear of before reading its profile.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

/// Distinct caller chains tracked per vCPU; a vCPU beyond them clearly moved on.
const MAX_CHAINS: usize = 64;
/// Samples a vCPU needs before it can be called stuck.
const MIN_SAMPLES: u64 = 200;
/// The share of a vCPU's samples one chain must hold.
const STUCK_SHARE: f64 = 0.95;

/// One vCPU's caller chains (a key's return addresses, not its PC: a spin loop has several).
#[derive(Debug, Default)]
struct Chains {
    samples: u64,
    /// Chain hash -> samples and the first key seen with it.
    chains: FxHashMap<u64, (u64, Vec<u64>)>,
    /// More than [`MAX_CHAINS`] chains: not stuck, no longer tracked.
    moved_on: bool,
}

/// Counts each vCPU's caller chains while samples are collected.
#[derive(Debug, Default)]
pub struct StuckDetector {
    vcpus: FxHashMap<u32, Chains>,
    /// The vCPU and chain of the last sample, and the samples like it since that one's were
    /// counted: a vCPU's samples repeat their chain, and counting them then costs no lookup.
    last: Option<(u32, u64)>,
    repeats: u64,
}

/// The hash a key's caller chain (its return addresses, after `[meta, pc]`) is tracked by.
pub fn chain_hash(key: &[u64]) -> u64 {
    let mut h = FxHasher::default();
    key.get(2..).unwrap_or(&[]).hash(&mut h);
    h.finish()
}

/// A vCPU that stayed in one stack: its share of samples there and a key of that stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Stuck {
    pub vcpu: u32,
    pub share: f64,
    pub samples: u64,
    pub key: Vec<u64>,
}

impl StuckDetector {
    /// Adds a kept sample of `vcpu` with stack key `key` (`[meta, pc, return addresses…]`).
    pub fn add(&mut self, vcpu: u32, key: &[u64]) {
        self.add_chain(vcpu, key, chain_hash(key));
    }

    /// [`StuckDetector::add`] with the key's [`chain_hash`] already known (it is per distinct
    /// key, and samples repeat keys).
    pub fn add_chain(&mut self, vcpu: u32, key: &[u64], hash: u64) {
        self.add_chain_n(vcpu, key, hash, 1);
    }

    /// [`StuckDetector::add_chain`] for `samples` samples.
    pub fn add_chain_n(&mut self, vcpu: u32, key: &[u64], hash: u64, samples: u64) {
        if self.last == Some((vcpu, hash)) {
            self.repeats += samples;
            return;
        }
        self.count_repeats();
        self.last = Some((vcpu, hash));
        let c = self.vcpus.entry(vcpu).or_default();
        c.samples += samples;
        if c.moved_on {
            return;
        }
        if let Some((n, _)) = c.chains.get_mut(&hash) {
            *n += samples;
        } else if c.chains.len() < MAX_CHAINS {
            c.chains.insert(hash, (samples, key.to_vec()));
        } else {
            c.moved_on = true;
            c.chains = FxHashMap::default();
        }
    }

    /// Counts the repeats of the last sample where its first was counted.
    fn count_repeats(&mut self) {
        let (Some((vcpu, hash)), n) = (self.last, std::mem::take(&mut self.repeats)) else {
            return;
        };
        let Some(c) = self.vcpus.get_mut(&vcpu) else {
            return;
        };
        c.samples += n;
        if let Some((count, _)) = c.chains.get_mut(&hash) {
            *count += n;
        }
    }

    /// The vCPUs that stayed in one stack, when the recording has others that did not (a
    /// single-vCPU guest spinning on purpose is its own business).
    pub fn stuck(&mut self) -> Vec<Stuck> {
        self.count_repeats();
        self.last = None;
        let mut out: Vec<Stuck> = self
            .vcpus
            .iter()
            .filter(|(_, c)| c.samples >= MIN_SAMPLES && !c.moved_on)
            .filter_map(|(&vcpu, c)| {
                let (n, key) = c.chains.values().max_by_key(|(n, _)| *n)?;
                let share = *n as f64 / c.samples as f64;
                (share >= STUCK_SHARE).then(|| Stuck {
                    vcpu,
                    share,
                    samples: c.samples,
                    key: key.clone(),
                })
            })
            .collect();
        if out.len() == self.vcpus.len() {
            return Vec::new();
        }
        out.sort_by_key(|s| s.vcpu);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vcpu_spinning_in_one_chain_is_stuck_when_others_are_not() {
        let mut d = StuckDetector::default();
        for i in 0..1000u64 {
            // vCPU 0 works: many chains.
            d.add(0, &[0, 0x100 + i % 7, 0x200 + i % 100]);
            // vCPU 1 spins: several PCs, one chain (and a few samples elsewhere).
            let chain = if i % 50 == 0 { 0x999 } else { 0x300 };
            d.add(1, &[0, 0x400 + i % 3, chain, 0x500]);
        }
        let s = d.stuck();
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!((s[0].vcpu, s[0].samples), (1, 1000));
        assert!((s[0].share - 0.98).abs() < 1e-9);
        assert_eq!(&s[0].key[2..], &[0x300, 0x500]);
    }

    #[test]
    fn no_warning_for_one_vcpu_or_few_samples() {
        let mut d = StuckDetector::default();
        for _ in 0..1000 {
            d.add(0, &[0, 0x100, 0x300]);
        }
        assert!(
            d.stuck().is_empty(),
            "every vCPU in one stack: the workload"
        );
        for _ in 0..100 {
            d.add(1, &[0, 0x100, 0x300]);
            d.add(2, &[0, 0x100, 0x300]);
        }
        for i in 0..300 {
            d.add(2, &[0, 0x100, i]);
        }
        assert_eq!(d.stuck().iter().map(|s| s.vcpu).collect::<Vec<_>>(), [0]);
    }
}
