//! `kern-profile`: the command line over the `kern_profile` library.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use kern_profile::alloc_cmd::{self, AllocFormat, AllocOptions, AllocView};
use kern_profile::{CpuList, ModeFilter, Options, OutputFormat};

const EXAMPLES: &str = "\
Examples:
  kern-profile raw-data kernel.elf
      cpu.svg: an interactive flamegraph of where the kernel spent its time
  kern-profile raw-data kernel.elf -f text --top 30
      the 30 hottest functions by self and total share, with the run's statistics
  kern-profile raw-data kernel.elf -f folded -o cpu.folded
      collapsed stacks for speedscope, inferno or flamegraph.pl
  kern-profile raw-data kernel.elf -f firefox -o profile.json
      open profile.json in https://profiler.firefox.com (one track per vCPU)
  kern-profile raw-data kernel.elf --reverse --cpu 1-2 --per-cpu
      icicle graph of the hottest leaves' callers, vCPUs 1 and 2 side by side
  kern-profile new.raw kernel.elf --diff old.raw -o diff.svg
      differential flamegraph: red grew since old.raw, blue shrank
  kern-profile raw-data kernel.elf --exact -f text
      exact instruction counts per function (recorded with exact=on)
  kern-profile raw-data kernel.elf --user init.elf,sh.elf -f text
      user-mode samples named from the user programs' ELFs, under `[user] init.elf` etc.,
      and the kernel/user split in the header
  kern-profile raw-data --symbols System.map
      no ELF at hand: names from nm output, System.map or /proc/kallsyms
  kern-profile --alloc memtrace kernel.elf --view peak --timeline -o mem/
      mem/mem-<allocator>.svg (+ -timeline.svg) per allocator of a Maestro memtrace

Notes:
  RAW files of both the kern-profile plugin and the original C plugin are read; the format
  is told from the first bytes. A file cut short (QEMU killed) is used up to its last
  complete record, with a warning.
  Return addresses are looked up at addr-1 (the call instruction), the sampled PC as is. A
  sample at a function's first instruction or at a `ret` takes its caller from the word the
  plugin read at [SP]: the frame-pointer walk misses the caller there. Addresses no symbol
  covers make one `[unknown]` frame (see --addresses); user-mode samples are grouped under
  one `[user]` frame (see --kernel-only, --user-only), or named with --user.
  User programs (--user): a user-mode sample's addresses are named from the binary whose
  loadable segments (PT_LOAD) hold them (the first given, if several), the PC as is,
  return addresses at addr-1, inlined functions from DWARF as for the kernel; its stack is
  rooted at `[user] NAME` (NAME: the binary's file name). A sample taken in the kernel
  during a system call whose frame-pointer walk went on into the user program's stack
  (through a frame record the entry stub builds from the user's EBP and EIP) is named
  kernel frames first, then user binaries, and rooted the same way:
  `[user] prog.elf;_start;main;write;syscall_entry;sys_write`; it still counts as kernel
  time. The text report's header gives the kernel/user split (by the mode each sample was
  taken in; per vCPU with --per-cpu) whenever the recording holds user-mode samples or
  --user is given.
  Legacy files have no time, vCPU or mode: they read as vCPU 0, kernel mode. The original
  tool split a stack wherever an address did not resolve (interrupt frames), counting one
  sample several times and cutting handlers off from the code they interrupted; here such
  an address is one `[unknown]` frame inside the sample's single stack.";

/// Output formats on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    /// Interactive flamegraph (default)
    Svg,
    /// Collapsed stacks `root;...;leaf COUNT`
    Folded,
    /// Firefox Profiler JSON (CPU mode only)
    Firefox,
    /// perf-report-style table
    Text,
}

/// Allocation views on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ViewArg {
    /// Units (bytes; pages for a page allocator) still allocated at the end of the trace, by
    /// allocating stack: leaks
    Live,
    /// Units allocated over the whole trace (allocations and reallocations' new sizes)
    Allocated,
    /// Number of allocations and reallocations
    Count,
    /// Units live when the allocator's usage peaked, by allocating stack
    Peak,
}

/// kern-profile: flamegraphs, reports and profiles of an OS kernel run in QEMU.
///
/// Reads the samples the kern-profile QEMU plugin recorded (RAW) and names them with the
/// kernel's ELF: DWARF first (inlined functions as frames of their own, marked `_[i]`),
/// the symbol table otherwise. With --alloc, reads a Maestro memtrace allocation trace
/// instead and draws one flamegraph per allocator.
#[derive(Debug, Parser)]
#[command(name = "kern-profile", version, after_help = EXAMPLES, max_term_width = 100)]
struct Cli {
    /// Sample file written by the plugin (`out=`), or by the original C plugin; with
    /// --alloc, the memtrace file (Maestro's COM2 output)
    #[arg(value_name = "RAW")]
    raw: PathBuf,

    /// The kernel ELF that ran (with symbols; DWARF for inlined frames and lines). May be
    /// left out when --symbols gives a symbol map
    #[arg(value_name = "ELF")]
    elf: Option<PathBuf>,

    /// Output file; `-` for standard output. Default: cpu.svg, cpu.folded or profile.json
    /// by format (cpu-diff.* with --diff, exact.* with --exact); the text report goes to
    /// standard output. With --alloc: the directory
    /// the mem-<allocator> files go to (created if needed; default: the current one; the
    /// text report then goes to DIR/mem-report.txt instead of standard output)
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,

    /// Output format [default: svg]
    #[arg(short, long, value_enum, value_name = "FORMAT")]
    format: Option<FormatArg>,

    /// Flamegraph title. Default: "<kernel>: <N> samples"
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,

    /// Reversed (icicle) flamegraph: the hottest leaves at the top, their callers below
    #[arg(long)]
    reverse: bool,

    /// Rows of the text report tables
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,

    /// Keep only these vCPUs, e.g. `0`, `0,2-3`
    #[arg(long, value_name = "LIST")]
    cpu: Option<CpuList>,

    /// One root frame `cpu N` per vCPU
    #[arg(long)]
    per_cpu: bool,

    /// Drop user-mode samples
    #[arg(long, conflicts_with = "user_only")]
    kernel_only: bool,

    /// Keep only user-mode samples (grouped under `[user]`; their addresses with
    /// --addresses)
    #[arg(long)]
    user_only: bool,

    /// Don't expand inlined functions: each address is named by its real function
    #[arg(long)]
    no_inline: bool,

    /// Append ` (file:line)` to every frame (from DWARF)
    #[arg(long)]
    lines: bool,

    /// Show addresses no symbol covers as `0x...` instead of one `[unknown]` frame
    #[arg(long)]
    addresses: bool,

    /// A text symbol map: nm output, System.map or /proc/kallsyms. Used for addresses the
    /// ELF does not name, or alone when there is no ELF
    #[arg(long, value_name = "FILE")]
    symbols: Option<PathBuf>,

    /// User programs' ELFs (comma-separated, or --user repeated): user-mode frames are
    /// named from the binary whose loadable segments hold them, under `[user] NAME`
    /// (see Notes). Without it, user samples are one `[user]` frame
    #[arg(long, value_name = "ELF[,ELF...]", value_delimiter = ',', action = clap::ArgAction::Append)]
    user: Vec<PathBuf>,

    /// Report the exact instruction counts of an `exact=on` recording instead of samples:
    /// instructions per function (innermost inlined function; real function with
    /// --no-inline)
    #[arg(long)]
    exact: bool,

    /// Differential flamegraph of RAW against this base run of the same kernel (svg, or
    /// folded with two counts per stack)
    #[arg(long, value_name = "BASE.raw")]
    diff: Option<PathBuf>,

    /// With --diff: scale the base's counts to this run's total
    #[arg(long, requires = "diff")]
    normalize: bool,

    /// No progress bar (it is drawn only on a terminal, for large inputs)
    #[arg(long)]
    no_progress: bool,

    /// Allocation mode: RAW is a Maestro memtrace; writes mem-<allocator>.svg per allocator
    #[arg(long, help_heading = "Allocation mode")]
    alloc: bool,

    /// What the allocation flamegraphs weigh
    #[arg(
        long,
        value_enum,
        default_value = "live",
        requires = "alloc",
        help_heading = "Allocation mode"
    )]
    view: ViewArg,

    /// Also draw mem-<allocator>-timeline.svg: usage over the trace
    #[arg(long, requires = "alloc", help_heading = "Allocation mode")]
    timeline: bool,

    /// Skip records with a bad op byte (resynchronising on the next plausible record)
    /// instead of stopping with an error
    #[arg(long, requires = "alloc", help_heading = "Allocation mode")]
    lenient: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kern-profile: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    if cli.elf.is_none() && cli.symbols.is_none() {
        bail!("give the kernel ELF after RAW (`kern-profile RAW ELF`), or a symbol map with --symbols");
    }
    if cli.alloc {
        return run_alloc(cli);
    }
    let format = match cli.format.unwrap_or(FormatArg::Svg) {
        FormatArg::Svg => OutputFormat::Svg,
        FormatArg::Folded => OutputFormat::Folded,
        FormatArg::Firefox => OutputFormat::Firefox,
        FormatArg::Text => OutputFormat::Text,
    };
    let opts = Options {
        format,
        title: cli.title,
        reverse: cli.reverse,
        top: cli.top,
        cpus: cli.cpu,
        per_cpu: cli.per_cpu,
        mode: if cli.kernel_only {
            ModeFilter::KernelOnly
        } else if cli.user_only {
            ModeFilter::UserOnly
        } else {
            ModeFilter::All
        },
        inline: !cli.no_inline,
        lines: cli.lines,
        addresses: cli.addresses,
        exact: cli.exact,
        diff_base: cli.diff,
        diff_normalize: cli.normalize,
        symbols: cli.symbols,
        user_binaries: cli.user,
        progress: !cli.no_progress,
    };
    let target = match &cli.output {
        Some(p) if p.as_os_str() == "-" => None,
        Some(p) => Some(p.clone()),
        None => opts.default_output().map(PathBuf::from),
    };
    let mut out = LazyOutput::new(target.clone());
    let report = kern_profile::run_cpu(&cli.raw, cli.elf.as_deref(), &opts, &mut out);
    let report = report?;
    out.finish()
        .with_context(|| format!("cannot write {}", LazyOutput::describe(target.as_deref())))?;
    for w in &report.warnings {
        eprintln!("kern-profile: warning: {w}");
    }
    if let Some(t) = &target {
        eprintln!("kern-profile: wrote {}: {}", t.display(), report.summary);
    }
    Ok(())
}

fn run_alloc(cli: Cli) -> Result<()> {
    let format = match cli.format.unwrap_or(FormatArg::Svg) {
        FormatArg::Svg => AllocFormat::Svg,
        FormatArg::Folded => AllocFormat::Folded,
        FormatArg::Text => AllocFormat::Text,
        FormatArg::Firefox => bail!("--alloc writes svg, folded or text (not firefox)"),
    };
    if cli.exact || cli.diff.is_some() || cli.cpu.is_some() || cli.per_cpu || !cli.user.is_empty() {
        bail!("--exact, --diff, --cpu, --per-cpu and --user are CPU-profile options; --alloc takes --view, --timeline, --lenient");
    }
    let opts = AllocOptions {
        view: match cli.view {
            ViewArg::Live => AllocView::Live,
            ViewArg::Allocated => AllocView::Allocated,
            ViewArg::Count => AllocView::Count,
            ViewArg::Peak => AllocView::Peak,
        },
        format,
        timeline: cli.timeline,
        lenient: cli.lenient,
        title: cli.title,
        reverse: cli.reverse,
        top: cli.top,
        inline: !cli.no_inline,
        lines: cli.lines,
        addresses: cli.addresses,
        symbols: cli.symbols,
        progress: !cli.no_progress,
    };
    // The text report goes to standard output unless -o names a directory for it.
    let report = match &cli.output {
        Some(dir) if dir.as_os_str() == "-" => {
            if format != AllocFormat::Text {
                bail!("--alloc writes one file per allocator: -o takes a directory (`-` only with -f text)");
            }
            alloc_cmd::run_alloc(&cli.raw, cli.elf.as_deref(), Path::new("."), &opts)?
        }
        Some(dir) => alloc_cmd::run_alloc_to(&cli.raw, cli.elf.as_deref(), dir, &opts, None)?,
        None => alloc_cmd::run_alloc(&cli.raw, cli.elf.as_deref(), Path::new("."), &opts)?,
    };
    for w in &report.warnings {
        eprintln!("kern-profile: warning: {w}");
    }
    for f in &report.files {
        eprintln!("kern-profile: wrote {}", f.display());
    }
    Ok(())
}

/// Standard output, or a file created at the first write, so that a failed run leaves no
/// empty or half-written file behind.
struct LazyOutput {
    path: Option<PathBuf>,
    file: Option<BufWriter<File>>,
    stdout: Option<io::StdoutLock<'static>>,
}

impl LazyOutput {
    fn new(path: Option<PathBuf>) -> Self {
        LazyOutput {
            path,
            file: None,
            stdout: None,
        }
    }

    fn describe(path: Option<&Path>) -> String {
        path.map_or_else(
            || "standard output".to_string(),
            |p| p.display().to_string(),
        )
    }

    fn inner(&mut self) -> io::Result<&mut dyn Write> {
        match &self.path {
            None => Ok(self.stdout.get_or_insert_with(|| io::stdout().lock())),
            Some(p) => {
                if self.file.is_none() {
                    let f = File::create(p).map_err(|e| {
                        io::Error::new(e.kind(), format!("cannot create {}: {e}", p.display()))
                    })?;
                    self.file = Some(BufWriter::new(f));
                }
                Ok(self.file.as_mut().expect("just set"))
            }
        }
    }

    /// Flushes; creates the file even when nothing was written.
    fn finish(mut self) -> io::Result<()> {
        self.inner()?.flush()
    }
}

impl Write for LazyOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner()?.flush()
    }
}
