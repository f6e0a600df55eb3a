//! The output formats, one file each, behind [`CpuRenderer`]: flamegraph SVG, folded stacks,
//! Firefox Profiler JSON, pprof, callgrind, Chrome trace events, text report, differential
//! flamegraph and exact counts; plus the words shared by several ([`describe`]). A new format
//! is one more file here and one more row in [`formats`], the table of formats. Allocation mode's own outputs:
//! [`alloc_flamegraph`], [`alloc_report`], [`timeline`].

pub mod alloc_flamegraph;
pub mod alloc_report;
pub mod annotate;
pub mod call_graph;
pub mod callgrind;
pub mod describe;
pub mod diff;
pub mod disassemble;
pub mod exact;
pub mod firefox;
pub mod folded;
pub mod formats;
pub mod gate;
pub mod pprof;
pub mod pprof_proto;
pub mod svg;
pub mod text;
pub mod timed;
pub mod timeline;
pub mod trace;

use std::io::Write;
use std::path::Path;

use kern_profile_profile::collect::Run;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::ProfileError;

/// One output of a CPU run.
pub trait CpuRenderer {
    /// Collects what this output draws from `run` and writes it to `out`; returns the
    /// one-line summary for the user.
    fn render(&self, run: &mut Run<'_>, out: &mut dyn Write) -> Result<String, ProfileError>;

    /// What a shared pass must collect for [`CpuRenderer::draw`].
    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// Draws from what a pass over the recording collected, shared with other outputs;
    /// `None` when this output reads the input itself (e.g. two of them for a diff).
    fn draw(
        &self,
        _run: &mut Run<'_>,
        _collected: &mut Collected,
        _out: &mut dyn Write,
    ) -> Option<Result<String, ProfileError>> {
        None
    }
}

/// What an output drawn from a shared pass needs of it besides the stack counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// The exact counts.
    pub exact: bool,
    /// Every kept sample at its time (Firefox, trace events).
    pub samples: bool,
}

impl Needs {
    pub fn or(self, other: Needs) -> Needs {
        Needs {
            exact: self.exact || other.exact,
            samples: self.samples || other.samples,
        }
    }
}

/// What one pass over a recording collected, for every output drawn from it.
pub struct Collected {
    pub profile: CpuProfile,
    /// The kept samples at their times, when an output needs them.
    pub samples: Option<kern_profile_profile::timed::TimedSamples>,
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
