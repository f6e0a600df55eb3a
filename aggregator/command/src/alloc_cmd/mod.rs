//! Allocation mode (`--alloc`): a Maestro `memtrace` trace, or the allocation events of a
//! raw file the plugin recorded with `alloc=` (told apart by the raw format's magic),
//! analysed per allocator by `kern-profile-alloc`, its stacks named with the very same code
//! as CPU samples (return addresses looked up at `addr - 1`; a hooked call's stack starts at
//! the hooked function's entry, looked up as is).
//!
//! Per allocator, into the output directory: `mem-<allocator>.svg` (or `.folded`) weighed by
//! the chosen view, and with `timeline`, `mem-<allocator>-timeline.svg`. The text report
//! covers all allocators at once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;

mod error;
mod options;

pub use error::AllocCmdError;
pub use kern_profile_alloc::View as AllocView;
use kern_profile_alloc::{analyze_any, AllocatorProfile, Analysis};
pub use options::{AllocFormat, AllocOptions};

use crate::atomic_file::write_atomically;
use crate::folded::{Folded, FoldedBuilder};
use crate::output::alloc_flamegraph::flamegraph_params;
use crate::output::alloc_report::write_report;
use crate::output::svg::write_svg;
use crate::output::timeline::{timeline_file_name, timeline_svg};
use crate::progress;
use crate::stacks::{NameStyle, StackNamer, UNKNOWN_FRAME};
use crate::symbolize::Symbolizer;
use crate::warning::Warning;

/// What a run wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocReport {
    pub files: Vec<PathBuf>,
    pub warnings: Vec<Warning>,
}

/// `mem-<allocator>.<ext>`, with characters unsafe in file names replaced by `_` (as the
/// timeline's name).
pub fn output_file_name(allocator: &str, ext: &str) -> String {
    let timeline = timeline_file_name(allocator);
    let base = timeline.strip_suffix("-timeline.svg").unwrap_or(&timeline);
    format!("{base}.{ext}")
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
    let mut sym = Symbolizer::load(elf, &opts.symbols)?;
    let mut report = AllocReport {
        warnings: sym.warnings().into_iter().map(Warning::Symbols).collect(),
        ..AllocReport::default()
    };
    let analysis = read_trace(memtrace, opts)?;
    report
        .warnings
        .extend(analysis_warnings(memtrace, &analysis));
    if opts.format != AllocFormat::Text || opts.timeline || text_out.is_none() {
        std::fs::create_dir_all(dir).map_err(|source| AllocCmdError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let mut namer = StackNamer::new(&mut sym, name_style(opts));
    let files = &mut report.files;
    match opts.format {
        AllocFormat::Text => write_text(&analysis, &mut namer, opts.top, dir, text_out, files)?,
        _ => write_flamegraphs(&analysis, &mut namer, opts, dir, files)?,
    }
    if opts.timeline {
        for p in &analysis.allocators {
            let path = dir.join(timeline_file_name(&p.name));
            draw_timeline(&path, p)?;
            files.push(path);
        }
    }
    Ok(report)
}

/// The input stage: one pass over the trace or raw file (with a progress bar).
fn read_trace(memtrace: &Path, opts: &AllocOptions) -> Result<Analysis, AllocCmdError> {
    let open_err = |source| AllocCmdError::Open {
        path: memtrace.to_path_buf(),
        source,
    };
    let file = kern_profile_format::open_input(memtrace).map_err(open_err)?;
    let size = file.metadata().map_err(open_err)?.len();
    let name = memtrace
        .file_name()
        .map_or_else(|| "memtrace".into(), |n| n.to_string_lossy().into_owned());
    let reader = progress::reader(file, opts.progress, size, &name);
    let analysis_opts = kern_profile_alloc::Options {
        view: opts.view,
        lenient: opts.lenient,
        ..kern_profile_alloc::Options::default()
    };
    analyze_any(reader, &analysis_opts).map_err(|source| AllocCmdError::Analyze {
        path: memtrace.to_path_buf(),
        source,
    })
}

fn name_style(opts: &AllocOptions) -> NameStyle {
    NameStyle {
        inline: opts.inline,
        lines: opts.lines,
        addresses: opts.addresses,
        inline_suffix: opts.format != AllocFormat::Text,
    }
}

/// The report of all allocators, to `text_out` or else `dir/mem-report.txt`.
fn write_text(
    analysis: &Analysis,
    namer: &mut StackNamer<'_>,
    top: usize,
    dir: &Path,
    text_out: Option<&mut dyn Write>,
    files: &mut Vec<PathBuf>,
) -> Result<(), AllocCmdError> {
    let first_is_entry = analysis.source.first_is_entry();
    let mut name_stack = |stack: &[u64]| -> String {
        let mut v = Vec::new();
        namer.name_addrs(stack, first_is_entry, &mut v);
        if v.is_empty() {
            return UNKNOWN_FRAME.to_string();
        }
        v.iter().map(|s| &**s).collect::<Vec<_>>().join(";")
    };
    match text_out {
        Some(out) => write_report(out, analysis, &mut name_stack, top).map_err(|source| {
            AllocCmdError::Write {
                path: PathBuf::from("standard output"),
                source,
            }
        }),
        None => {
            let path = dir.join("mem-report.txt");
            write_file(&path, |w| write_report(w, analysis, &mut name_stack, top))?;
            files.push(path);
            Ok(())
        }
    }
}

/// `mem-<allocator>.svg` or `.folded` per allocator.
fn write_flamegraphs(
    analysis: &Analysis,
    namer: &mut StackNamer<'_>,
    opts: &AllocOptions,
    dir: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<(), AllocCmdError> {
    for p in &analysis.allocators {
        let folded = alloc_folded(&p.stacks, analysis.source.first_is_entry(), namer);
        let path = if opts.format == AllocFormat::Folded {
            let path = dir.join(output_file_name(&p.name, "folded"));
            write_file(&path, |w| folded.write(w))?;
            path
        } else {
            let path = dir.join(output_file_name(&p.name, "svg"));
            let params = flamegraph_params(p, &folded, opts.view, opts.title.clone(), opts.reverse);
            write_file(&path, |w| write_svg(&folded, &params, w))?;
            path
        };
        files.push(path);
    }
    Ok(())
}

/// What reading the trace found wrong with it.
fn analysis_warnings(memtrace: &Path, a: &Analysis) -> Vec<Warning> {
    let path = || memtrace.to_path_buf();
    let mut w = Vec::new();
    if let Some(t) = &a.truncation {
        w.push(Warning::Truncated {
            path: path(),
            at: *t,
        });
    }
    if let Some(first) = a.skips.first() {
        w.push(Warning::SkippedRegions {
            path: path(),
            regions: a.skips.len(),
            bytes: a.skips.iter().fold(0u64, |t, s| t.saturating_add(s.bytes)),
            first_offset: first.offset,
        });
    }
    if a.allocators.is_empty() {
        w.push(Warning::NoAllocations { path: path() });
    }
    w
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

/// Names allocation stacks (innermost first: return addresses, after the hooked function's
/// entry when `first_is_entry`).
pub fn alloc_folded(
    stacks: &std::collections::HashMap<Vec<u64>, u64>,
    first_is_entry: bool,
    namer: &mut StackNamer<'_>,
) -> Folded {
    let mut b = FoldedBuilder::default();
    let unknown: Rc<str> = Rc::from(UNKNOWN_FRAME);
    let mut frames = Vec::new();
    for (stack, &n) in stacks {
        frames.clear();
        namer.name_addrs(stack, first_is_entry, &mut frames);
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
    write_atomically(path, f).map_err(|source| AllocCmdError::Write {
        path: path.to_path_buf(),
        source,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe() {
        assert_eq!(output_file_name("buddy", "svg"), "mem-buddy.svg");
        assert_eq!(output_file_name("a/b c", "folded"), "mem-a_b_c.folded");
    }
}
