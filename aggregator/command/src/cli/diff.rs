//! `kern-profile diff BASE NEW [ELF] --fail-above PCT`: a regression gate for CI.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use kern_profile::job::CpuJob;
use kern_profile::output::gate::{run_gate, Gate};
use kern_profile::say;
use kern_profile::{Options, OutputFormat};

const DIFF_EXAMPLES: &str = "\
Examples:
  kern-profile diff base.raw new.raw kernel.elf --fail-above 2
      fails (exit status 1), naming them, when a function's self share grew by more than 2
      percentage points of all samples from base.raw to new.raw
  kern-profile diff base.raw new.raw kernel.elf --exact --fail-above 5
      the same on exact instruction counts (exact=on): fails past 5% more instructions
  kern-profile diff base.raw new.raw new.elf --base-elf base.elf --fail-above 2
      two builds of the kernel, each recording named with its own ELF";

/// Compare two recordings of the same kernel function by function; a CI gate
///
/// Prints each function's self count and share in BASE and in NEW, the largest growth
/// first. With --fail-above, exits with status 1 and names every function that grew past
/// the tolerance; 0 otherwise. Both recordings are named with the same symbols: recordings of
/// different kernels (another architecture, or samples that mostly fall in no function of
/// ELF while the other's are named) are refused. Two builds: give BASE's with --base-elf.
#[derive(Debug, Args)]
#[command(after_help = DIFF_EXAMPLES)]
pub struct DiffArgs {
    /// The base recording (the reference run)
    #[arg(value_name = "BASE")]
    base: PathBuf,

    /// The new recording, compared with BASE
    #[arg(value_name = "NEW")]
    new: PathBuf,

    /// The kernel ELF both ran (may be left out when --symbols gives a symbol map)
    #[arg(value_name = "ELF")]
    elf: Option<PathBuf>,

    /// The kernel ELF BASE ran, when it is another build than ELF (functions are then
    /// compared by name, each recording named with its own ELF)
    #[arg(long, value_name = "ELF")]
    base_elf: Option<PathBuf>,

    /// Fail when a function grew by more than PCT: percentage points of the total samples
    /// (its self share in NEW minus in BASE), or with --exact percent of its instruction
    /// count in BASE (a function BASE never ran fails whatever PCT)
    #[arg(long, value_name = "PCT")]
    fail_above: Option<f64>,

    /// Compare exact instruction counts (recorded with exact=on) instead of samples
    #[arg(long)]
    exact: bool,

    /// Rows of the table
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,

    /// Don't expand inlined functions: each address counts for its real function
    #[arg(long)]
    no_inline: bool,

    /// Further symbol sources, as for the report (comma-separated, or repeated)
    #[arg(long, value_name = "FILE[,FILE...]", value_delimiter = ',', action = clap::ArgAction::Append)]
    symbols: Vec<PathBuf>,

    /// No progress bar
    #[arg(long)]
    no_progress: bool,
}

pub fn run(args: DiffArgs) -> Result<ExitCode> {
    if args.elf.is_none() && args.symbols.is_empty() {
        bail!("give the kernel ELF after BASE and NEW, or a symbol map with --symbols");
    }
    if let Some(t) = args.fail_above {
        if !t.is_finite() || t < 0.0 {
            bail!("--fail-above takes a tolerance of 0 or more, not {t}");
        }
    }
    let opts = Options {
        format: OutputFormat::Text,
        inline: !args.no_inline,
        exact: args.exact,
        symbols: args.symbols,
        progress: !args.no_progress,
        ..Options::default()
    };
    let job = CpuJob::resolve(&args.new, args.elf.as_deref(), &opts)?;
    let mut sym = job.sources.load()?;
    let mut run = job.run_with(&mut sym);
    let gate = Gate {
        tolerance: args.fail_above.unwrap_or(f64::INFINITY),
        exact: args.exact,
    };
    let verdict = match &args.base_elf {
        Some(base_elf) => {
            let base_job = CpuJob::resolve(&args.base, Some(base_elf), &opts)?;
            let mut base_sym = base_job.sources.load()?;
            let mut base_run = base_job.run_with(&mut base_sym);
            let verdict = run_gate(&mut run, &args.base, Some(&mut base_run), gate);
            for w in &base_run.warnings {
                say!("kern-profile: warning: {w}");
            }
            verdict?
        }
        None => run_gate(&mut run, &args.base, None, gate)?,
    };
    for w in &run.warnings {
        say!("kern-profile: warning: {w}");
    }
    let mut out = io::stdout().lock();
    verdict
        .write(args.top, &mut out)
        .and_then(|()| out.flush())
        .context("cannot write standard output")?;
    if verdict.failed().next().is_some() {
        say!(
            "kern-profile: diff: grew past the tolerance: {}",
            verdict.failed_list()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
