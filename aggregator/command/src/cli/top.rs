//! `kern-profile top -- qemu-system-ARCH ...`.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use kern_profile::filter::SampleFilter;
use kern_profile::job::SymbolSources;
use kern_profile::live::{run_top, TopOptions};
use kern_profile::record::gdb_launch::{GdbLaunch, GdbSpec};
use kern_profile::record::launch::{describe_status, exit_code, Console};
use kern_profile::record::{ConsoleSpec, Session};
use kern_profile::stacks::NameStyle;
use kern_profile::ReportBy;

use super::filter_args::FilterArgs;
use super::record::{announce, announce_gdb, gdb_run_ended, say_sampled};
use super::session_args::{LaunchArgs, SamplingArgs};
use kern_profile::say;

const TOP_EXAMPLES: &str = "\
Examples:
  kern-profile top -- qemu-system-i386 -kernel kernel.elf -serial stdio -display none
      a table of the hottest functions, redrawn every second; c: next vCPU, s: sort by
      self or total, q: stop QEMU. The guest's console goes to DIR/console.log
  kern-profile top --batch --interval 5 -- qemu-system-x86_64 ... > top.log
      a table every 5 seconds, for a log (the default when stdout is not a terminal)
  kern-profile top --by process -- qemu-system-x86_64 -kernel vmlinuz ...
      the samples per guest process of a Linux guest (the plugin's tasks=, on with its
      elf=); t cycles the table: functions, threads, processes
  kern-profile top --gdb -- qemu-system-x86_64 -accel kvm -kernel kernel.elf ...
      sampled through a gdbstub of QEMU's own instead of the plugin: any QEMU from 7.2,
      any accelerator

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

    /// What the table is by: `function` (the hottest functions), or the samples per guest
    /// `task` (thread) or `process`, as `-f text --by` (recordings with task records: Linux
    /// guests with the plugin's tasks=; `t` cycles them on a terminal)
    #[arg(long, value_name = "WHAT", value_parser = super::values::report_by(),
          default_value = "function", help_heading = "Output")]
    by: ReportBy,

    /// Print a table every interval instead of redrawing the screen (the default when
    /// standard output is not a terminal)
    #[arg(long, help_heading = "Output")]
    batch: bool,

    #[command(flatten)]
    filter: FilterArgs,

    #[command(flatten)]
    launch: LaunchArgs,

    /// Sample through a gdbstub on a private socket instead of the plugin, as `record --gdb`
    /// does: any QEMU from 7.2, any accelerator (`-accel kvm`, HVF, WHPX). Each look stops
    /// the whole VM and samples every vCPU, at --rate (default 100)
    #[arg(long, help_heading = "Through QEMU's gdbstub",
          conflicts_with_all = ["delay", "period", "trigger", "window", "plugin"])]
    gdb: bool,

    /// With --gdb: looks a second (default 100). Fewer where the guest would otherwise spend
    /// more than 5% of the time stopped
    #[arg(long, value_name = "HZ", requires = "gdb", help_heading = "Through QEMU's gdbstub",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    rate: Option<u32>,
}

pub fn run(a: TopArgs) -> Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval >= 0.05) {
        bail!("--interval {}: give at least 0.05 seconds", a.interval);
    }
    let interactive = !a.batch && std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let opts = a.filter.options();
    let top = TopOptions {
        interval: Duration::from_secs_f64(a.interval),
        rows: a.rows,
        interactive,
        // Keys carry tasks whatever --by says: `t` may ask for them. (Without task records
        // the keys are the same.)
        filter: SampleFilter {
            task_keys: true,
            ..SampleFilter::from_options(&opts)
        },
        style: NameStyle::from_options(&opts, false),
        by: a.by,
    };
    let stdout = &mut std::io::stdout().lock();
    if a.gdb {
        let rate = a.rate.unwrap_or(100);
        let launch = GdbLaunch::prepare(&GdbSpec {
            qemu: a.launch.qemu.clone(),
            kernel: a.launch.kernel.clone(),
            symbols: a.launch.symbols.clone(),
            out_dir: a.launch.output.clone(),
            rate_hz: rate,
            depth: a.sampling.depth.unwrap_or(64) as usize,
            tasks: true,
            command: "top",
        })?;
        announce_gdb(&launch, rate);
        let console = a.launch.output.join("console.log");
        let mut running = launch.start(&Console::Log(console.clone()))?;
        let shown = run_top(&mut running, &top, stdout);
        let (done, status, _) = running.finish()?;
        shown?;
        say_sampled(
            &gdb_run_ended(&done.run),
            &format!("QEMU exited ({})", describe_status(&status)),
        );
        say_kept(&done.raw, &done.sources, &console);
        return Ok(ExitCode::from(exit_code(&status)));
    }
    let spec = a
        .launch
        .spec("top", a.sampling.sampling(false), ConsoleSpec::LogFile);
    let session = Session::prepare(&spec)?;
    announce(&session);
    let mut running = session.start()?;
    let shown = run_top(&mut running, &top, stdout);
    let recorded = running.finish()?;
    shown?;
    let out = &recorded.session.out;
    say_kept(
        &recorded.raw,
        &recorded.session.sources,
        &out.join("console.log"),
    );
    Ok(ExitCode::from(exit_code(&recorded.status)))
}

/// Where the recording is, how to draw it, and where QEMU's console went.
fn say_kept(raw: &Path, sources: &SymbolSources, console: &Path) {
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
    say!(
        "kern-profile: recording kept: {} (draw it: kern-profile report {} {elf}); QEMU's console: {}",
        raw.display(),
        raw.display(),
        console.display()
    );
}
