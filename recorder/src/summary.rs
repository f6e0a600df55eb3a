//! The line printed at exit.

use std::path::Path;

use kern_profile_format::Stats;

/// The one-line summary printed to stderr at exit, from the statistics record just written.
pub fn summary_line(stats: &Stats, exact_blocks: Option<usize>, out: &Path) -> String {
    let mut s = format!(
        "kern-profile: {} samples written, {} dropped; unwind stops: {}",
        stats.samples, stats.dropped, stats.stops
    );
    if let Some(n) = exact_blocks {
        s.push_str(&format!("; {n} exact blocks"));
    }
    s.push_str(&format!("; output {}", out.display()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{StopCounts, StopReason};

    #[test]
    fn line() {
        let mut c = StopCounts::default();
        c.add(StopReason::NullFramePointer);
        c.add(StopReason::NullFramePointer);
        c.add(StopReason::DepthLimit);
        let mut d = StopCounts::default();
        d.merge(&c);
        d.merge(&c);
        assert_eq!(d, [4, 0, 0, 0, 2, 0]);
        let stats = |samples, dropped, stops| Stats {
            samples,
            dropped,
            stops,
            vcpu_instructions: vec![],
        };
        assert_eq!(
            summary_line(&stats(3, 1, c), None, Path::new("/tmp/raw")),
            "kern-profile: 3 samples written, 1 dropped; unwind stops: null frame pointer 2, depth limit 1; output /tmp/raw"
        );
        assert_eq!(
            summary_line(&stats(0, 0, StopCounts::default()), Some(7), Path::new("x")),
            "kern-profile: 0 samples written, 0 dropped; unwind stops: none; 7 exact blocks; output x"
        );
    }
}
