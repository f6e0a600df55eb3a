//! The output formats, one file each, behind [`CpuRenderer`]: flamegraph SVG, folded stacks,
//! Firefox Profiler JSON, pprof, callgrind, Chrome trace events, text report, differential
//! flamegraph and exact counts, each drawn from what the one [`pass`] collected; plus the words
//! shared by several ([`describe`]). A new format is one more file here and one more row in
//! [`formats`], the table of formats, keyed by its `-f` value (an `OutputFormat`). Allocation
//! mode's own outputs: [`alloc_flamegraph`], [`alloc_report`], [`timeline`].

pub mod alloc_flamegraph;
pub mod alloc_report;
pub mod annotate;
pub mod by_task;
pub mod call_graph;
pub mod callgrind;
pub mod describe;
pub mod diff;
pub mod disassemble;
pub mod exact;
pub mod firefox;
pub mod firefox_shared;
pub mod folded;
pub mod formats;
pub mod gate;
pub mod off_cpu;
pub mod pass;
pub mod pprof;
pub mod pprof_proto;
pub mod svg;
pub mod task_tracks;
pub mod text;
pub mod timeline;
pub mod trace;

use std::io::Write;
use std::path::Path;

use kern_profile_profile::collect::Run;
use kern_profile_profile::ProfileError;

pub use pass::{Collected, Needs};

/// What drawing an output gives: the one-line summary for the user.
pub type Drawn = Result<String, ProfileError>;

/// One output of a CPU run: drawn from what the one pass over the recording collected
/// ([`Collected::pass`]), alone ([`render`]) or beside others (`record`'s outputs).
pub trait CpuRenderer {
    /// What the pass must collect for [`CpuRenderer::draw`].
    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// Writes this output of what the pass collected to `out`.
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn;
}

/// Draws `renderer` alone: the pass over the run's input for its needs, then its drawing.
pub fn render(renderer: &dyn CpuRenderer, run: &mut Run<'_>, out: &mut dyn Write) -> Drawn {
    let needs = renderer.needs();
    if needs.exact {
        // Exact counts are the whole run's: a time range is refused before the recording is
        // read (`draw` checks it too, for `record`'s shared pass).
        exact::no_time_range(run)?;
    }
    let input = run.open(run.input)?;
    let collected = Collected::pass(run, input, &needs)?;
    renderer.draw(run, &collected, out)
}

pub(crate) fn write_err(source: std::io::Error) -> ProfileError {
    ProfileError::Write {
        what: "the output".into(),
        source,
    }
}

/// A path's file name, for subtitles.
pub(crate) fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Named stacks of `(stack, count)` lines, as tests write them.
#[cfg(test)]
pub(crate) fn folded_lines(lines: &[(&str, u64)]) -> kern_profile_profile::folded::Folded {
    kern_profile_profile::folded::Folded {
        lines: lines.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        total: lines.iter().map(|l| l.1).sum(),
    }
}
