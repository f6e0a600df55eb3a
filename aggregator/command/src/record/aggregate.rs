//! After QEMU: the recording drawn into `DIR/cpu.svg`, `DIR/report.txt`, `DIR/profile.json`
//! and `DIR/profile.pb.gz` (`exact.svg`, `exact.txt` and `callgrind.out` too for an
//! `exact=on` recording), each written whole or not at all, and the hottest functions for the
//! terminal.

use std::io::Write;
use std::path::{Path, PathBuf};

use kern_profile_format::SamplingMode;

use crate::atomic_file::AtomicFile;
use crate::job::{CpuJob, SymbolSources};
use crate::options::{Options, OutputFormat};
use crate::output::formats::record_outputs;
use crate::output::text::{function_rows, FunctionRow};
use crate::output::{Collected, Needs};
use crate::symbolize::KernelFile;
use crate::warning::Warning;
use crate::ProfileError;

/// What the aggregation wrote and found.
#[derive(Debug, Default)]
pub struct Aggregated {
    pub files: Vec<PathBuf>,
    /// The hottest functions by self samples, hottest first.
    pub top: Vec<FunctionRow>,
    /// Samples kept (the rows' denominator).
    pub total: u64,
    /// Distinct warnings of all the outputs.
    pub warnings: Vec<Warning>,
}

/// Writes the outputs of `raw` into `dir`, shaped by `base` (filters, naming; its format,
/// output and symbol fields are set here), and finds the `top` hottest functions. The
/// symbols are loaded once (the kernel taken from `kernel` when given, as read from
/// `sources.elf` already) and the recording read once, every output drawn from that pass.
pub fn aggregate(
    raw: &Path,
    dir: &Path,
    sources: &SymbolSources,
    kernel: Option<KernelFile>,
    base: &Options,
    exact: bool,
    top: usize,
) -> Result<Aggregated, ProfileError> {
    let mut outputs = Vec::new();
    for (name, format, exact) in record_outputs(exact) {
        let opts = Options {
            format,
            exact,
            symbols: sources.symbols.clone(),
            user_binaries: sources.user_binaries.clone(),
            progress: false,
            top: base.top.max(30),
            ..base.clone()
        };
        outputs.push((
            dir.join(name),
            CpuJob::resolve(raw, sources.elf.as_deref(), &opts)?,
        ));
    }
    // Text naming: no inline markers in the table.
    let opts = Options {
        format: OutputFormat::Text,
        symbols: sources.symbols.clone(),
        // The one symbolizer every output uses is loaded from this job's sources.
        user_binaries: sources.user_binaries.clone(),
        progress: false,
        ..base.clone()
    };
    let mut table = CpuJob::resolve(raw, sources.elf.as_deref(), &opts)?;
    // The pass's keys carry each sample's task for pprof's labels (the other outputs name
    // stacks alike whatever their task; a recording without task records keeps its keys).
    table.filter.task_keys = true;

    let mut sym = table.sources.load_with(kernel)?;
    let mut pass = table.run_with(&mut sym);
    let input = pass.open(raw)?;
    let exact_only = input
        .header
        .as_ref()
        .is_some_and(|h| h.sampling == SamplingMode::Off && h.exact);
    let mut renderers = Vec::with_capacity(outputs.len());
    let mut needs = Needs::default();
    for (_, job) in &outputs {
        let renderer = match &job.exact_only {
            Some(r) if exact_only => r
                .as_ref()
                .map_err(|e| ProfileError::Unsupported(e.to_string()))?,
            _ => &job.renderer,
        };
        needs = needs.or(renderer.needs());
        renderers.push(renderer);
    }
    let collected = Collected::pass(&mut pass, input, &needs)?;
    let mut done = Aggregated::default();
    add_warnings(&mut done.warnings, std::mem::take(&mut pass.warnings));

    for ((path, job), renderer) in outputs.iter().zip(renderers) {
        let write_err = |source| ProfileError::Write {
            what: path.display().to_string(),
            source,
        };
        let mut file = AtomicFile::create(path).map_err(write_err)?;
        let mut run = job.run_with(&mut sym);
        renderer.draw(&mut run, &collected, &mut file)?;
        file.commit().map_err(write_err)?;
        done.files.push(path.clone());
        add_warnings(&mut done.warnings, run.warnings);
    }

    let mut run = table.run_with(&mut sym);
    let folded = run.name(&collected.profile);
    let mut rows = function_rows(&folded);
    sort_by_self(&mut rows);
    rows.truncate(top);
    done.top = rows;
    done.total = folded.total;
    Ok(done)
}

fn add_warnings(all: &mut Vec<Warning>, new: Vec<Warning>) {
    for w in new {
        if !all.iter().any(|a| a.to_string() == w.to_string()) {
            all.push(w);
        }
    }
}

/// Hottest first by self count, then by total, then by name.
pub fn sort_by_self(rows: &mut [FunctionRow]) {
    rows.sort_by(|a, b| {
        b.self_count
            .cmp(&a.self_count)
            .then(b.total_count.cmp(&a.total_count))
            .then(a.name.cmp(&b.name))
    });
}

/// The rows as a small table: `Self%  Total%  Function`.
pub fn write_top(rows: &[FunctionRow], total: u64, mut out: impl Write) -> std::io::Result<()> {
    use crate::output::text::pct;
    writeln!(out, "  {:>7}  {:>7}  Function", "Self", "Total")?;
    for r in rows.iter().filter(|r| r.self_count > 0) {
        writeln!(
            out,
            "  {:>6.2}%  {:>6.2}%  {}",
            pct(r.self_count, total),
            pct(r.total_count, total),
            r.name
        )?;
    }
    Ok(())
}
