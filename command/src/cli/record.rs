//! `kern-profile record -- qemu-system-ARCH ...`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use kern_profile::record::aggregate::{aggregate, write_top};
use kern_profile::record::launch::{describe_status, exit_code};
use kern_profile::record::plugin::PluginSource;
use kern_profile::record::{ConsoleSpec, Session};
use kern_profile::Options;

use super::filter_args::FilterArgs;
use super::session_args::{LaunchArgs, SamplingArgs};

const RECORD_EXAMPLES: &str = "\
Examples:
  kern-profile record -- qemu-system-i386 -kernel kernel.elf -serial stdio -display none
      DIR=kern-profile-out: cpu.svg (flamegraph), report.txt (top functions),
      profile.json (https://profiler.firefox.com), profile.pb.gz (go tool pprof),
      cpu.raw (for kern-profile report)
  kern-profile record -- qemu-system-x86_64 -kernel /boot/vmlinuz-6.1.0-28-amd64 \\
      -initrd initrd.img -append console=ttyS0 -serial stdio -display none
      a distribution's Linux as it is: names from the image's kallsyms, stacks from its
      ORC table; record adds nokaslr to -append
  kern-profile record --period 10000 --kernel vmlinux -o run1 -- qemu-system-x86_64 \\
      -kernel bzImage ...
      instruction-based sampling; names (and inlined frames) from vmlinux's DWARF
  kern-profile record --window run_benchmark --open -- qemu-system-i386 ...
      sample only inside run_benchmark, then open the flamegraph

QEMU's console and standard input stay yours; Ctrl-C (or SIGTERM to kern-profile) stops
QEMU cleanly and the recording is drawn. With -nographic or -serial mon:stdio the terminal
is QEMU's and Ctrl-C goes to the guest: Ctrl-A X quits QEMU. kern-profile exits with QEMU's
status.";

/// Run QEMU with the kern-profile plugin, then draw what it recorded
///
/// Adds `-plugin kern-profile.so,out=DIR/cpu.raw,...` to the QEMU command, runs it with its
/// console on this terminal, and when QEMU exits (or is stopped with Ctrl-C) writes
/// DIR/cpu.svg, DIR/report.txt, DIR/profile.json and DIR/profile.pb.gz (with --exact also
/// DIR/exact.svg, DIR/exact.txt and DIR/callgrind.out) and prints the hottest functions.
/// Before the guest starts, it checks the QEMU version (qemu-version.txt), the kernel's
/// symbols (QEMU's -kernel, or --kernel/--symbols), the plugin and DIR. The kernel is
/// handed to the plugin (`elf=`) for its unwind tables; a Linux kernel boots with nokaslr.
#[derive(Debug, Args)]
#[command(after_help = RECORD_EXAMPLES)]
pub struct RecordArgs {
    #[command(flatten)]
    sampling: SamplingArgs,

    /// Also count every executed instruction exactly (`exact=on`): DIR/exact.svg,
    /// DIR/exact.txt and DIR/callgrind.out
    #[arg(long, help_heading = "Sampling")]
    exact: bool,

    /// Open DIR/cpu.svg when done ($BROWSER, else xdg-open)
    #[arg(long, help_heading = "Output")]
    open: bool,

    /// Rows of the hottest-functions table printed at the end
    #[arg(long, value_name = "N", default_value_t = 10, help_heading = "Output")]
    top: usize,

    #[command(flatten)]
    filter: FilterArgs,

    #[command(flatten)]
    launch: LaunchArgs,
}

pub fn run(a: RecordArgs) -> Result<ExitCode> {
    let spec = a.launch.spec(
        "record",
        a.sampling.sampling(a.exact),
        ConsoleSpec::Terminal,
    );
    let session = Session::prepare(&spec)?;
    announce(&session);
    let recorded = session.start()?.finish()?;
    let dir = recorded.session.out.path.clone();
    eprintln!(
        "kern-profile: QEMU exited ({}){}; drawing {}",
        describe_status(&recorded.status),
        if recorded.interrupted {
            ", stopped by a signal"
        } else {
            ""
        },
        recorded.raw.display()
    );
    let opts = Options {
        focus: a.filter.focus,
        exclude: a.filter.exclude,
        from_time: a.filter.from_time,
        to_time: a.filter.to_time,
        ..Options::default()
    };
    let done = aggregate(
        &recorded.raw,
        &dir,
        &recorded.session.sources,
        &opts,
        a.exact,
        a.top,
    )
    .with_context(|| {
        format!(
            "the recording is kept in {}; `kern-profile report` can draw it",
            recorded.raw.display()
        )
    })?;
    for w in &done.warnings {
        eprintln!("kern-profile: warning: {w}");
    }
    eprintln!("kern-profile: hottest functions ({} samples):", done.total);
    write_top(&done.top, done.total, std::io::stderr())?;
    for f in &done.files {
        eprintln!("kern-profile: wrote {}", f.display());
    }
    eprintln!("kern-profile: recording: {}", recorded.raw.display());
    if a.open {
        open(&dir.join("cpu.svg"));
    }
    Ok(ExitCode::from(exit_code(&recorded.status)))
}

/// Says what is about to run.
pub fn announce(s: &Session) {
    for n in s.plugin.notes.iter().chain(&s.notes) {
        eprintln!("kern-profile: note: {n}");
    }
    let from = match s.plugin.source {
        PluginSource::Given => "",
        PluginSource::Installed => " (installed)",
        PluginSource::Embedded => " (built in)",
    };
    eprintln!(
        "kern-profile: QEMU {} with plugin {}{from}: {}",
        s.qemu.version,
        s.plugin.path.display(),
        s.plugin_args()
    );
}

/// Opens `file` in a browser, best effort.
fn open(file: &Path) {
    let opener = std::env::var_os("BROWSER").unwrap_or_else(|| "xdg-open".into());
    let r = std::process::Command::new(&opener)
        .arg(file)
        .stdin(std::process::Stdio::null())
        .spawn();
    if let Err(e) = r {
        eprintln!(
            "kern-profile: cannot open {} with {} ({e}); open it in a browser",
            file.display(),
            opener.to_string_lossy()
        );
    }
}
