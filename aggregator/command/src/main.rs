//! `kern-profile`: the command line over the `kern_profile` library. The default command
//! (`kern-profile RAW ELF`, also `kern-profile report`) aggregates a recording; `record`,
//! `top`, `completions` and `man` are in `cli/`.

mod cli;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use kern_profile::alloc_cmd::{self, AllocFormat, AllocOptions, AllocView};
use kern_profile::atomic_file::AtomicFile;
use kern_profile::say;
use kern_profile::{CpuList, ModeFilter, Options, OutputFormat, ReportBy};

const EXAMPLES: &str = "\
Examples:
  kern-profile record -- qemu-system-i386 -kernel kernel.elf -serial stdio ...
      run QEMU with the plugin, then kern-profile-out/cpu.svg, report.txt, profile.json
  kern-profile top -- qemu-system-i386 -kernel kernel.elf ...
      the hottest functions, live, while the guest runs
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
  kern-profile raw-data kernel.elf --exact -f callgrind
      the same by source line in callgrind.out, for callgrind_annotate or KCachegrind
  kern-profile raw-data kernel.elf -f trace
      trace.json for Perfetto or chrome://tracing: each vCPU's stacks over time
  kern-profile raw-data kernel.elf --user init.elf,sh.elf -f text
      user-mode samples named from the user programs' ELFs, under `[user] init.elf` etc.,
      and the kernel/user split in the header
  kern-profile raw-data vmlinux -f text --by process
      samples per guest process, like perf report --sort comm,pid (recorded with tasks=);
      --by task per thread; --process NAME|PID and --task NAME|TID keep theirs, any -f;
      recorded with switches= too: on-CPU, runnable and blocked seconds per row, an [idle] row
  kern-profile raw-data vmlinux --off-cpu -o offcpu.svg
      where tasks waited off the CPU (µs), per task, blocked or runnable (switches=)
  kern-profile raw-data --symbols System.map
      no ELF at hand: names from nm output, System.map or /proc/kallsyms
  kern-profile raw-data vmlinux --symbols boot.map,arch/x86/boot/compressed/vmlinux
      what vmlinux does not name, from further maps or ELFs' symbol tables, in order
  kern-profile --alloc raw-data kernel.elf -f text
      per allocator: allocations, frees, peak, what is still live and which stacks hold it,
      from the allocator calls the plugin hooked (alloc=SPEC)
  kern-profile --alloc memtrace kernel.elf --view peak --timeline -o mem/
      mem/mem-<allocator>.svg (+ -timeline.svg) per allocator of a Maestro memtrace

Notes:
  RAW files of both the kern-profile plugin and the original C plugin are read; the format
  is told from the first bytes. A file cut short (QEMU killed) is used up to its last
  complete record, with a warning.
  Return addresses are looked up at addr-1 (the call instruction), the sampled PC as is. A
  sample at a function's first instruction or at a `ret` takes its caller from the word the
  plugin read at [SP]: the frame-pointer walk misses the caller there. Addresses no symbol
  covers are named by where the CPU was ([firmware], [boot, paging off], [boot],
  [kernel 0x... no symbol], [user] beyond a kernel entry; [unknown] when the recording does
  not say; see --addresses); user-mode samples are grouped under one `[user]` frame (see
  --kernel-only, --user-only), or named with --user. Walks that crossed a kernel entry show
  [syscall], [interrupt] or [exception] where they did.
  What the shares mean: a `delay=` recording weighs code by the host time QEMU took to
  emulate it (port, MMIO and page-table code weigh more than their instructions, by
  several points on real kernels): pick it for the lowest cost and \"where does the time
  go\"; a `period=` one by guest instructions, reproducible run to run only for a
  deterministic guest (no disk, network or timer-driven scheduling): pick it for
  instruction shares. The text report's \"unwind stops\" lines say which stack ends are
  normal (a chain that ends at the thread's first frame is) and which cut stacks short:
  the run's walks, then the kept samples' by where each was taken (kernel, kernel walks
  gone on past a kernel entry, user, boot and firmware).
  Data rate: about 75 bytes a sample with 10 frames, so `delay=10` writes up to 7.5 MB/s
  per busy vCPU (halted vCPUs take no samples); `delay=100` or a smaller `depth=` writes
  less. `delay=` ticks less often than asked where the host's timer wake-ups are costly
  (a virtual machine: about every 200 µs), as its timer keeps under a tenth of a core.
  A recording is complete (statistics at its end) whenever QEMU exits in order: the
  guest's isa-debug-exit or poweroff, `quit` on the monitor or QMP, SIGINT (Ctrl-C) or
  SIGTERM. After SIGKILL it holds what was flushed up to about 100 ms before; the rest is
  read up to the cut, with a warning.
  User programs (--user): a user-mode sample's addresses are named from the binary that
  ran in its address space: the plugin records the page-table base of each sample and a
  few code bytes at sampled user addresses, which are compared with each binary's code, so
  programs linked at the same addresses are told apart whatever the order of --user (a
  warning names an address space that matches none or several). Recordings without them
  name an address from the first binary whose loadable segments (PT_LOAD) hold it (a
  warning says so when binaries overlap). The PC is looked up as is, return addresses at
  addr-1, inlined functions from DWARF as for the kernel; the stack is rooted at
  `[user] NAME` (NAME: the binary's file name). A sample taken in the kernel
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

/// kern-profile: flamegraphs, reports and profiles of an OS kernel run in QEMU.
///
/// `kern-profile record -- qemu-system-... -kernel kernel.elf ...` runs QEMU with the
/// kern-profile plugin and draws what it recorded; `kern-profile top -- ...` shows the
/// hottest functions live. `kern-profile RAW ELF` (or `kern-profile report RAW ELF`) reads
/// the samples the plugin recorded (RAW) and names them with the kernel's ELF: DWARF first
/// (inlined functions as frames of their own, marked `_[i]`), the symbol table otherwise.
/// With --alloc, it reads the allocator calls the plugin hooked (`alloc=`) or a Maestro
/// memtrace allocation trace instead, and draws one flamegraph per allocator.
#[derive(Debug, Parser)]
#[command(
    name = "kern-profile",
    version,
    after_help = EXAMPLES,
    max_term_width = 100,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    Record(cli::record::RecordArgs),
    Top(cli::top::TopArgs),
    Stacks(cli::stacks::StacksArgs),
    Diff(cli::diff::DiffArgs),
    Annotate(cli::annotate::AnnotateArgs),
    /// Aggregate a recording: what `kern-profile RAW ELF` does
    #[command(after_help = EXAMPLES)]
    Report(ReportArgs),
    Completions(cli::generate::CompletionsArgs),
    Man(cli::generate::ManArgs),
}

/// The default command's arguments (`kern-profile RAW ELF`, `kern-profile report RAW ELF`).
#[derive(Debug, Args)]
struct ReportArgs {
    /// Sample file written by the plugin (`out=`; DIR/cpu.raw of `record`), or by the
    /// original C plugin; with --alloc, a raw file recorded with alloc=SPEC or a memtrace
    /// (Maestro's COM2 output)
    #[arg(value_name = "RAW", required = true)]
    raw: Option<PathBuf>,

    /// The kernel ELF that ran (with symbols; DWARF for inlined frames and lines). Rust
    /// (legacy, v0), C++ (Itanium) and FreePascal names are demangled; a name in no such
    /// scheme is shown by its DWARF name with its scope. May be left out when --symbols gives
    /// a symbol map
    #[arg(value_name = "ELF")]
    elf: Option<PathBuf>,

    #[command(flatten)]
    common: CommonArgs,

    #[command(flatten)]
    cpu: CpuArgs,

    #[command(flatten)]
    filter: cli::filter_args::FilterArgs,

    #[command(flatten)]
    alloc: AllocArgs,
}

/// Options of both modes: where and what to write, and how frames are named.
#[derive(Debug, Args)]
struct CommonArgs {
    /// Output file; `-` for standard output. Default: cpu.svg, cpu.folded, profile.json,
    /// profile.pb.gz, callgrind.out or trace.json by format (cpu-diff.* with --diff, exact.*
    /// with --exact); the text report goes to standard output. With --alloc: the directory
    /// the mem-<allocator> files go to (created if needed; default: the current one; the
    /// text report then goes to DIR/mem-report.txt instead of standard output)
    #[arg(short, long, value_name = "PATH")]
    output: Option<PathBuf>,

    /// Output format
    #[arg(short, long, value_name = "FORMAT", value_parser = cli::values::output_format(),
          default_value = cli::values::default_format())]
    format: OutputFormat,

    /// Flamegraph title. Default: "<kernel>: <N> samples"
    #[arg(long, value_name = "TEXT")]
    title: Option<String>,

    /// Reversed (icicle) flamegraph: the hottest leaves at the top, their callers below
    #[arg(long)]
    reverse: bool,

    /// Rows of the text report tables
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,

    /// Don't expand inlined functions: each address is named by its real function
    #[arg(long)]
    no_inline: bool,

    /// Append ` (file:line)` to every frame (from DWARF)
    #[arg(long)]
    lines: bool,

    /// Show addresses no symbol covers as `0x...` instead of one `[unknown]` frame
    #[arg(long)]
    addresses: bool,

    /// Further symbol sources (comma-separated, or --symbols repeated), looked up in order
    /// for addresses the ELF does not name, or alone when there is no ELF: text maps (nm
    /// output, System.map, /proc/kallsyms) or ELFs, whose symbol tables name other images
    /// (e.g. Linux's decompressor, arch/x86/boot/compressed/vmlinux); told by the file's
    /// first bytes
    #[arg(long, value_name = "FILE[,FILE...]", value_delimiter = ',', action = clap::ArgAction::Append)]
    symbols: Vec<PathBuf>,

    /// No progress bar (it is drawn only on a terminal, for large inputs)
    #[arg(long)]
    no_progress: bool,
}

/// Options of CPU profiles only.
#[derive(Debug, Args)]
#[command(next_help_heading = "CPU profile")]
struct CpuArgs {
    /// Keep only these vCPUs, e.g. `0`, `0,2-3`
    #[arg(long, value_name = "LIST")]
    cpu: Option<CpuList>,

    /// One root frame `cpu N` per vCPU
    #[arg(long)]
    per_cpu: bool,

    /// One root frame per address space (process): `[user] NAME (cr3 0x...)` when a --user
    /// program was found to run there, else `[as cr3 0x...]` (recordings with page-table
    /// bases: format version 2). In recordings with task records (`tasks=`), a sample with a
    /// task is rooted at its process instead: `[process NAME PID]`
    #[arg(long)]
    per_process: bool,

    /// One root frame per guest thread: `[task NAME TID]`, `[no task]` for samples before
    /// their vCPU's first task record, `[task unknown]` where the recorder could not read it
    /// (recordings with task records: the plugin's `tasks=`). The text report has no roots:
    /// its table by thread is --by task
    #[arg(long)]
    per_task: bool,

    /// Weigh stacks by time off the CPU, in microseconds, instead of samples (recordings with
    /// task switches: the plugin's `switches=`): each task's time from its switch out to its
    /// next switch in, rooted at `[task NAME TID]` (under `[process NAME PID]` with
    /// --per-process), then `[blocked]` (asleep until woken) or `[runnable]` (preempted,
    /// waiting for a CPU), then the kernel stack it waited on. Idle tasks are left out; a
    /// task still off at the end counts until the recording's last time. -f svg, folded,
    /// pprof, or text (the table by task, or --by process, with on-CPU, runnable and blocked
    /// seconds); --task and --process apply
    #[arg(long)]
    off_cpu: bool,

    /// Keep only the samples of these threads (comma-separated, or --task repeated): a
    /// number is a thread id (Linux tid), anything else a thread name (`comm`), exactly.
    /// `[no task]` and `[task unknown]` (as --by task shows them) keep the samples without a
    /// known task, whatever --process says
    #[arg(long = "task", value_name = "NAME|TID", value_delimiter = ',', action = clap::ArgAction::Append)]
    tasks: Vec<String>,

    /// Keep only the samples of these processes (comma-separated, or --process repeated): a
    /// number is a process id (Linux tgid), anything else a process name, exactly
    #[arg(long = "process", value_name = "NAME|PID", value_delimiter = ',', action = clap::ArgAction::Append)]
    processes: Vec<String>,

    /// What the text report's table is by: `function` (the top functions), or the samples
    /// per guest `task` (thread) or `process`, like `perf report --sort comm,pid` (-f text,
    /// recordings with task records)
    #[arg(long, value_name = "WHAT", value_parser = cli::values::report_by(), default_value = "function")]
    by: ReportBy,

    /// Drop user-mode samples
    #[arg(long, conflicts_with = "user_only")]
    kernel_only: bool,

    /// Keep only user-mode samples (grouped under `[user]`; their addresses with
    /// --addresses)
    #[arg(long)]
    user_only: bool,

    /// User programs' ELFs (comma-separated, or --user repeated): user-mode frames are
    /// named from the binary that ran in their address space, under `[user] NAME` (see
    /// Notes). Without it, user samples are one `[user]` frame
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
}

/// Options of allocation mode only.
#[derive(Debug, Args)]
#[command(next_help_heading = "Allocation mode")]
struct AllocArgs {
    /// Allocation mode: RAW is a raw file recorded with the plugin's alloc=SPEC, or a Maestro
    /// memtrace; writes mem-<allocator>.svg per allocator
    #[arg(long)]
    alloc: bool,

    /// What the allocation flamegraphs weigh
    #[arg(long, value_parser = cli::values::alloc_view(), default_value_t, requires = "alloc")]
    view: AllocView,

    /// Also draw mem-<allocator>-timeline.svg: usage over the trace
    #[arg(long, requires = "alloc")]
    timeline: bool,

    /// Skip records with a bad op byte (resynchronising on the next plausible record)
    /// instead of stopping with an error
    #[arg(long, requires = "alloc")]
    lenient: bool,
}

impl CpuArgs {
    fn mode(&self) -> ModeFilter {
        if self.kernel_only {
            ModeFilter::KernelOnly
        } else if self.user_only {
            ModeFilter::UserOnly
        } else {
            ModeFilter::All
        }
    }

    /// Whether any CPU-only option was given.
    fn any(&self) -> bool {
        self.exact
            || self.diff.is_some()
            || self.cpu.is_some()
            || self.per_cpu
            || self.per_process
            || self.per_task
            || self.off_cpu
            || !self.tasks.is_empty()
            || !self.processes.is_empty()
            || self.by != ReportBy::Function
            || !self.user.is_empty()
    }
}

fn main() -> ExitCode {
    kern_profile::progress::install();
    let cli = Cli::parse();
    let result = match cli.command {
        None => run(cli.report).map(|()| ExitCode::SUCCESS),
        Some(Command::Report(args)) => run(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Record(args)) => cli::record::run(args),
        Some(Command::Top(args)) => cli::top::run(args),
        Some(Command::Stacks(args)) => cli::stacks::run(args),
        Some(Command::Diff(args)) => cli::diff::run(args),
        Some(Command::Annotate(args)) => cli::annotate::run(args),
        Some(Command::Completions(args)) => cli::generate::completions(args),
        Some(Command::Man(args)) => cli::generate::man(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            say!("kern-profile: error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, leaving out a cause whose words the message
/// already holds (the library's messages name their I/O errors themselves).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&c);
        }
    }
    text
}

fn run(args: ReportArgs) -> Result<()> {
    let ReportArgs {
        raw,
        elf,
        common: c,
        cpu,
        filter,
        alloc,
    } = args;
    if elf.is_none() && c.symbols.is_empty() {
        bail!("give the kernel ELF after RAW (`kern-profile RAW ELF`), or a symbol map with --symbols");
    }
    let raw = raw.expect("clap requires RAW");
    if alloc.alloc {
        return run_alloc(&raw, elf, c, cpu, filter, alloc);
    }
    let opts = Options {
        format: c.format,
        title: c.title,
        reverse: c.reverse,
        top: c.top,
        mode: cpu.mode(),
        cpus: cpu.cpu,
        per_cpu: cpu.per_cpu,
        per_process: cpu.per_process,
        per_task: cpu.per_task,
        off_cpu: cpu.off_cpu,
        tasks: cpu.tasks,
        processes: cpu.processes,
        by: cpu.by,
        inline: !c.no_inline,
        lines: c.lines,
        addresses: c.addresses,
        exact: cpu.exact,
        diff_base: cpu.diff,
        diff_normalize: cpu.normalize,
        symbols: c.symbols,
        user_binaries: cpu.user,
        progress: !c.no_progress,
        // --focus, --exclude, --from-time, --to-time, --timeline-samples: as record and top.
        ..filter.options()
    };
    let target = match &c.output {
        Some(p) if p.as_os_str() == "-" => None,
        Some(p) => Some(p.clone()),
        None => kern_profile::output::formats::default_output(&opts).map(PathBuf::from),
    };
    let mut out = LazyOutput::new(target.clone());
    let report = kern_profile::run_cpu(&raw, elf.as_deref(), &opts, &mut out)
        .map_err(|e| name_output(e, target.as_deref()))?;
    out.finish()
        .with_context(|| format!("cannot write {}", LazyOutput::describe(target.as_deref())))?;
    for w in &report.warnings {
        say!("kern-profile: warning: {w}");
    }
    if let Some(t) = &target {
        say!("kern-profile: wrote {}: {}", t.display(), report.summary);
    }
    Ok(())
}

/// The report of an allocation recording (`--alloc`): the CPU profile's options (`cpu`,
/// `filter`) are refused.
fn run_alloc(
    raw: &Path,
    elf: Option<PathBuf>,
    c: CommonArgs,
    cpu: CpuArgs,
    filter: cli::filter_args::FilterArgs,
    alloc: AllocArgs,
) -> Result<()> {
    if filter.any() {
        bail!(
            "--focus, --exclude, --from-time, --to-time and --timeline-samples are CPU-profile options, not --alloc's"
        );
    }
    let Ok(format) = AllocFormat::try_from(c.format) else {
        bail!("--alloc writes svg, folded or text (not firefox or pprof, callgrind or trace)");
    };
    if cpu.any() {
        bail!("--exact, --diff, --cpu, --per-cpu, --per-process, --per-task, --off-cpu, --task, --process, --by and --user are CPU-profile options; --alloc takes --view, --timeline, --lenient");
    }
    let opts = AllocOptions {
        view: alloc.view,
        format,
        timeline: alloc.timeline,
        lenient: alloc.lenient,
        title: c.title,
        reverse: c.reverse,
        top: c.top,
        inline: !c.no_inline,
        lines: c.lines,
        addresses: c.addresses,
        symbols: c.symbols,
        progress: !c.no_progress,
    };
    // The text report goes to standard output unless -o names a directory for it.
    let report = match &c.output {
        Some(dir) if dir.as_os_str() == "-" => {
            if format != AllocFormat::Text {
                bail!("--alloc writes one file per allocator: -o takes a directory (`-` only with -f text)");
            }
            alloc_cmd::run_alloc(raw, elf.as_deref(), Path::new("."), &opts)?
        }
        Some(dir) => alloc_cmd::run_alloc_to(raw, elf.as_deref(), dir, &opts, None)?,
        None => alloc_cmd::run_alloc(raw, elf.as_deref(), Path::new("."), &opts)?,
    };
    for w in &report.warnings {
        say!("kern-profile: warning: {w}");
    }
    for f in &report.files {
        say!("kern-profile: wrote {}", f.display());
    }
    Ok(())
}

/// A write error names the file (the library knows only "the output").
fn name_output(e: kern_profile::ProfileError, target: Option<&Path>) -> kern_profile::ProfileError {
    match e {
        kern_profile::ProfileError::Write { source, .. } => kern_profile::ProfileError::Write {
            what: LazyOutput::describe(target),
            source,
        },
        e => e,
    }
}

/// Standard output, or a file begun at the first write and in place only once finished
/// ([`AtomicFile`]), so that a failed run leaves no empty or half-written file behind.
struct LazyOutput {
    path: Option<PathBuf>,
    file: Option<AtomicFile>,
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
                    self.file = Some(AtomicFile::create(p)?);
                }
                Ok(self.file.as_mut().expect("just set"))
            }
        }
    }

    /// Flushes, and puts the file in place (even when nothing was written).
    fn finish(mut self) -> io::Result<()> {
        self.inner()?.flush()?;
        match self.file {
            Some(f) => f.commit(),
            None => Ok(()),
        }
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
