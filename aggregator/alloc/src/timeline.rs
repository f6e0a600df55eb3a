//! Live units over the trace: a bounded downsampler fed one point per operation (the
//! aggregator draws the points).

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// (operation index, live units) of the first lowest and the first highest point.
    min: (u64, u64),
    max: (u64, u64),
}

/// Keeps, for consecutive buckets of operations, the lowest and the highest point. When the
/// buckets are full, neighbours merge and each bucket spans twice as many operations, so memory
/// stays bounded whatever the trace's length and the highest point (the peak) always survives.
#[derive(Debug)]
pub(crate) struct Downsampler {
    buckets: Vec<Bucket>,
    max_buckets: usize,
    /// Keep only the highest point of each bucket (room for one point only).
    max_only: bool,
    /// Operations per bucket.
    width: u64,
}

impl Downsampler {
    /// Room for about `points` points (two per bucket); 0 keeps nothing.
    pub fn new(points: usize) -> Self {
        Downsampler {
            buckets: Vec::new(),
            max_buckets: if points == 0 { 0 } else { (points / 2).max(1) },
            max_only: points == 1,
            width: 1,
        }
    }

    /// The point of operation `x`; operations come in order, from 0.
    pub fn push(&mut self, x: u64, y: u64) {
        if self.max_buckets == 0 {
            return;
        }
        let mut bucket = x / self.width;
        if bucket >= self.buckets.len() as u64 && self.buckets.len() >= self.max_buckets {
            self.merge();
            bucket = x / self.width;
        }
        let len = self.buckets.len() as u64;
        match self.buckets.last_mut() {
            Some(b) if bucket < len => {
                if y < b.min.1 {
                    b.min = (x, y);
                }
                if y > b.max.1 {
                    b.max = (x, y);
                }
            }
            _ => self.buckets.push(Bucket {
                min: (x, y),
                max: (x, y),
            }),
        }
    }

    fn merge(&mut self) {
        let merged = self
            .buckets
            .chunks(2)
            .map(|pair| {
                let mut b = pair[0];
                if let Some(c) = pair.get(1) {
                    if c.min.1 < b.min.1 {
                        b.min = c.min;
                    }
                    if c.max.1 > b.max.1 {
                        b.max = c.max;
                    }
                }
                b
            })
            .collect();
        self.buckets = merged;
        self.width = self.width.saturating_mul(2);
    }

    /// The kept points, in operation order.
    pub fn points(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(2 * self.buckets.len());
        for b in &self.buckets {
            if self.max_only || b.min.0 == b.max.0 {
                out.push(b.max);
            } else if b.min.0 < b.max.0 {
                out.extend([b.min, b.max]);
            } else {
                out.extend([b.max, b.min]);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(points: usize, ys: &[u64]) -> Vec<(u64, u64)> {
        let mut d = Downsampler::new(points);
        for (x, &y) in ys.iter().enumerate() {
            d.push(x as u64, y);
        }
        d.points()
    }

    #[test]
    fn short_series_are_kept_whole() {
        assert_eq!(feed(10, &[0, 5, 3]), vec![(0, 0), (1, 5), (2, 3)]);
        assert_eq!(feed(0, &[1, 2]), vec![]);
    }

    #[test]
    fn long_series_keep_the_peak_and_stay_bounded() {
        let ys: Vec<u64> = (0..100_000u64).map(|i| (i * 7919) % 1000).collect();
        let mut ys = ys;
        ys[54_321] = 5000;
        let pts = feed(100, &ys);
        assert!(pts.len() <= 100, "{}", pts.len());
        assert!(pts.contains(&(54_321, 5000)));
        assert!(pts.windows(2).all(|w| w[0].0 < w[1].0));
        // The first minimum (0 at operation 0) survives too.
        assert_eq!(pts[0], (0, 0));
    }

    #[test]
    fn ties_keep_the_first_point() {
        let pts = feed(2, &[1, 3, 3, 2, 3]);
        assert!(pts.contains(&(1, 3)));
        assert!(!pts.contains(&(2, 3)) && !pts.contains(&(4, 3)));
    }

    #[test]
    fn one_point_keeps_the_peak() {
        assert_eq!(feed(1, &[1, 9, 4, 2]), vec![(1, 9)]);
    }
}
