//! A CPU run's [`Options`] resolved once, and checked, into what each stage needs: the input,
//! the symbol sources, the sample filter, the naming style and one renderer.

use std::path::{Path, PathBuf};

use crate::filter::SampleFilter;
use crate::options::Options;
use crate::output::formats::{self, renderer};
use crate::output::CpuRenderer;
use crate::stacks::NameStyle;
use crate::symbolize::{KernelFile, Symbolizer};
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
        self.load_with(None)
    }

    /// Loads every source, the kernel from `kernel` when the caller already read it from
    /// [`Self::elf`] (`record` checks it before QEMU starts: a Linux image is not unpacked
    /// twice).
    pub fn load_with(&self, kernel: Option<KernelFile>) -> Result<Symbolizer, ProfileError> {
        let mut sym = match (kernel, self.elf.as_deref()) {
            (Some(k), Some(path)) => Symbolizer::with_kernel(Some((k, path)), &self.symbols)?,
            _ => Symbolizer::load(self.elf.as_deref(), &self.symbols)?,
        };
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
        let row = formats::of(opts.format);
        let mut filter = SampleFilter::from_options(opts);
        filter.per_cpu &= row.cpu_frames;
        filter.per_process &= row.process_frames;
        // The text report's functions would count task roots too.
        filter.per_task &= row.process_frames;
        let inline_suffix = row.inline_marks;
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
            exact_only: (!row.draws_exact_only && !opts.exact).then(|| renderer(opts, true)),
        })
    }
}

pub(crate) fn unsupported(what: &str) -> ProfileError {
    ProfileError::Unsupported(what.into())
}
