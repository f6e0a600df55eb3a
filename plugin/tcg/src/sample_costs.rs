//! What a `delay=` sample costs in the plugin: the host time from the tick's callback to the
//! record queued (registers, guest memory, the walk, the encoding), which the host timer
//! already measures to charge slow walks. Kept per vCPU in a histogram by the sample's mode,
//! with the frames walked, so that the exit line can say what a kernel sample costs beside a
//! user one, and a run with `elf=` (unwind tables) beside one without (frame pointers).
//! QEMU's own part of a callback (its dispatch, before the plugin runs) is not in it.

/// Sub-buckets per power of two: medians within 9%.
const STEPS: usize = 8;
/// The first bucket's floor, 2^5 ns; 24 powers of two reach 0.5 s.
const FLOOR_BITS: u32 = 5;
const BUCKETS: usize = 24 * STEPS;

/// Sample costs of one mode: a log-linear histogram, the frames walked.
#[derive(Debug, Clone)]
pub struct CostHistogram {
    counts: [u64; BUCKETS],
    samples: u64,
    frames: u64,
}

impl Default for CostHistogram {
    fn default() -> Self {
        CostHistogram {
            counts: [0; BUCKETS],
            samples: 0,
            frames: 0,
        }
    }
}

/// The bucket of `ns`: its power of two, then the next three bits.
fn bucket(ns: u64) -> usize {
    let ns = ns.max(1 << FLOOR_BITS);
    let power = 63 - ns.leading_zeros();
    let step = ((ns >> (power - 3)) & (STEPS as u64 - 1)) as usize;
    (((power - FLOOR_BITS) as usize) * STEPS + step).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in ns.
fn bucket_mid(i: usize) -> f64 {
    let power = (i / STEPS) as i32 + FLOOR_BITS as i32;
    let step = (i % STEPS) as f64;
    2f64.powi(power) * (1.0 + (step + 0.5) / STEPS as f64)
}

impl CostHistogram {
    pub fn add(&mut self, ns: u64, frames: usize) {
        self.counts[bucket(ns)] += 1;
        self.samples += 1;
        self.frames += frames as u64;
    }

    pub fn merge(&mut self, other: &CostHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.samples += other.samples;
        self.frames += other.frames;
    }

    /// The median cost in ns (the middle of its bucket), if any sample was timed.
    pub fn median_ns(&self) -> Option<f64> {
        let half = self.samples.div_ceil(2);
        let mut seen = 0;
        self.counts.iter().enumerate().find_map(|(i, &n)| {
            seen += n;
            (n > 0 && seen >= half).then(|| bucket_mid(i))
        })
    }

    /// Return addresses recorded per sample (boundary markers included).
    pub fn mean_frames(&self) -> f64 {
        self.frames as f64 / self.samples.max(1) as f64
    }
}

/// A vCPU's sample costs, kernel-mode and user-mode samples apart.
#[derive(Debug, Clone, Default)]
pub struct SampleCosts {
    pub kernel: CostHistogram,
    pub user: CostHistogram,
}

impl SampleCosts {
    pub fn add(&mut self, user: bool, ns: u64, frames: usize) {
        match user {
            true => self.user.add(ns, frames),
            false => self.kernel.add(ns, frames),
        }
    }

    pub fn merge(&mut self, other: &SampleCosts) {
        self.kernel.merge(&other.kernel);
        self.user.merge(&other.user);
    }

    /// `a sample took 0.81 µs in the plugin (median; kernel-mode 1.02 µs, 9.1 frames; user-mode
    /// 0.64 µs, 1.0 frames)`, or `None` when nothing was timed.
    pub fn line(&self) -> Option<String> {
        let mut all = self.kernel.clone();
        all.merge(&self.user);
        let median = all.median_ns()?;
        let part = |name: &str, h: &CostHistogram| {
            h.median_ns()
                .map(|m| format!("{name} {:.2} µs, {:.1} frames", m / 1000.0, h.mean_frames()))
        };
        let parts: Vec<String> = [
            part("kernel-mode", &self.kernel),
            part("user-mode", &self.user),
        ]
        .into_iter()
        .flatten()
        .collect();
        Some(format!(
            "a sample took {:.2} µs in the plugin (median; {})",
            median / 1000.0,
            parts.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_rise_with_the_cost_and_hold_every_value() {
        let mut last = 0;
        for ns in [0u64, 31, 32, 33, 100, 1_000, 1_100, 50_000, u64::MAX] {
            let b = bucket(ns);
            assert!(b >= last && b < BUCKETS, "{ns}: {b}");
            last = b;
        }
        // A bucket's middle lies within 9% of what it holds.
        for ns in [40u64, 700, 1_234, 99_999] {
            let mid = bucket_mid(bucket(ns));
            assert!((mid / ns as f64 - 1.0).abs() < 0.09, "{ns}: {mid}");
        }
    }

    #[test]
    fn medians_and_frames_by_mode() {
        let mut c = SampleCosts::default();
        assert_eq!(c.line(), None);
        for _ in 0..3 {
            c.add(false, 2_000, 9);
        }
        c.add(true, 500, 1);
        let mut other = SampleCosts::default();
        other.add(true, 520, 3);
        c.merge(&other);
        let k = c.kernel.median_ns().unwrap();
        assert!((k / 2_000.0 - 1.0).abs() < 0.09, "{k}");
        assert_eq!(c.kernel.mean_frames(), 9.0);
        assert_eq!(c.user.mean_frames(), 2.0);
        let line = c.line().unwrap();
        assert!(line.starts_with("a sample took "), "{line}");
        assert!(line.contains("kernel-mode 1.98 µs, 9.0 frames"), "{line}");
        assert!(line.contains("user-mode 0.5"), "{line}");
    }
}
