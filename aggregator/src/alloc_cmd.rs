//! Allocation mode (`--alloc`): a Maestro `memtrace` trace analysed per allocator by
//! `kern-profile-alloc`, its stacks named with the very same code as CPU samples (every
//! memtrace frame is a return address, looked up at `addr - 1`).
//!
//! Per allocator, into the output directory: `mem-<allocator>.svg` (or `.folded`) weighed by
//! the chosen view, and with `timeline`, `mem-<allocator>-timeline.svg`. The text report
//! covers all allocators at once.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub use kern_profile_alloc::View as AllocView;
use kern_profile_alloc::{analyze, draw_timeline, timeline_file_name, write_report, AllocError};

use crate::folded::{Folded, FoldedBuilder};
use crate::output::svg::{write_svg, SvgParams};
use crate::progress::{self, ProgressReader};
use crate::stacks::{NameStyle, StackNamer, UNKNOWN_FRAME};
use crate::symbolize::{SymbolError, Symbolizer};

/// What allocation mode writes per allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocFormat {
    /// `mem-<allocator>.svg` flamegraphs.
    #[default]
    Svg,
    /// `mem-<allocator>.folded` collapsed stacks.
    Folded,
    /// One report of all allocators: counters and top stacks still holding memory.
    Text,
}

/// Options of allocation mode.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocOptions {
    /// What stacks weigh. Default: [`AllocView::Live`] (bytes still allocated at the end).
    pub view: AllocView,
    /// Default: [`AllocFormat::Svg`].
    pub format: AllocFormat,
    /// Also draw `mem-<allocator>-timeline.svg`. Default: false.
    pub timeline: bool,
    /// Skip records with a bad op byte instead of failing. Default: false.
    pub lenient: bool,
    /// Flamegraph title. Default: `None`, "`<allocator>`: `<total>` `<what>`".
    pub title: Option<String>,
    /// Reversed (icicle) flamegraphs. Default: false.
    pub reverse: bool,
    /// Stacks per allocator in the text report. Default: 20.
    pub top: usize,
    /// Expand inlined functions. Default: true.
    pub inline: bool,
    /// Append ` (file:line)`. Default: false.
    pub lines: bool,
    /// Unknown addresses as `0x…`. Default: false.
    pub addresses: bool,
    /// A text symbol map. Default: `None`.
    pub symbols: Option<PathBuf>,
    /// Allow a progress bar. Default: true.
    pub progress: bool,
}

impl Default for AllocOptions {
    fn default() -> Self {
        AllocOptions {
            view: AllocView::Live,
            format: AllocFormat::Svg,
            timeline: false,
            lenient: false,
            title: None,
            reverse: false,
            top: 20,
            inline: true,
            lines: false,
            addresses: false,
            symbols: None,
            progress: true,
        }
    }
}

/// What can go wrong in allocation mode.
#[derive(Debug, thiserror::Error)]
pub enum AllocCmdError {
    #[error("cannot read {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Analyze { path: PathBuf, source: AllocError },
    #[error(transparent)]
    Symbols(#[from] SymbolError),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Timeline(AllocError),
}

/// What a run wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocReport {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// `mem-<allocator>.<ext>`, with characters unsafe in file names replaced by `_` (as the
/// timeline's name).
pub fn output_file_name(allocator: &str, ext: &str) -> String {
    let timeline = timeline_file_name(allocator);
    let base = timeline.strip_suffix("-timeline.svg").unwrap_or(&timeline);
    format!("{base}.{ext}")
}

/// What a view's weights are.
fn view_noun(view: AllocView) -> (&'static str, &'static str) {
    match view {
        AllocView::Live => (
            "units",
            "still allocated at the end of the trace, by allocating stack",
        ),
        AllocView::Allocated => ("units", "allocated over the trace, by stack"),
        AllocView::Count => ("allocations", "by stack"),
        AllocView::Peak => ("units", "live when usage peaked, by allocating stack"),
    }
}

/// Analyses `memtrace` and writes the per-allocator outputs into `dir` (created if needed);
/// the text report goes to `text_out` when given, else to `dir/mem-report.txt`.
pub fn run_alloc_to(
    memtrace: &Path,
    elf: Option<&Path>,
    dir: &Path,
    opts: &AllocOptions,
    text_out: Option<&mut dyn Write>,
) -> Result<AllocReport, AllocCmdError> {
    let mut sym = Symbolizer::load(elf, opts.symbols.as_deref())?;
    let mut report = AllocReport {
        warnings: sym.warnings().to_vec(),
        ..AllocReport::default()
    };
    let open_err = |source| AllocCmdError::Open {
        path: memtrace.to_path_buf(),
        source,
    };
    let file = File::open(memtrace).map_err(open_err)?;
    let size = file.metadata().map_err(open_err)?.len();
    let name = memtrace
        .file_name()
        .map_or_else(|| "memtrace".into(), |n| n.to_string_lossy().into_owned());
    let reader = ProgressReader::new(file, progress::bar(opts.progress, size, &name));
    let analysis = analyze(
        reader,
        &kern_profile_alloc::Options {
            view: opts.view,
            lenient: opts.lenient,
            ..kern_profile_alloc::Options::default()
        },
    )
    .map_err(|source| AllocCmdError::Analyze {
        path: memtrace.to_path_buf(),
        source,
    })?;
    if let Some(t) = &analysis.truncation {
        report.warnings.push(format!("{}: {t}", memtrace.display()));
    }
    if !analysis.skips.is_empty() {
        let bytes: u64 = analysis.skips.iter().map(|s| s.bytes).sum();
        report.warnings.push(format!(
            "{}: skipped {} unreadable regions ({bytes} bytes; --lenient), the first at byte offset {}",
            memtrace.display(),
            analysis.skips.len(),
            analysis.skips[0].offset
        ));
    }
    if analysis.allocators.is_empty() {
        report.warnings.push(format!(
            "{} holds no allocator operation",
            memtrace.display()
        ));
    }

    let style = NameStyle {
        inline: opts.inline,
        lines: opts.lines,
        addresses: opts.addresses,
        inline_suffix: opts.format != AllocFormat::Text,
    };
    let mut namer = StackNamer::new(&mut sym, style);
    let needs_dir = opts.format != AllocFormat::Text || opts.timeline || text_out.is_none();
    if needs_dir {
        std::fs::create_dir_all(dir).map_err(|source| AllocCmdError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }

    if opts.format == AllocFormat::Text {
        let mut name_stack = |stack: &[u64]| -> String {
            let mut v = Vec::new();
            namer.name_addrs(stack, false, &mut v);
            if v.is_empty() {
                return UNKNOWN_FRAME.to_string();
            }
            v.iter().map(|s| &**s).collect::<Vec<_>>().join(";")
        };
        match text_out {
            Some(out) => {
                write_report(out, &analysis, &mut name_stack, opts.top).map_err(|source| {
                    AllocCmdError::Write {
                        path: PathBuf::from("standard output"),
                        source,
                    }
                })?
            }
            None => {
                let path = dir.join("mem-report.txt");
                write_file(&path, |w| {
                    write_report(w, &analysis, &mut name_stack, opts.top)
                })?;
                report.files.push(path);
            }
        }
    } else {
        for p in &analysis.allocators {
            let folded = alloc_folded(&p.stacks, &mut namer);
            let (unit, what) = view_noun(opts.view);
            if opts.format == AllocFormat::Folded {
                let path = dir.join(output_file_name(&p.name, "folded"));
                write_file(&path, |w| folded.write(w))?;
                report.files.push(path);
            } else {
                let path = dir.join(output_file_name(&p.name, "svg"));
                let params = SvgParams {
                    title: opts
                        .title
                        .clone()
                        .unwrap_or_else(|| format!("{}: {} {unit} {what}", p.name, folded.total)),
                    subtitle: Some(format!(
                        "{} allocations, {} reallocations, {} frees; peak {} units live; {} units live at the end",
                        p.stats.allocations,
                        p.stats.reallocations,
                        p.stats.frees,
                        p.stats.peak_live,
                        p.stats.live_at_end
                    )),
                    reverse: opts.reverse,
                    count_name: unit.to_string(),
                };
                write_file(&path, |w| write_svg(&folded, &params, w))?;
                report.files.push(path);
            }
        }
    }
    if opts.timeline {
        for p in &analysis.allocators {
            let path = dir.join(timeline_file_name(&p.name));
            draw_timeline(&path, p).map_err(AllocCmdError::Timeline)?;
            report.files.push(path);
        }
    }
    Ok(report)
}

/// As [`run_alloc_to`], the text report going to standard output.
pub fn run_alloc(
    memtrace: &Path,
    elf: Option<&Path>,
    dir: &Path,
    opts: &AllocOptions,
) -> Result<AllocReport, AllocCmdError> {
    if opts.format == AllocFormat::Text {
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        let r = run_alloc_to(memtrace, elf, dir, opts, Some(&mut lock))?;
        lock.flush().map_err(|source| AllocCmdError::Write {
            path: PathBuf::from("standard output"),
            source,
        })?;
        return Ok(r);
    }
    run_alloc_to(memtrace, elf, dir, opts, None)
}

/// Names allocation stacks (return addresses, innermost first).
pub fn alloc_folded(
    stacks: &std::collections::HashMap<Vec<u64>, u64>,
    namer: &mut StackNamer<'_>,
) -> Folded {
    let mut b = FoldedBuilder::default();
    let unknown: Rc<str> = Rc::from(UNKNOWN_FRAME);
    let mut frames = Vec::new();
    for (stack, &n) in stacks {
        frames.clear();
        namer.name_addrs(stack, false, &mut frames);
        if frames.is_empty() {
            frames.push(unknown.clone());
        }
        b.add(&frames, n);
    }
    b.finish()
}

fn write_file(
    path: &Path,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), AllocCmdError> {
    let err = |source| AllocCmdError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut w = BufWriter::new(File::create(path).map_err(err)?);
    f(&mut w).map_err(err)?;
    w.flush().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe() {
        assert_eq!(output_file_name("buddy", "svg"), "mem-buddy.svg");
        assert_eq!(output_file_name("a/b c", "folded"), "mem-a_b_c.folded");
    }
}
