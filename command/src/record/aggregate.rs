//! After QEMU: the recording drawn into `DIR/cpu.svg`, `DIR/report.txt` and
//! `DIR/profile.json` (`exact.svg` and `exact.txt` too for an `exact=on` recording), each
//! written whole or not at all, and the hottest functions for the terminal.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::atomic_file::AtomicFile;
use crate::collect::Run;
use crate::job::{CpuJob, SymbolSources};
use crate::options::{Options, OutputFormat};
use crate::output::text::{function_rows, FunctionRow};
use crate::output::CpuRenderer;
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

/// The outputs of a recording: (file name, format, exact counts).
const OUTPUTS: [(&str, OutputFormat, bool); 3] = [
    ("cpu.svg", OutputFormat::Svg, false),
    ("report.txt", OutputFormat::Text, false),
    ("profile.json", OutputFormat::Firefox, false),
];
const EXACT_OUTPUTS: [(&str, OutputFormat, bool); 2] = [
    ("exact.svg", OutputFormat::Svg, true),
    ("exact.txt", OutputFormat::Text, true),
];

/// Writes the outputs of `raw` into `dir`, shaped by `base` (filters, naming; its format,
/// output and symbol fields are set here), and finds the `top` hottest functions.
pub fn aggregate(
    raw: &Path,
    dir: &Path,
    sources: &SymbolSources,
    base: &Options,
    exact: bool,
    top: usize,
) -> Result<Aggregated, ProfileError> {
    let mut done = Aggregated::default();
    let extra: &[_] = if exact { &EXACT_OUTPUTS } else { &[] };
    for &(name, format, exact) in OUTPUTS.iter().chain(extra) {
        let opts = Options {
            format,
            exact,
            symbols: sources.symbols.clone(),
            user_binaries: sources.user_binaries.clone(),
            progress: false,
            top: base.top.max(30),
            ..base.clone()
        };
        let path = dir.join(name);
        let write_err = |source| ProfileError::Write {
            what: path.display().to_string(),
            source,
        };
        let mut file = AtomicFile::create(&path).map_err(write_err)?;
        let report = CpuJob::resolve(raw, sources.elf.as_deref(), &opts)?.run(&mut file)?;
        file.commit().map_err(write_err)?;
        done.files.push(path);
        add_warnings(&mut done.warnings, report.warnings);
    }
    // Text naming: no inline markers in the table.
    let opts = Options {
        format: OutputFormat::Text,
        symbols: sources.symbols.clone(),
        progress: false,
        ..base.clone()
    };
    let mut job = CpuJob::resolve(raw, sources.elf.as_deref(), &opts)?;
    let rows = TopRows::default();
    job.renderer = Box::new(rows.clone_handle());
    job.exact_only = None;
    job.run(&mut std::io::sink())?;
    let (mut rows, total) = rows.0.take().unwrap_or_default();
    rows.truncate(top);
    done.top = rows;
    done.total = total;
    Ok(done)
}

fn add_warnings(all: &mut Vec<Warning>, new: Vec<Warning>) {
    for w in new {
        if !all.iter().any(|a| a.to_string() == w.to_string()) {
            all.push(w);
        }
    }
}

/// The functions by self count, and the samples they share.
type Rows = (Vec<FunctionRow>, u64);

/// A renderer that keeps the functions by self count instead of writing.
#[derive(Default)]
struct TopRows(std::rc::Rc<RefCell<Option<Rows>>>);

impl TopRows {
    fn clone_handle(&self) -> TopRows {
        TopRows(std::rc::Rc::clone(&self.0))
    }
}

impl CpuRenderer for TopRows {
    fn render(&self, run: &mut Run<'_>, _out: &mut dyn Write) -> Result<String, ProfileError> {
        let profile = run.collect(run.input, false)?;
        let folded = run.name(&profile);
        let mut rows = function_rows(&folded);
        sort_by_self(&mut rows);
        self.0.replace(Some((rows, folded.total)));
        Ok(String::new())
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
