//! The one table of CPU output formats: for each `-f` value, the renderer it makes, the file
//! it writes when no output is named, what it can draw (exact counts, a differential), and
//! the files `record` writes it to. A new format is one file beside this one and one row here.

use kern_profile_profile::options::{Options, OutputFormat, ReportBy};

use crate::by_task::TaskTableRenderer;

use crate::callgrind::CallgrindRenderer;
use crate::diff::DiffRenderer;
use crate::exact::ExactRenderer;
use crate::firefox::FirefoxRenderer;
use crate::folded::FoldedRenderer;
use crate::pprof::PprofRenderer;
use crate::svg::SvgRenderer;
use crate::text::TextRenderer;
use crate::trace::TraceRenderer;
use crate::CpuRenderer;

/// One output format.
pub struct Format {
    pub format: OutputFormat,
    /// Its `-f` value, and that value's help (one line).
    pub name: &'static str,
    pub help: &'static str,
    /// The file written when no output is named (`None`: standard output); of exact counts;
    /// of a differential.
    pub file: Option<&'static str>,
    pub exact_file: Option<&'static str>,
    pub diff_file: Option<&'static str>,
    /// What it refuses, checked in this order: the first that applies says why.
    pub refuses: &'static [(Refused, &'static str)],
    /// It draws a recording of exact counts only itself (else the exact counts' renderer does).
    pub draws_exact_only: bool,
    /// `--per-cpu`'s `cpu N` frames and `--per-process`'s address-space frames (the text
    /// report has its own per-vCPU lines, where such frames would only skew totals; a trace
    /// has a track per vCPU already).
    pub cpu_frames: bool,
    pub process_frames: bool,
    /// Inlined frames marked `_[i]` (Firefox has a category for them instead).
    pub inline_marks: bool,
    /// The file `record` writes it to, of the samples and of the exact counts.
    pub record: Option<&'static str>,
    pub record_exact: Option<&'static str>,
    /// Its renderer for `opts`, once `refuses` passed (`exact_only`: for a recording of exact
    /// counts only).
    make: fn(&Options, bool) -> Box<dyn CpuRenderer>,
}

/// A combination of options a format may refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// `--exact`.
    Exact,
    /// Without `--exact`.
    NotExact,
    /// A recording of exact counts only.
    ExactOnly,
    /// `--diff`.
    Diff,
    /// `--diff` with exact counts (asked for, or all the recording holds).
    ExactAndDiff,
}

const NOT_WITH_DIFF: &str = "--exact and --diff do not combine";
const DIFF_FORMATS: &str = "--diff writes svg or folded output";

/// Every format; `record`'s outputs in the order it writes them.
pub const FORMATS: &[Format] = &[
    Format {
        format: OutputFormat::Svg,
        name: "svg",
        help: "Interactive flamegraph (inferno; the default)",
        file: Some("cpu.svg"),
        exact_file: Some("exact.svg"),
        diff_file: Some("cpu-diff.svg"),
        refuses: &[(Refused::ExactAndDiff, NOT_WITH_DIFF)],
        draws_exact_only: false,
        cpu_frames: true,
        process_frames: true,
        inline_marks: true,
        record: Some("cpu.svg"),
        record_exact: Some("exact.svg"),
        make: |opts, exact_only| match &opts.diff_base {
            _ if opts.exact || exact_only => Box::new(ExactRenderer::new(opts)),
            Some(base) => Box::new(DiffRenderer::new(base, opts)),
            None => Box::new(SvgRenderer::new(opts)),
        },
    },
    Format {
        format: OutputFormat::Text,
        name: "text",
        help: "perf-report-style table of the top functions",
        file: None,
        exact_file: None,
        diff_file: None,
        refuses: &[
            (Refused::ExactAndDiff, NOT_WITH_DIFF),
            (Refused::Diff, DIFF_FORMATS),
        ],
        draws_exact_only: false,
        cpu_frames: false,
        process_frames: false,
        inline_marks: true,
        record: Some("report.txt"),
        record_exact: Some("exact.txt"),
        make: |opts, exact_only| match opts.exact || exact_only {
            true => Box::new(ExactRenderer::new(opts)),
            false if opts.by != ReportBy::Function => Box::new(TaskTableRenderer {
                by: opts.by,
                top: opts.top,
            }),
            false => Box::new(TextRenderer {
                top: opts.top,
                per_cpu_lines: opts.per_cpu,
            }),
        },
    },
    Format {
        format: OutputFormat::Firefox,
        name: "firefox",
        help: "Firefox Profiler JSON, one thread per vCPU, samples at their times (CPU mode \
             only); with task records, also a process per guest process and a thread per guest \
             thread ([no task], [task unknown] for the samples without a known task)",
        file: Some("profile.json"),
        exact_file: Some("profile.json"),
        diff_file: Some("profile.json"),
        refuses: &[
            (Refused::Exact, FIREFOX_SAMPLED),
            (Refused::Diff, FIREFOX_SAMPLED),
        ],
        draws_exact_only: true,
        cpu_frames: true,
        process_frames: true,
        inline_marks: false,
        record: Some("profile.json"),
        record_exact: None,
        make: |opts, _| Box::new(FirefoxRenderer(opts.timeline_samples)),
    },
    Format {
        format: OutputFormat::Folded,
        name: "folded",
        help: "Collapsed stacks `root;...;leaf COUNT`, one per line, sorted",
        file: Some("cpu.folded"),
        exact_file: Some("exact.folded"),
        diff_file: Some("cpu-diff.folded"),
        refuses: &[(Refused::ExactAndDiff, NOT_WITH_DIFF)],
        draws_exact_only: false,
        cpu_frames: true,
        process_frames: true,
        inline_marks: true,
        record: None,
        record_exact: None,
        make: |opts, exact_only| match &opts.diff_base {
            _ if opts.exact || exact_only => Box::new(ExactRenderer::new(opts)),
            Some(base) => Box::new(DiffRenderer::new(base, opts)),
            None => Box::new(FoldedRenderer),
        },
    },
    Format {
        format: OutputFormat::Pprof,
        name: "pprof",
        help: "Gzipped pprof profile (profile.proto: go tool pprof, pprof's web UI), \
             self-contained; --exact: instruction counts",
        file: Some("profile.pb.gz"),
        exact_file: Some("profile.pb.gz"),
        diff_file: Some("profile.pb.gz"),
        refuses: &[(Refused::Diff, DIFF_FORMATS)],
        draws_exact_only: false,
        cpu_frames: true,
        process_frames: true,
        inline_marks: true,
        record: Some("profile.pb.gz"),
        record_exact: None,
        make: |opts, exact_only| {
            Box::new(PprofRenderer {
                exact: opts.exact || exact_only,
                off_cpu: false,
            })
        },
    },
    Format {
        format: OutputFormat::Callgrind,
        name: "callgrind",
        help: "Callgrind profile (callgrind_annotate, KCachegrind) of the exact instruction \
             counts, by function and source line (--exact only)",
        file: Some("callgrind.out"),
        exact_file: Some("callgrind.out"),
        diff_file: Some("callgrind.out"),
        refuses: &[
            (
                Refused::NotExact,
                "-f callgrind writes exact instruction counts: add --exact (of a recording made \
                 with the plugin's exact=on)",
            ),
            (Refused::Diff, NOT_WITH_DIFF),
        ],
        draws_exact_only: false,
        cpu_frames: true,
        process_frames: true,
        inline_marks: true,
        record: None,
        record_exact: Some("callgrind.out"),
        make: |_, _| Box::new(CallgrindRenderer),
    },
    Format {
        format: OutputFormat::Trace,
        name: "trace",
        help: "Chrome trace-event JSON (Perfetto, chrome://tracing): a track per vCPU, the \
             samples' stacks as nested slices over time; with task records, also a track per \
             guest thread under its guest pid ([no task], [task unknown] for the samples \
             without a known task)",
        file: Some("trace.json"),
        exact_file: Some("trace.json"),
        diff_file: Some("trace.json"),
        refuses: &[
            (Refused::Exact, TRACE_SAMPLED),
            (Refused::ExactOnly, TRACE_SAMPLED),
            (Refused::Diff, TRACE_SAMPLED),
        ],
        draws_exact_only: false,
        cpu_frames: false,
        process_frames: true,
        inline_marks: true,
        record: None,
        record_exact: None,
        make: |opts, _| Box::new(TraceRenderer(opts.timeline_samples)),
    },
];

const BY_TASK_TEXT: &str = "--by task|process is a table of the text report's samples: -f text, \
     without --exact or --diff (for the other formats: --per-task, --per-process)";
const EXACT_NO_TASKS: &str = "exact instruction counts have no task: --per-task, --task and \
     --process apply to samples (drop --exact; an exact=only recording has no samples)";
const FIREFOX_SAMPLED: &str = "the firefox format shows sampled profiles only: drop \
     --exact/--diff, or pick -f svg|folded|text";
const TRACE_SAMPLED: &str = "the trace format shows sampled stacks over time: exact counts \
     have no time (drop --exact/--diff; an exact=only recording has no samples)";

/// The row of `format`.
pub fn of(format: OutputFormat) -> &'static Format {
    FORMATS
        .iter()
        .find(|f| f.format == format)
        .expect("every format has a row")
}

/// The rows in `-f`'s order: the order of [`OutputFormat`]'s variants.
pub fn values() -> Vec<&'static Format> {
    let mut rows: Vec<&Format> = FORMATS.iter().collect();
    rows.sort_by_key(|f| f.format as u8);
    rows
}

/// The row whose `-f` value is `name`.
pub fn named(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

/// The renderer `opts` ask for (for a recording of exact counts only with `exact_only`);
/// `Err` says why the combination makes no sense.
pub fn renderer(opts: &Options, exact_only: bool) -> Result<Box<dyn CpuRenderer>, &'static str> {
    let row = of(opts.format);
    let diff = opts.diff_base.is_some();
    if opts.by != ReportBy::Function && (opts.format != OutputFormat::Text || opts.exact || diff) {
        return Err(BY_TASK_TEXT);
    }
    if opts.off_cpu {
        return crate::off_cpu::renderer(opts);
    }
    let by_task = opts.per_task || !opts.tasks.is_empty() || !opts.processes.is_empty();
    if by_task && (opts.exact || exact_only) {
        return Err(EXACT_NO_TASKS);
    }
    for &(refused, why) in row.refuses {
        let applies = match refused {
            Refused::Exact => opts.exact,
            Refused::NotExact => !opts.exact,
            Refused::ExactOnly => exact_only,
            Refused::Diff => diff,
            Refused::ExactAndDiff => (opts.exact || exact_only) && diff,
        };
        if applies {
            return Err(why);
        }
    }
    Ok((row.make)(opts, exact_only))
}

/// The file written when no output is named: `None` means standard output. `cpu.svg` (as
/// the original tool), `cpu.folded`, `profile.json`, `profile.pb.gz` (pprof, exact counts
/// too), `callgrind.out`, `trace.json`; `cpu-diff.*` with a diff base, `exact.*` for exact
/// counts, `off-cpu.svg`/`.folded` with `--off-cpu`; the text report goes to standard output.
pub fn default_output(opts: &Options) -> Option<&'static str> {
    let row = of(opts.format);
    if opts.off_cpu {
        return match opts.format {
            OutputFormat::Svg => Some("off-cpu.svg"),
            OutputFormat::Folded => Some("off-cpu.folded"),
            _ => row.file,
        };
    }
    match (opts.exact, opts.diff_base.is_some()) {
        (true, _) => row.exact_file,
        (false, true) => row.diff_file,
        (false, false) => row.file,
    }
}

/// The outputs `record` writes: (file name, format, exact counts), samples first.
pub fn record_outputs(exact: bool) -> Vec<(&'static str, OutputFormat, bool)> {
    let sampled = FORMATS
        .iter()
        .filter_map(|f| f.record.map(|name| (name, f.format, false)));
    let counted = FORMATS
        .iter()
        .filter(|_| exact)
        .filter_map(|f| f.record_exact.map(|name| (name, f.format, true)));
    sampled.chain(counted).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_row_per_format() {
        for f in every_value() {
            assert_eq!(of(f).format, f);
        }
        assert_eq!(FORMATS.len(), every_value().len());
    }

    #[test]
    fn values_in_the_enum_order_each_named_once() {
        let order: Vec<OutputFormat> = values().iter().map(|f| f.format).collect();
        assert_eq!(order, every_value());
        let names: Vec<&str> = values().iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            [
                "svg",
                "folded",
                "firefox",
                "text",
                "pprof",
                "callgrind",
                "trace"
            ]
        );
        for f in every_value() {
            assert_eq!(named(of(f).name).map(|r| r.format), Some(f));
        }
        assert!(named("bogus").is_none());
    }

    /// Every `-f` value, in the enum's order (listed by hand, checked by the match).
    fn every_value() -> Vec<OutputFormat> {
        let all = [
            OutputFormat::Svg,
            OutputFormat::Folded,
            OutputFormat::Firefox,
            OutputFormat::Text,
            OutputFormat::Pprof,
            OutputFormat::Callgrind,
            OutputFormat::Trace,
        ];
        for f in all {
            // A new variant fails to compile here until it is listed above.
            match f {
                OutputFormat::Svg
                | OutputFormat::Folded
                | OutputFormat::Firefox
                | OutputFormat::Text
                | OutputFormat::Pprof
                | OutputFormat::Callgrind
                | OutputFormat::Trace => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn default_files() {
        let o = |format, exact, diff: bool| Options {
            format,
            exact,
            diff_base: diff.then(|| "base".into()),
            ..Options::default()
        };
        assert_eq!(
            default_output(&o(OutputFormat::Svg, false, false)),
            Some("cpu.svg")
        );
        assert_eq!(
            default_output(&o(OutputFormat::Svg, true, false)),
            Some("exact.svg")
        );
        assert_eq!(
            default_output(&o(OutputFormat::Folded, false, true)),
            Some("cpu-diff.folded")
        );
        assert_eq!(default_output(&o(OutputFormat::Text, true, false)), None);
        assert_eq!(
            default_output(&o(OutputFormat::Pprof, true, false)),
            Some("profile.pb.gz")
        );
    }

    #[test]
    fn record_writes_the_sampled_outputs_then_the_exact_ones() {
        let names = |exact| -> Vec<&str> { record_outputs(exact).iter().map(|o| o.0).collect() };
        let (sampled, all) = (names(false), names(true));
        assert_eq!(
            sampled,
            ["cpu.svg", "report.txt", "profile.json", "profile.pb.gz"]
        );
        // The same, then the exact counts' outputs.
        assert_eq!(all[..sampled.len()], sampled);
        assert_eq!(
            all[sampled.len()..],
            ["exact.svg", "exact.txt", "callgrind.out"]
        );
    }
}
