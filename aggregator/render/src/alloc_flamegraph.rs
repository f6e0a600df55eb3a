//! The words of allocation flamegraphs: title and subtitle by view and counters.

use kern_profile_alloc::{AllocatorProfile, View};

use crate::svg::SvgParams;
use kern_profile_profile::folded::Folded;

/// What a view's weights are.
fn view_noun(view: View) -> (&'static str, &'static str) {
    match view {
        View::Live => (
            "units",
            "still allocated at the end of the trace, by allocating stack",
        ),
        View::Allocated => ("units", "allocated over the trace, by stack"),
        View::Count => ("allocations", "by stack"),
        View::Peak => ("units", "live when usage peaked, by allocating stack"),
    }
}

/// The flamegraph of allocator `p` weighed by `view`; `title` replaces the default one.
pub fn flamegraph_params(
    p: &AllocatorProfile,
    folded: &Folded,
    view: View,
    title: Option<String>,
    reverse: bool,
) -> SvgParams {
    let (unit, what) = view_noun(view);
    let s = &p.stats;
    SvgParams {
        title: title.unwrap_or_else(|| format!("{}: {} {unit} {what}", p.name, folded.total)),
        subtitle: Some(format!(
            "{} allocations, {} reallocations, {} frees; peak {} units live; {} units live at the end",
            s.allocations, s.reallocations, s.frees, s.peak_live, s.live_at_end
        )),
        reverse,
        count_name: unit.to_string(),
    }
}
