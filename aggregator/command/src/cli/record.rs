//! `kern-profile record -- qemu-system-ARCH ...`.

use std::path::Path;
use std::process::ExitCode;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use kern_profile::job::SymbolSources;
use kern_profile::record::aggregate::{aggregate, write_top};
use kern_profile::record::attach::{record_attach, AttachSpec, Attached};
use kern_profile::record::gdb_launch::{GdbLaunch, GdbSpec};
use kern_profile::record::launch::Console;
use kern_profile::record::launch::{describe_status, exit_code};
use kern_profile::record::plugin::PluginSource;
use kern_profile::record::{ConsoleSpec, Sampling, Session};
use kern_profile::symbolize::KernelFile;
use kern_profile::Options;
use kern_profile_gdb::{End, Sampled};

use super::filter_args::FilterArgs;
use super::session_args::{LaunchArgs, SamplingArgs};
use kern_profile::say;

const RECORD_EXAMPLES: &str = "\
Examples:
  kern-profile record -- qemu-system-i386 -kernel kernel.elf -serial stdio -display none
      DIR=kern-profile-out: cpu.svg (flamegraph), report.txt (top functions),
      profile.json (https://profiler.firefox.com), profile.pb.gz (go tool pprof),
      cpu.raw (for kern-profile report; zstd-compressed, `zstd -d` gives the raw format)
  kern-profile record -- qemu-system-x86_64 -kernel /boot/vmlinuz-6.1.0-28-amd64 \\
      -initrd initrd.img -append console=ttyS0 -serial stdio -display none
      a distribution's Linux as it is: names from the image's kallsyms, stacks from its
      ORC table; record adds nokaslr to -append
  kern-profile record --period 10000 --kernel vmlinux -o run1 -- qemu-system-x86_64 \\
      -kernel bzImage ...
      instruction-based sampling; names (and inlined frames) from vmlinux's DWARF
  kern-profile record --user init.elf,sh.elf -- qemu-system-riscv64 -M virt -kernel kernel.elf ...
      the kernel's user programs named, and walked by their .eh_frame where they
      have no frame pointers (system calls rooted at the calling program's main)
  kern-profile record --attach unix:/tmp/gdb.sock --duration 10 --kernel kernel.elf
      a QEMU already running with -gdb unix:/tmp/gdb.sock,server=on,wait=off (any
      version from 7.2, any accelerator), sampled through its gdbstub; it runs on
  kern-profile record --gdb -- qemu-system-x86_64 -accel kvm -kernel kernel.elf ...
      QEMU started with a gdbstub of its own and sampled through it: any accelerator
  kern-profile record --window run_benchmark --open -- qemu-system-i386 ...
      sample only inside run_benchmark, then open the flamegraph
  kern-profile record --flight 10 --flight-trigger panic -- qemu-system-x86_64 ...
      a flight recorder: only the last 10 s before the kernel panics (or QEMU exits),
      and the panic path after

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

    /// Flight recorder: keep only the last SECS seconds of samples, in memory, and write them
    /// when QEMU exits (Ctrl-C included), when kern-profile gets SIGUSR1 (`kill -USR1`: a
    /// hang), or when the guest reaches a --flight-trigger function; from then on,
    /// everything is recorded up to the end. The profile of the
    /// seconds before a hang or a panic, at the cost of a normal recording but no disk
    /// (`flight=`; the ring holds at most --max-size, default 1G, of samples)
    #[arg(long, value_name = "SECS", help_heading = "Recording",
          conflicts_with_all = ["exact", "attach", "gdb"],
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    flight: Option<u64>,

    /// With --flight: write the ring when the guest reaches FUNCTION (its first instruction),
    /// named as in the kernel's symbols (a Rust name without its path or hash), or `panic`:
    /// Linux's panic, vpanic and oops_enter, Rust's core::panicking::panic_fmt and
    /// rust_begin_unwind, whichever the kernel has; `nmi`: Linux's NMI handler (exc_nmi or
    /// do_nmi), so that QEMU's monitor command `nmi` (QMP: `inject-nmi`; x86 guests) writes
    /// the ring. Needs the kernel's ELF or image (QEMU's -kernel or --kernel); comma-separated,
    /// or repeated
    #[arg(long, value_name = "FUNCTION", requires = "flight", help_heading = "Recording",
          value_delimiter = ',', action = clap::ArgAction::Append)]
    flight_trigger: Vec<String>,

    /// Write at most SIZE bytes of recording (K, M or G: powers of 1024; at least 1M): past
    /// it, no more samples are written, and QEMU's exit says how many were left out. The
    /// file holds everything before (`max_size=`)
    #[arg(long, value_name = "SIZE", help_heading = "Recording",
          conflicts_with_all = ["attach", "gdb"],
          value_parser = kern_profile_format::limits::parse_size)]
    max_size: Option<u64>,

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

    #[command(flatten)]
    attach: AttachArgs,
}

/// Sampling a running QEMU through its gdbstub instead of starting one with the plugin.
#[derive(Debug, Args)]
#[command(next_help_heading = "Through QEMU's gdbstub")]
pub struct AttachArgs {
    /// Sample a QEMU that is already running, through its gdbstub (`-gdb
    /// unix:PATH,server=on,wait=off`, or `-s` for tcp::1234): ADDR is unix:PATH or HOST:PORT.
    /// Any QEMU from 7.2 and any accelerator (KVM, HVF, WHPX), no plugin; needs --kernel (or
    /// --symbols). Each look stops the whole VM and samples every vCPU; the guest runs on
    /// afterwards
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["delay", "period", "trigger", "window", "exact"])]
    attach: Option<String>,

    /// Start the QEMU command as `record` does, but sample it through a gdbstub on a private
    /// socket instead of the plugin: any QEMU from 7.2, any accelerator (`-accel kvm`, HVF,
    /// WHPX). Each look stops the whole VM and samples every vCPU, at --rate (default 100)
    #[arg(long, conflicts_with_all = ["attach", "delay", "period", "trigger", "window", "exact", "plugin"])]
    gdb: bool,

    /// With --attach: stop after SECS seconds (default: at Ctrl-C, or when QEMU exits)
    #[arg(long, value_name = "SECS", requires = "attach")]
    duration: Option<f64>,

    /// With --attach or --gdb: looks a second (default 100). Fewer where the guest would
    /// otherwise spend more than 5% of the time stopped, and the summary says so
    #[arg(long, value_name = "HZ",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    rate: Option<u32>,

    /// With --attach or --gdb: samples carry no task. By default a Linux kernel with BTF
    /// (--kernel, or QEMU's -kernel) names each sample's task, as the plugin's tasks=auto
    #[arg(long)]
    no_tasks: bool,
}

pub fn run(a: RecordArgs) -> Result<ExitCode> {
    if let Some(addr) = a.attach.attach.clone() {
        return run_attach(a, addr);
    }
    if a.attach.gdb {
        return run_gdb(a);
    }
    if a.attach.rate.is_some() {
        bail!("--rate goes with --attach or --gdb (the plugin's rate is --delay or --period)");
    }
    let sampling = Sampling {
        flight_secs: a.flight,
        flight_triggers: a.flight_trigger.clone(),
        max_size: a.max_size,
        ..a.sampling.sampling(a.exact)
    };
    let spec = a.launch.spec("record", sampling, ConsoleSpec::Terminal);
    let session = Session::prepare(&spec)?;
    announce(&session);
    let mut recorded = session.start()?.finish()?;
    let dir = recorded.session.out.path.clone();
    say!(
        "kern-profile: QEMU exited ({}){}; drawing {}",
        describe_status(&recorded.status),
        if recorded.interrupted {
            ", stopped by a signal"
        } else {
            ""
        },
        recorded.raw.display()
    );
    let kernel = recorded.session.kernel.take();
    let sources = &recorded.session.sources;
    let opts = a.filter.options();
    let show = Show {
        exact: a.exact,
        top: a.top,
        open: a.open,
    };
    draw(&recorded.raw, &dir, sources, kernel, &opts, show)?;
    Ok(ExitCode::from(exit_code(&recorded.status)))
}

/// What `draw` shows besides the outputs: exact counts' outputs too, the table's rows, the
/// flamegraph opened.
#[derive(Debug, Clone, Copy)]
struct Show {
    exact: bool,
    top: usize,
    open: bool,
}

/// Draws the recording `raw` into `dir`'s outputs, prints the hottest functions and what was
/// written, and opens the flamegraph when asked.
fn draw(
    raw: &Path,
    dir: &Path,
    sources: &SymbolSources,
    kernel: Option<KernelFile>,
    opts: &Options,
    show: Show,
) -> Result<()> {
    let Show {
        exact,
        top,
        open: open_svg,
    } = show;
    let done = aggregate(raw, dir, sources, kernel, opts, exact, top).with_context(|| {
        format!(
            "the recording is kept in {}; `kern-profile report` can draw it",
            raw.display()
        )
    })?;
    for w in &done.warnings {
        say!("kern-profile: warning: {w}");
    }
    say!("kern-profile: hottest functions ({} samples):", done.total);
    write_top(&done.top, done.total, std::io::stderr())?;
    for f in &done.files {
        say!("kern-profile: wrote {}", f.display());
    }
    say!("kern-profile: recording: {}", raw.display());
    if open_svg {
        open(&dir.join("cpu.svg"));
    }
    Ok(())
}

/// Draws a recording taken through the gdbstub (`--attach`, `--gdb`) as `record` draws: no
/// exact counts, which only the plugin takes.
fn draw_attached(a: &RecordArgs, done: &Attached, kernel: Option<KernelFile>) -> Result<()> {
    let show = Show {
        exact: false,
        top: a.top,
        open: a.open,
    };
    let (raw, dir) = (&done.raw, &done.out.path);
    // `--user` names the programs' samples (the gdbstub's walks use no program's CFI).
    let mut sources = done.sources.clone();
    sources.user_binaries.clone_from(&a.launch.user);
    draw(raw, dir, &sources, kernel, &a.filter.options(), show)
}

/// Says what is about to run.
pub fn announce(s: &Session) {
    for n in s.plugin.notes.iter().chain(&s.notes) {
        say!("kern-profile: note: {n}");
    }
    let from = match s.plugin.source {
        PluginSource::Given => "",
        PluginSource::Installed => " (installed)",
        PluginSource::Embedded => " (built in)",
    };
    say!(
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
        say!(
            "kern-profile: cannot open {} with {} ({e}); open it in a browser",
            file.display(),
            opener.to_string_lossy()
        );
    }
}

/// `record --attach ADDR`: samples the running QEMU, then draws the recording as `record`
/// does.
fn run_attach(a: RecordArgs, addr: String) -> Result<ExitCode> {
    if !a.launch.qemu.is_empty() {
        bail!("--attach samples a QEMU that already runs: give no QEMU command after `--`");
    }
    if let Some(d) = a.attach.duration {
        if !(d.is_finite() && d > 0.0 && d <= 86_400.0) {
            bail!("--duration {d}: give 0 to 86400 seconds");
        }
    }
    let spec = AttachSpec {
        addr,
        rate_hz: a.attach.rate.unwrap_or(100),
        duration: a.attach.duration.map(Duration::from_secs_f64),
        depth: a.sampling.depth.unwrap_or(64) as usize,
        out_dir: a.launch.output.clone(),
        kernel: a.launch.kernel.clone(),
        symbols: a.launch.symbols.clone(),
        tasks: !a.attach.no_tasks,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    say!(
        "kern-profile: sampling {} through its gdbstub, {} looks a second{}; Ctrl-C stops",
        spec.addr,
        spec.rate_hz,
        spec.duration
            .map_or(String::new(), |d| format!(", for {:.1} s", d.as_secs_f64()))
    );
    let (done, kernel) = record_attach(&spec, &stop, |line| say!("{line}"))?;
    say_sampled(&done.run, "detached, the guest runs on");
    draw_attached(&a, &done, kernel)?;
    Ok(ExitCode::SUCCESS)
}

/// The summary of a sampling run through the gdbstub; `finished` says how a run that was not
/// cut short ended.
pub(super) fn say_sampled(run: &Sampled, finished: &str) {
    let ended = match &run.end {
        End::Duration | End::Stopped => finished.to_string(),
        End::Gone(why) => format!("the gdbstub went away ({why})"),
    };
    say!(
        "kern-profile: {} looks of {} vCPU(s) in {:.1} s ({:.0} a second{}): the guest was stopped {:.0} µs per look (median), {:.1}% of the time; {ended}",
        run.looks,
        run.vcpus,
        run.elapsed.as_secs_f64(),
        run.looks as f64 / run.elapsed.as_secs_f64().max(1e-9),
        if run.slowed > 0 {
            format!(
                ", {} of them later than asked to keep the guest stopped under 5% of the time",
                run.slowed
            )
        } else {
            String::new()
        },
        run.median_stopped().as_secs_f64() * 1e6,
        100.0 * run.stopped_share(),
    );
}

/// What `--gdb` says before QEMU starts: the notes on its command, the stub, the rate.
pub(super) fn announce_gdb(launch: &GdbLaunch, rate: u32) {
    for n in &launch.notes {
        say!("kern-profile: note: {n}");
    }
    if let Some(line) = launch.tasks_line() {
        say!("{line}");
    }
    say!(
        "kern-profile: QEMU {} sampled through its gdbstub ({}), {rate} looks a second",
        launch.qemu.version,
        launch.socket().display()
    );
}

/// A `--gdb` run as [`say_sampled`] tells it: QEMU's exit (the stub going away) is its
/// normal end.
pub(super) fn gdb_run_ended(run: &Sampled) -> Sampled {
    Sampled {
        end: match &run.end {
            End::Gone(_) => End::Stopped,
            e => e.clone(),
        },
        ..run.clone()
    }
}

/// `record --gdb -- QEMU...`: QEMU started with a gdbstub on a private socket and sampled
/// through it until it exits; then drawn as `record` draws.
fn run_gdb(a: RecordArgs) -> Result<ExitCode> {
    let launch = GdbLaunch::prepare(&GdbSpec {
        qemu: a.launch.qemu.clone(),
        kernel: a.launch.kernel.clone(),
        symbols: a.launch.symbols.clone(),
        out_dir: a.launch.output.clone(),
        rate_hz: a.attach.rate.unwrap_or(100),
        depth: a.sampling.depth.unwrap_or(64) as usize,
        tasks: !a.attach.no_tasks,
        command: "record",
    })?;
    announce_gdb(&launch, a.attach.rate.unwrap_or(100));
    let (done, status, kernel) = launch.start(&Console::Inherit)?.finish()?;
    say_sampled(
        &gdb_run_ended(&done.run),
        &format!("QEMU exited ({})", describe_status(&status)),
    );
    draw_attached(&a, &done, kernel)?;
    Ok(ExitCode::from(exit_code(&status)))
}
