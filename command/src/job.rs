//! A CPU run's [`Options`] resolved once, and checked, into what each stage needs: the input,
//! the symbol sources, the sample filter, the naming style and one renderer.

use std::path::{Path, PathBuf};

use crate::filter::SampleFilter;
use crate::options::{Options, OutputFormat};
use crate::output::callgrind::CallgrindRenderer;
use crate::output::diff::DiffRenderer;
use crate::output::exact::ExactRenderer;
use crate::output::firefox::FirefoxRenderer;
use crate::output::folded::FoldedRenderer;
use crate::output::pprof::PprofRenderer;
use crate::output::svg::SvgRenderer;
use crate::output::text::TextRenderer;
use crate::output::trace::TraceRenderer;
use crate::output::CpuRenderer;
use crate::stacks::NameStyle;
use crate::symbolize::Symbolizer;
use crate::ProfileError;

/// Where names come from: the kernel ELF and/or further symbol sources (`--symbols`: text
/// maps or ELFs, looked up after the kernel ELF in order), and user programs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolSources {
    pub elf: Option<PathBuf>,
    pub symbols: Vec<PathBuf>,
    pub user_binaries: Vec<PathBuf>,
}

impl SymbolSources {
    /// Loads every source.
    pub fn load(&self) -> Result<Symbolizer, ProfileError> {
        let mut sym = Symbolizer::load(self.elf.as_deref(), &self.symbols)?;
        for u in &self.user_binaries {
            sym.add_user_binary(u)?;
        }
        Ok(sym)
    }

    /// The name titles use for the kernel.
    pub fn kernel_name(&self) -> String {
        crate::kernel_name(self.elf.as_deref(), &self.symbols)
    }
}

/// One CPU run, ready to go.
pub struct CpuJob {
    /// The sample file.
    pub input: PathBuf,
    /// Allow a progress bar while reading.
    pub progress: bool,
    pub sources: SymbolSources,
    pub filter: SampleFilter,
    pub style: NameStyle,
    pub renderer: Box<dyn CpuRenderer>,
    /// What draws an `exact=only` recording (exact counts, no samples; its header says so)
    /// instead of `renderer`: its exact counts, or why they cannot be drawn as asked (`Err`).
    /// `None` when `renderer` draws it too (exact counts asked for, or Firefox).
    pub exact_only: Option<Result<Box<dyn CpuRenderer>, &'static str>>,
}

impl CpuJob {
    /// Resolves `opts` for `raw` and `elf`; combinations that make no sense are errors here,
    /// before anything is read.
    pub fn resolve(raw: &Path, elf: Option<&Path>, opts: &Options) -> Result<Self, ProfileError> {
        let mut filter = SampleFilter::from_options(opts);
        // The text report has its own per-vCPU lines; `cpu N` (or address-space) frames would
        // only skew totals.
        if opts.format == OutputFormat::Text {
            filter.per_cpu = false;
            filter.per_process = false;
        }
        // A trace has a track per vCPU already.
        if opts.format == OutputFormat::Trace {
            filter.per_cpu = false;
        }
        // Firefox has a category for inlined frames instead; every other output marks them.
        let inline_suffix = opts.format != OutputFormat::Firefox;
        Ok(CpuJob {
            input: raw.to_path_buf(),
            progress: opts.progress,
            sources: SymbolSources {
                elf: elf.map(Path::to_path_buf),
                symbols: opts.symbols.clone(),
                user_binaries: opts.user_binaries.clone(),
            },
            filter,
            style: NameStyle::from_options(opts, inline_suffix),
            renderer: renderer(opts, false).map_err(unsupported)?,
            exact_only: (opts.format != OutputFormat::Firefox && !opts.exact)
                .then(|| renderer(opts, true)),
        })
    }
}

pub(crate) fn unsupported(what: &str) -> ProfileError {
    ProfileError::Unsupported(what.into())
}

/// The one renderer `opts` ask for, for a recording of exact counts only with `exact_only`;
/// `Err` says why the combination makes no sense.
fn renderer(opts: &Options, exact_only: bool) -> Result<Box<dyn CpuRenderer>, &'static str> {
    let format = opts.format;
    if format == OutputFormat::Firefox {
        if opts.exact || opts.diff_base.is_some() {
            return Err(
                "the firefox format shows sampled profiles only: drop --exact/--diff, or pick \
                 -f svg|folded|text",
            );
        }
        return Ok(Box::new(FirefoxRenderer));
    }
    if format == OutputFormat::Callgrind {
        if !opts.exact {
            return Err(
                "-f callgrind writes exact instruction counts: add --exact (of a recording made \
                 with the plugin's exact=on)",
            );
        }
        if opts.diff_base.is_some() {
            return Err("--exact and --diff do not combine");
        }
        return Ok(Box::new(CallgrindRenderer));
    }
    if format == OutputFormat::Trace {
        if opts.exact || exact_only || opts.diff_base.is_some() {
            return Err(
                "the trace format shows sampled stacks over time: exact counts have no time \
                 (drop --exact/--diff; an exact=only recording has no samples)",
            );
        }
        return Ok(Box::new(TraceRenderer));
    }
    if format == OutputFormat::Pprof {
        if opts.diff_base.is_some() {
            return Err("--diff writes svg or folded output");
        }
        return Ok(Box::new(PprofRenderer {
            exact: opts.exact || exact_only,
        }));
    }
    if opts.exact || exact_only {
        if opts.diff_base.is_some() {
            return Err("--exact and --diff do not combine");
        }
        return Ok(Box::new(ExactRenderer::new(opts)));
    }
    if let Some(base) = &opts.diff_base {
        if !matches!(format, OutputFormat::Svg | OutputFormat::Folded) {
            return Err("--diff writes svg or folded output");
        }
        return Ok(Box::new(DiffRenderer::new(base, opts)));
    }
    Ok(match format {
        OutputFormat::Folded => Box::new(FoldedRenderer),
        OutputFormat::Text => Box::new(TextRenderer {
            top: opts.top,
            per_cpu_lines: opts.per_cpu,
        }),
        _ => Box::new(SvgRenderer::new(opts)),
    })
}
