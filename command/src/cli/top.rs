//! `kern-profile top -- qemu-system-ARCH ...`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use kern_profile::filter::SampleFilter;
use kern_profile::live::{run_top, TopOptions};
use kern_profile::record::launch::exit_code;
use kern_profile::record::{ConsoleSpec, Session};
use kern_profile::stacks::NameStyle;

use super::filter_args::FilterArgs;
use super::record::announce;
use super::session_args::{LaunchArgs, SamplingArgs};

const TOP_EXAMPLES: &str = "\
Examples:
  kern-profile top -- qemu-system-i386 -kernel kernel.elf -serial stdio -display none
      a table of the hottest functions, redrawn every second; c: next vCPU, s: sort by
      self or total, q: stop QEMU. The guest's console goes to DIR/console.log
  kern-profile top --batch --interval 5 -- qemu-system-x86_64 ... > top.log
      a table every 5 seconds, for a log (the default when stdout is not a terminal)

The recording stays in DIR/cpu.raw: `kern-profile report DIR/cpu.raw kernel.elf`.";

/// Show the hottest functions live while QEMU runs, like `perf top`
///
/// Runs the QEMU command with the plugin, as `record` does, and reads the samples as the
/// plugin writes them (about every 100 ms): a table of functions by self and total share,
/// for all vCPUs or one. Works in any terminal, over ssh too.
#[derive(Debug, Args)]
#[command(after_help = TOP_EXAMPLES)]
pub struct TopArgs {
    #[command(flatten)]
    sampling: SamplingArgs,

    /// Seconds between two tables
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 1.0,
        help_heading = "Output"
    )]
    interval: f64,

    /// Rows of the table
    #[arg(long, value_name = "N", default_value_t = 20, help_heading = "Output")]
    rows: usize,

    /// Print a table every interval instead of redrawing the screen (the default when
    /// standard output is not a terminal)
    #[arg(long, help_heading = "Output")]
    batch: bool,

    #[command(flatten)]
    filter: FilterArgs,

    #[command(flatten)]
    launch: LaunchArgs,
}

pub fn run(a: TopArgs) -> Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval >= 0.05) {
        bail!("--interval {}: give at least 0.05 seconds", a.interval);
    }
    let spec = a
        .launch
        .spec("top", a.sampling.sampling(false), ConsoleSpec::LogFile);
    let session = Session::prepare(&spec)?;
    announce(&session);
    let interactive = !a.batch && std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let opts = a.filter.options();
    let top = TopOptions {
        interval: Duration::from_secs_f64(a.interval),
        rows: a.rows,
        interactive,
        filter: SampleFilter::from_options(&opts),
        style: NameStyle::from_options(&opts, false),
    };
    let recorded = run_top(session.start()?, &top, &mut std::io::stdout().lock())?;
    let out = &recorded.session.out;
    let sources = &recorded.session.sources;
    let mut elf: Vec<String> = sources
        .elf
        .iter()
        .map(|e| e.display().to_string())
        .collect();
    if !sources.symbols.is_empty() {
        let files: Vec<String> = sources
            .symbols
            .iter()
            .map(|s| s.display().to_string())
            .collect();
        elf.push(format!("--symbols {}", files.join(",")));
    }
    let elf = elf.join(" ");
    eprintln!(
        "kern-profile: recording kept: {} (draw it: kern-profile report {} {elf}); QEMU's console: {}",
        recorded.raw.display(),
        recorded.raw.display(),
        out.join("console.log").display()
    );
    Ok(ExitCode::from(exit_code(&recorded.status)))
}
