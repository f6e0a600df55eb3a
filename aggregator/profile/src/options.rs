//! Options of the CPU path, with their defaults (see [`Options::default`]).

use std::path::PathBuf;

use crate::cpu_list::CpuList;
use crate::timed::TimelineCap;

/// What to write (`-f` on the command line: each value's name and help are in the render
/// crate's table of formats, in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Interactive flamegraph (inferno; the default)
    #[default]
    Svg,
    /// Collapsed stacks `root;...;leaf COUNT`, one per line, sorted
    Folded,
    /// Firefox Profiler JSON, one thread per vCPU, samples at their times (CPU mode only);
    /// with task records, also a thread per guest thread under its guest process
    Firefox,
    /// perf-report-style table of the top functions
    Text,
    /// Gzipped pprof profile (profile.proto: go tool pprof, pprof's web UI), self-contained;
    /// --exact: instruction counts
    Pprof,
    /// Callgrind profile (callgrind_annotate, KCachegrind) of the exact instruction counts, by
    /// function and source line (--exact only)
    Callgrind,
    /// Chrome trace-event JSON (Perfetto, chrome://tracing): a track per vCPU, the samples'
    /// stacks as nested slices over time; with task records, also a track per guest thread
    /// under its guest pid
    Trace,
}

/// What the text report's table is by (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReportBy {
    /// The top functions by self and total share (the usual report).
    #[default]
    Function,
    /// Samples per guest thread (task records), like `perf report --sort comm,tid`.
    Task,
    /// Samples per guest process (task records), like `perf report --sort comm,pid`.
    Process,
}

impl ReportBy {
    /// Every value, in `--by`'s order.
    pub const ALL: [ReportBy; 3] = [ReportBy::Function, ReportBy::Task, ReportBy::Process];

    /// Its `--by` value.
    pub fn name(self) -> &'static str {
        match self {
            ReportBy::Function => "function",
            ReportBy::Task => "task",
            ReportBy::Process => "process",
        }
    }
}

/// Which privilege levels to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModeFilter {
    /// Kernel samples by function; user samples grouped under one `[user]` frame (by
    /// function under `[user] NAME` with user binaries).
    #[default]
    All,
    KernelOnly,
    UserOnly,
}

impl ModeFilter {
    pub fn keeps(self, user: bool) -> bool {
        match self {
            ModeFilter::All => true,
            ModeFilter::KernelOnly => !user,
            ModeFilter::UserOnly => user,
        }
    }
}

/// Everything that shapes a CPU profile's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Output format. Default: [`OutputFormat::Svg`].
    pub format: OutputFormat,
    /// Flamegraph title. Default: `None`, meaning "`<kernel>`: `<N>` samples".
    pub title: Option<String>,
    /// Reversed (icicle) flamegraph: leaves at the top, their callers below. Default: false.
    pub reverse: bool,
    /// Rows of the text report. Default: 20.
    pub top: usize,
    /// Keep only these vCPUs. Default: `None` (all).
    pub cpus: Option<CpuList>,
    /// A root frame `cpu N` per vCPU. Default: false.
    pub per_cpu: bool,
    /// A root frame per address space (page-table base): `[user] NAME (cr3 0x…)` when a
    /// `--user` program was found to run there, else `[as cr3 0x…]`; for samples with a
    /// task (task records), `[process NAME PID]` instead. Default: false.
    pub per_process: bool,
    /// A root frame per guest task, `[task NAME TID]` (recordings with task records; with
    /// `per_process` too, under its process's). Default: false.
    pub per_task: bool,
    /// Keep only samples of these threads: a number is a thread id, anything else a thread
    /// name, exactly (recordings with task records). Default: none (all).
    pub tasks: Vec<String>,
    /// Keep only samples of these processes: a process id, or a process name. Default: none.
    pub processes: Vec<String>,
    /// Weigh stacks by time off the CPU (µs) from the recording's task switches instead of
    /// samples: each task's waiting stacks under `[task NAME TID]`. Default: false.
    pub off_cpu: bool,
    /// What the text report's table is by. Default: [`ReportBy::Function`].
    pub by: ReportBy,
    /// Kernel/user filter. Default: [`ModeFilter::All`].
    pub mode: ModeFilter,
    /// Expand inlined functions into frames of their own (marked `_[i]`). Default: true.
    pub inline: bool,
    /// Append ` (file:line)` to frames. Default: false.
    pub lines: bool,
    /// Show unresolved addresses as `0x…` instead of one `[unknown]` frame, and user
    /// samples' addresses under `[user]`. Default: false.
    pub addresses: bool,
    /// Report exact instruction counts (`exact=on` recordings) instead of samples.
    /// Default: false.
    pub exact: bool,
    /// Draw a differential flamegraph against this base run. Default: `None`.
    pub diff_base: Option<PathBuf>,
    /// Differential: scale the base to this run's sample count. Default: false.
    pub diff_normalize: bool,
    /// Further symbol sources (`--symbols`), looked up after the kernel ELF in this order:
    /// text maps (nm, System.map, /proc/kallsyms) or ELFs (their symbol tables, e.g. a
    /// decompressor's). Default: none.
    pub symbols: Vec<PathBuf>,
    /// User programs' ELFs (`--user`): user-mode frames are named from the binary that ran
    /// in their address space (told from the recorded code bytes; else the first whose
    /// loadable segments hold them), under a `[user] NAME` root. Default: none (user
    /// samples grouped under one `[user]` frame).
    pub user_binaries: Vec<PathBuf>,
    /// Allow a progress bar on stderr (drawn only for large inputs on a terminal).
    /// Default: true.
    pub progress: bool,
    /// Keep only the stacks through this function, rooted at it (see
    /// [`crate::filter::NameRules`]). Default: `None`.
    pub focus: Option<String>,
    /// Drop the stacks through any of these functions. Default: none.
    pub exclude: Vec<String>,
    /// Keep only samples taken this many seconds into the recording or later. Default: `None`.
    pub from_time: Option<f64>,
    /// Keep only samples taken before this many seconds into the recording. Default: `None`.
    pub to_time: Option<f64>,
    /// How many samples the outputs over time (Firefox, trace) hold at most; past it, each
    /// vCPU's every Nth, each standing for N ([`crate::timed`]). Default:
    /// [`TimelineCap::DEFAULT`].
    pub timeline_samples: TimelineCap,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            format: OutputFormat::Svg,
            title: None,
            reverse: false,
            top: 20,
            cpus: None,
            per_cpu: false,
            per_process: false,
            per_task: false,
            tasks: Vec::new(),
            processes: Vec::new(),
            off_cpu: false,
            by: ReportBy::Function,
            mode: ModeFilter::All,
            inline: true,
            lines: false,
            addresses: false,
            exact: false,
            diff_base: None,
            diff_normalize: false,
            symbols: Vec::new(),
            user_binaries: Vec::new(),
            progress: true,
            focus: None,
            exclude: Vec::new(),
            from_time: None,
            to_time: None,
            timeline_samples: TimelineCap::DEFAULT,
        }
    }
}
