//! Live units over the trace: a bounded downsampler fed one point per operation, and the SVG
//! chart drawn from it with plotters.

use std::path::Path;

use plotters::prelude::*;

use crate::analyze::AllocatorProfile;
use crate::error::AllocError;

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

/// The file name of an allocator's timeline, `mem-<allocator>-timeline.svg`, with any
/// character other than ASCII letters, digits, `-`, `_` and `.` replaced by `_`.
pub fn timeline_file_name(allocator: &str) -> String {
    let safe: String = allocator
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("mem-{safe}-timeline.svg")
}

/// Draws `p`'s timeline (x: operation index, y: live units) as an SVG file at `path`; the title
/// names the allocator and its peak, which is marked.
pub fn draw_timeline(path: &Path, p: &AllocatorProfile) -> Result<(), AllocError> {
    let err = |e: &dyn std::fmt::Display| AllocError::Plot {
        path: path.display().to_string(),
        what: e.to_string(),
    };
    let s = &p.stats;
    let x_end = p
        .timeline
        .last()
        .map_or(0, |&(x, _)| x)
        .max(s.operations.saturating_sub(1))
        .max(1);
    let y_end = s.peak_live.saturating_add(s.peak_live / 20).max(1);
    let title = if s.peak_live > 0 {
        format!(
            "{}: live units over the trace (peak {} at operation #{})",
            p.name, s.peak_live, s.peak_at_op
        )
    } else {
        format!("{}: live units over the trace (nothing allocated)", p.name)
    };

    let root = SVGBackend::new(path, (1200, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0u64..x_end, 0u64..y_end)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("operation index")
        .y_desc("live units")
        .draw()
        .map_err(|e| err(&e))?;
    chart
        .draw_series(LineSeries::new(p.timeline.iter().copied(), &BLUE))
        .map_err(|e| err(&e))?;
    if s.peak_live > 0 {
        chart
            .draw_series(std::iter::once(Circle::new(
                (s.peak_at_op, s.peak_live),
                4,
                RED.filled(),
            )))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
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

    #[test]
    fn file_names_are_safe() {
        assert_eq!(timeline_file_name("malloc"), "mem-malloc-timeline.svg");
        assert_eq!(timeline_file_name("a/b c"), "mem-a_b_c-timeline.svg");
    }
}
