//! An allocator's live units over the trace as an SVG chart (plotters), from the points
//! the analysis kept.

use std::path::Path;

use kern_profile_alloc::AllocatorProfile;
use plotters::prelude::*;

use crate::alloc_cmd::AllocCmdError;
use crate::atomic_file::write_atomically;

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

/// Draws `p`'s timeline (x: operation index, y: live units) as an SVG file at `path`, written
/// whole or not at all; the title names the allocator and its peak, which is marked.
pub fn draw_timeline(path: &Path, p: &AllocatorProfile) -> Result<(), AllocCmdError> {
    let svg = timeline_svg(p).map_err(|what| AllocCmdError::Plot {
        path: path.to_path_buf(),
        what,
    })?;
    write_atomically(path, |w| w.write_all(svg.as_bytes())).map_err(|source| AllocCmdError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The timeline's SVG text; a plotters error as text.
fn timeline_svg(p: &AllocatorProfile) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
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

    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (1200, 500)).into_drawing_area();
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
    drop(chart);
    drop(root);
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe() {
        assert_eq!(timeline_file_name("malloc"), "mem-malloc-timeline.svg");
        assert_eq!(timeline_file_name("a/b c"), "mem-a_b_c-timeline.svg");
    }
}
