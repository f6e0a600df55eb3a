//! The output formats: flamegraph SVG, folded stacks, Firefox Profiler JSON, text report,
//! and the differential flamegraph.

pub mod diff;
pub mod firefox;
pub mod folded;
pub mod svg;
pub mod text;
