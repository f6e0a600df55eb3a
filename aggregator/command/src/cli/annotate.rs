//! `kern-profile annotate RAW ELF FUNCTION`: a function's source lines and instructions with
//! their shares, like `perf annotate`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kern_profile::job::CpuJob;
use kern_profile::output::annotate::annotate;
use kern_profile::say;
use kern_profile::{Options, OutputFormat};

const ANNOTATE_EXAMPLES: &str = "\
Examples:
  kern-profile annotate raw-data kernel.elf hot_leaf
      hot_leaf's source lines, then its instructions, each with its share of all samples
  kern-profile annotate raw-data kernel.elf kernel::workload::hot_leaf --exact
      the same with exact instruction counts (recorded with exact=on)";

/// A function's source lines and instructions with their shares, like `perf annotate`
///
/// Counts the samples whose PC was in FUNCTION (its self samples; user-mode samples are left
/// out), by instruction and by DWARF source line (the innermost inlined function's line), as
/// shares of all the run's samples; the lines add up to the function's self share. i386 and
/// x86_64 instructions are disassembled (Intel syntax), and aarch64 ones; riscv64 ones are
/// shown as raw words.
#[derive(Debug, Args)]
#[command(after_help = ANNOTATE_EXAMPLES)]
pub struct AnnotateArgs {
    /// The recording
    #[arg(value_name = "RAW")]
    raw: PathBuf,

    /// The kernel ELF that ran (its code, symbols and DWARF), or a Linux image (vmlinuz,
    /// Image.gz) named by its own kallsyms
    #[arg(value_name = "ELF")]
    elf: PathBuf,

    /// The function: its full name (`kernel::workload::hot_leaf`) or its tail after `::`
    #[arg(value_name = "FUNCTION")]
    function: String,

    /// Exact instruction counts (recorded with exact=on) instead of samples
    #[arg(long)]
    exact: bool,

    /// No progress bar
    #[arg(long)]
    no_progress: bool,
}

pub fn run(args: AnnotateArgs) -> Result<ExitCode> {
    let opts = Options {
        format: OutputFormat::Text,
        exact: args.exact,
        progress: !args.no_progress,
        ..Options::default()
    };
    let job = CpuJob::resolve(&args.raw, Some(&args.elf), &opts)?;
    let mut sym = job.sources.load()?;
    let mut run = job.run_with(&mut sym);
    let annotation = annotate(&mut run, &args.function, args.exact)?;
    for w in &run.warnings {
        say!("kern-profile: warning: {w}");
    }
    let mut out = io::stdout().lock();
    annotation
        .write(&mut out)
        .and_then(|()| out.flush())
        .context("cannot write standard output")?;
    Ok(ExitCode::SUCCESS)
}
