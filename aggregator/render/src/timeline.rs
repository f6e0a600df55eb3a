//! An allocator's live units over the trace as an SVG chart (plotters), from the points
//! the analysis kept (the allocation command writes it: `draw_timeline`).

use kern_profile_alloc::AllocatorProfile;
use plotters::prelude::*;

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

/// The timeline's SVG text; a plotters error as text.
pub fn timeline_svg(p: &AllocatorProfile) -> Result<String, String> {
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
