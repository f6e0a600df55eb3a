//! Shares as percentages, for reports and warnings alike.

/// `part` of `total` in percent.
pub fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}
