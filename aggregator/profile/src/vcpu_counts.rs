//! Counts by vCPU index, for the pass's per-vCPU tallies.

use rustc_hash::FxHashMap;

/// vCPU indices counted in an array; an index past it (a corrupt recording's, or a huge
/// guest's) costs a map entry, not an array that large.
const LOW_VCPUS: usize = 256;

/// Counts by vCPU index: an array for the usual indices, a map for the rest.
#[derive(Debug, Clone)]
pub struct VcpuCounts {
    low: Vec<u64>,
    high: FxHashMap<u32, u64>,
}

impl Default for VcpuCounts {
    fn default() -> Self {
        VcpuCounts {
            low: vec![0; LOW_VCPUS],
            high: FxHashMap::default(),
        }
    }
}

impl VcpuCounts {
    /// `vcpu`'s count, to read or change.
    pub fn slot(&mut self, vcpu: u32) -> &mut u64 {
        match self.low.get_mut(vcpu as usize) {
            Some(c) => c,
            None => self.high.entry(vcpu).or_insert(0),
        }
    }

    /// Adds `n` to `vcpu`'s count.
    pub fn add(&mut self, vcpu: u32, n: u64) {
        *self.slot(vcpu) += n;
    }

    /// The sum of all counts.
    pub fn total(&self) -> u64 {
        self.low.iter().chain(self.high.values()).sum()
    }

    /// (vCPU, count) by vCPU index: every index past the array that was counted, and those
    /// in it whose count is not 0.
    pub fn into_sorted(self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self.high.into_iter().collect();
        v.extend((0u32..).zip(self.low).filter(|&(_, n)| n > 0));
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_and_high_indices_count_alike() {
        let mut c = VcpuCounts::default();
        c.add(3, 2);
        c.add(u32::MAX, 5);
        c.add(3, 1);
        *c.slot(1000) += 4;
        assert_eq!(c.total(), 12);
        assert_eq!(c.into_sorted(), [(3, 3), (1000, 4), (u32::MAX, 5)]);
    }
}
