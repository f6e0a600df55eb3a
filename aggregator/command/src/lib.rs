//! kern-profile, the command: `record` (a QEMU session, [`record`]), `top` (the live table,
//! [`live`]), reports of a recording, `stacks`, allocation mode ([`alloc_cmd`]). The work is
//! in the crates below it: kern-profile-symbols ([`symbolize`]), kern-profile-profile (the
//! model: [`input`], [`stacks`], [`profile`], [`collect`], ...) and kern-profile-render
//! ([`output`], one file per format and the table of formats, [`output::formats`]).
//!
//! A CPU run ([`run_cpu`]) is a pipeline:
//! 1. [`job::CpuJob::resolve`] turns the [`Options`] into a checked job: the input, the
//!    symbol sources, the sample filter, the naming style and one renderer (from the table of
//!    formats).
//! 2. [`job::SymbolSources::load`] loads the ELF (DWARF, symbol table), a symbol map and user
//!    programs into a [`Symbolizer`].
//! 3. One pass over the recording ([`output::Collected::pass`]) interns each distinct
//!    *address* stack with its count ([`stacks`]), so memory follows the distinct stacks, and
//!    feeds the outputs that need each sample (Firefox) as sinks; `record` draws all its
//!    outputs from that one pass ([`record::aggregate`]).
//! 4. Each renderer names the distinct stacks ([`folded::Folded::from_counts`], each
//!    distinct address symbolized once) and writes its format ([`output`]); problems are
//!    [`Warning`]s.
//!
//! ```no_run
//! use kern_profile::{run_cpu, Options, OutputFormat};
//! let opts = Options { format: OutputFormat::Folded, ..Options::default() };
//! let mut out = Vec::new();
//! let report = run_cpu("raw-data".as_ref(), Some("kernel.elf".as_ref()), &opts, &mut out)?;
//! for w in &report.warnings { eprintln!("warning: {w}"); }
//! # Ok::<(), kern_profile::ProfileError>(())
//! ```

/// `eprintln!` that never panics: with stderr closed (`kern-profile record ... 2>&1 | head`)
/// a message is lost, not the recording, and QEMU is still stopped in order.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod alloc_cmd;
pub mod atomic_file;
pub mod job;
pub mod live;
pub mod progress;
pub mod record;

use std::io::Write;
use std::path::{Path, PathBuf};

// The profile model and the symbols, where this crate's modules and tests name them.
pub use kern_profile_profile::{
    address_space, boundary, collect, counts, cpu_list, exact, filter, folded, input, options,
    place, profile, stacks, stuck, tasks, timed, unnamed, user_stack, warning,
};
pub use kern_profile_render as output;
pub use kern_profile_symbols as symbolize;

pub use cpu_list::{CpuList, CpuListError};
pub use folded::Folded;
pub use kern_profile_profile::ProfileError;
pub use options::{ModeFilter, Options, OutputFormat, ReportBy};
pub use symbolize::{SymbolError, Symbolizer};
pub use timed::TimelineCap;
pub use warning::Warning;

use crate::collect::Run;
use crate::job::CpuJob;

/// What a run did, for the user.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    /// One line: what was written from how many samples.
    pub summary: String,
    /// Things the user should know (each displays as one line).
    pub warnings: Vec<Warning>,
}

/// The name titles use for the kernel: the ELF's file name, else the first symbol source's.
pub fn kernel_name(elf: Option<&Path>, symbols: &[PathBuf]) -> String {
    elf.or(symbols.first().map(PathBuf::as_path))
        .and_then(|p| p.file_name())
        .map_or_else(
            || "kernel".to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
}

/// Reads the CPU samples of `raw`, symbolizes them with `elf` (and/or `opts.symbols`), and
/// writes `opts.format` to `out`.
pub fn run_cpu(
    raw: &Path,
    elf: Option<&Path>,
    opts: &Options,
    out: &mut dyn Write,
) -> Result<RunReport, ProfileError> {
    CpuJob::resolve(raw, elf, opts)?.run(out)
}

impl CpuJob {
    /// The run over this job's recording with `sym`, the symbols it loaded (every output of
    /// one recording shares them).
    pub fn run_with<'a>(&'a self, sym: &'a mut Symbolizer) -> Run<'a> {
        Run::new(
            &self.input,
            self.progress,
            &self.filter,
            self.style,
            self.sources.kernel_name(),
            sym,
        )
    }

    /// Loads the symbols, then draws the renderer from one pass over the recording (the
    /// exact counts' renderer for an `exact=only` recording).
    pub fn run(&self, out: &mut dyn Write) -> Result<RunReport, ProfileError> {
        let mut sym = self.sources.load()?;
        let mut run = self.run_with(&mut sym);
        let renderer = match &self.exact_only {
            Some(r) if run.exact_only()? => r.as_ref().map_err(|e| job::unsupported(e))?,
            _ => &self.renderer,
        };
        let summary = output::render(renderer.as_ref(), &mut run, out)?;
        Ok(RunReport {
            summary,
            warnings: run.warnings,
        })
    }
}
