//! kern-profile's offline aggregator: turns the QEMU plugin's raw samples (or the original C
//! plugin's legacy samples) and the kernel's ELF into flamegraphs, folded stacks, Firefox
//! Profiler profiles and text reports; and Maestro `memtrace` traces into allocation
//! flamegraphs (see [`alloc_cmd`]).
//!
//! The pipeline of [`run_cpu`]:
//! 1. [`symbolize::Symbolizer`] loads the ELF (DWARF, symbol table) and/or a symbol map.
//! 2. [`profile::CpuProfile::collect`] streams the samples, interning each distinct
//!    *address* stack with its count ([`stacks`]): memory follows the distinct stacks.
//! 3. [`folded::Folded::from_counts`] names each distinct stack, each distinct address
//!    symbolized once.
//! 4. An [`output`] renders it.
//!
//! ```no_run
//! use kern_profile::{run_cpu, Options, OutputFormat};
//! let opts = Options { format: OutputFormat::Folded, ..Options::default() };
//! let mut out = Vec::new();
//! let report = run_cpu("raw-data".as_ref(), Some("kernel.elf".as_ref()), &opts, &mut out)?;
//! for w in &report.warnings { eprintln!("warning: {w}"); }
//! # Ok::<(), kern_profile::ProfileError>(())
//! ```

pub mod alloc_cmd;
pub mod boundary;
pub mod counts;
pub mod cpu_list;
mod error;
pub mod exact;
pub mod folded;
pub mod input;
pub mod options;
pub mod output;
pub mod profile;
pub mod progress;
pub mod stacks;
pub mod symbolize;

use std::io::Write;
use std::path::Path;

use kern_profile_format::CpuFormat;

pub use cpu_list::{CpuList, CpuListError};
pub use error::ProfileError;
pub use folded::Folded;
pub use options::{ModeFilter, Options, OutputFormat};
pub use symbolize::{SymbolError, Symbolizer};

use crate::input::CpuInput;
use crate::output::svg::SvgParams;
use crate::profile::{filter_description, input_warnings, sampling_description, CpuProfile};
use crate::stacks::{NameStyle, StackNamer, UNKNOWN_FRAME};

/// What a run did, for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    /// One line: what was written from how many samples.
    pub summary: String,
    /// Things the user should know (each one line).
    pub warnings: Vec<String>,
}

/// The name titles use for the kernel: the ELF's file name, else the symbol map's.
pub fn kernel_name(elf: Option<&Path>, symbols: Option<&Path>) -> String {
    elf.or(symbols).and_then(|p| p.file_name()).map_or_else(
        || "kernel".to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn write_err(source: std::io::Error) -> ProfileError {
    ProfileError::Write {
        what: "the output".into(),
        source,
    }
}

/// Reads the CPU samples of `raw`, symbolizes them with `elf` (and/or `opts.symbols`), and
/// writes `opts.format` to `out`.
pub fn run_cpu(
    raw: &Path,
    elf: Option<&Path>,
    opts: &Options,
    out: &mut dyn Write,
) -> Result<RunReport, ProfileError> {
    let mut sym = Symbolizer::load(elf, opts.symbols.as_deref())?;
    for u in &opts.user_binaries {
        sym.add_user_binary(u)?;
    }
    let kernel = kernel_name(elf, opts.symbols.as_deref());
    let mut warnings = sym.warnings();

    if opts.format == OutputFormat::Firefox {
        if opts.exact || opts.diff_base.is_some() {
            return Err(ProfileError::Unsupported(
                "the firefox format shows sampled profiles only: drop --exact/--diff, or pick \
                 -f svg|folded|text"
                    .into(),
            ));
        }
        let input = CpuInput::open(raw, opts.progress)?;
        if let Some(h) = &input.header {
            sym.check_arch(h.arch)?;
        }
        let format = input.format;
        let (summary, kept) =
            output::firefox::write_firefox(input, &mut sym, opts, &kernel, &mut *out)?;
        warnings.extend(input_warnings(raw, format, &summary));
        return Ok(RunReport {
            summary: format!(
                "{kept} of {} samples in a Firefox profile, one thread per vCPU",
                summary.samples
            ),
            warnings,
        });
    }

    // The text report has its own per-vCPU lines; `cpu N` frames would only skew totals.
    let per_cpu_lines = opts.per_cpu;
    let mut eff = opts.clone();
    if opts.format == OutputFormat::Text {
        eff.per_cpu = false;
    }
    let opts = &eff;
    let profile = CpuProfile::collect(raw, &mut sym, opts)?;
    warnings.extend(profile.warnings());

    // An `exact=only` recording holds no samples: its exact counts are the profile.
    let exact_only = profile
        .header
        .as_ref()
        .is_some_and(|h| h.sampling == kern_profile_format::SamplingMode::Off);
    if opts.exact || exact_only {
        if opts.diff_base.is_some() {
            return Err(ProfileError::Unsupported(
                "--exact and --diff do not combine".into(),
            ));
        }
        return write_exact(&profile, &mut sym, &kernel, opts, out, warnings);
    }

    let inline_suffix = opts.format != OutputFormat::Text;
    let style = NameStyle::from_options(opts, inline_suffix);

    if let Some(base_path) = &opts.diff_base {
        if !matches!(opts.format, OutputFormat::Svg | OutputFormat::Folded) {
            return Err(ProfileError::Unsupported(
                "--diff writes svg or folded output".into(),
            ));
        }
        let base = CpuProfile::collect(base_path, &mut sym, opts)?;
        warnings.extend(base.warnings());
        let mut namer = StackNamer::new(&mut sym, style);
        let this_f = Folded::from_counts(&profile.counts, &mut namer);
        let base_f = Folded::from_counts(&base.counts, &mut namer);
        warnings.extend(unknown_warning(
            &this_f,
            &kernel,
            opts,
            Some(profile.format),
        ));
        if opts.format == OutputFormat::Folded {
            output::diff::write_diff_folded(&base_f, &this_f, opts.diff_normalize, &mut *out)
                .map_err(write_err)?;
        } else {
            let params = SvgParams {
                title: opts.title.clone().unwrap_or_else(|| {
                    format!(
                        "{kernel}: {} samples vs {} in the base",
                        profile.kept, base.kept
                    )
                }),
                subtitle: Some(format!(
                    "{} against {}: red grew, blue shrank{}",
                    file_name(&profile.path),
                    file_name(base_path),
                    if opts.diff_normalize {
                        " (base scaled to this run)"
                    } else {
                        ""
                    }
                )),
                reverse: opts.reverse,
                count_name: "samples".into(),
            };
            output::diff::write_diff_svg(&base_f, &this_f, opts.diff_normalize, &params, &mut *out)
                .map_err(write_err)?;
        }
        return Ok(RunReport {
            summary: format!(
                "differential of {} samples against {} base samples",
                profile.kept, base.kept
            ),
            warnings,
        });
    }

    let mut namer = StackNamer::new(&mut sym, style);
    let folded = Folded::from_counts(&profile.counts, &mut namer);
    warnings.extend(unknown_warning(
        &folded,
        &kernel,
        opts,
        Some(profile.format),
    ));
    match opts.format {
        OutputFormat::Folded => output::folded::write_folded(&folded, &mut *out),
        OutputFormat::Text => {
            let split = profile.user_samples_read > 0 || sym.has_user_binaries();
            let header = profile.describe(&kernel, opts, split, per_cpu_lines);
            output::text::write_report(&folded, &header, opts.top, "samples", &mut *out)
        }
        _ => {
            let params = SvgParams {
                title: opts
                    .title
                    .clone()
                    .unwrap_or_else(|| format!("{kernel}: {} samples", profile.kept)),
                subtitle: subtitle(&profile, opts),
                reverse: opts.reverse,
                count_name: "samples".into(),
            };
            output::svg::write_svg(&folded, &params, &mut *out)
        }
    }
    .map_err(write_err)?;
    Ok(RunReport {
        summary: format!(
            "{} of {} samples, {} distinct address stacks named as {} stacks, {} addresses \
             symbolized",
            profile.kept,
            profile.summary.samples,
            profile.counts.distinct(),
            folded.lines.len(),
            sym.resolved()
        ),
        warnings,
    })
}

fn subtitle(p: &CpuProfile, opts: &Options) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(h) = &p.header {
        parts.push(sampling_description(h.sampling));
        parts.push(format!(
            "{} vCPU{}",
            h.vcpus,
            if h.vcpus == 1 { "" } else { "s" }
        ));
    } else {
        parts.push("legacy samples".to_string());
    }
    let f = filter_description(opts);
    if !f.is_empty() {
        parts.push(f);
    }
    if opts.reverse {
        parts.push("reversed: leaves first".into());
    }
    Some(parts.join(" · "))
}

/// A warning when most samples fall in no known function: probably the wrong ELF.
fn unknown_warning(
    folded: &Folded,
    kernel: &str,
    opts: &Options,
    format: Option<CpuFormat>,
) -> Option<String> {
    if opts.addresses || folded.total == 0 {
        return None;
    }
    let unknown: u64 = folded
        .lines
        .iter()
        .filter(|(s, _)| s.rsplit(';').next() == Some(UNKNOWN_FRAME))
        .map(|(_, n)| n)
        .sum();
    let share = output::text::pct(unknown, folded.total);
    (share > 50.0).then(|| {
        let legacy = if format == Some(CpuFormat::Legacy) {
            " (RAW has no kern-profile header, so it was read in the original plugin's \
             legacy format: is it a CPU sample file at all?)"
        } else {
            ""
        };
        format!(
            "{share:.0}% of the samples are in no function {kernel} knows: is it the very \
             kernel build that ran?{legacy}"
        )
    })
}

fn write_exact(
    profile: &CpuProfile,
    sym: &mut Symbolizer,
    kernel: &str,
    opts: &Options,
    out: &mut dyn Write,
    warnings: Vec<String>,
) -> Result<RunReport, ProfileError> {
    if !profile.summary.has_exact {
        return Err(ProfileError::NoExactData {
            path: profile.path.clone(),
        });
    }
    let style = NameStyle::from_options(opts, opts.format != OutputFormat::Text);
    let mut namer = StackNamer::new(sym, style);
    let folded = exact::exact_folded(&profile.summary.exact, &mut namer, opts.addresses);
    match opts.format {
        OutputFormat::Folded => output::folded::write_folded(&folded, &mut *out),
        OutputFormat::Text => {
            let mut header = vec![format!(
                "kern-profile exact profile of {kernel}, from {} (exact=on)",
                profile.path.display()
            )];
            header.push(format!(
                "instructions executed: {} at {} distinct addresses; attributed to the {} function",
                folded.total,
                profile.summary.exact.len(),
                if opts.inline {
                    "innermost (inlined)"
                } else {
                    "real (outer)"
                }
            ));
            output::text::write_report(&folded, &header, opts.top, "instructions", &mut *out)
        }
        _ => {
            let params = SvgParams {
                title: opts
                    .title
                    .clone()
                    .unwrap_or_else(|| format!("{kernel}: {} instructions (exact)", folded.total)),
                subtitle: Some("exact=on: every executed instruction, by function".into()),
                reverse: opts.reverse,
                count_name: "instructions".into(),
            };
            output::svg::write_svg(&folded, &params, &mut *out)
        }
    }
    .map_err(write_err)?;
    Ok(RunReport {
        summary: format!(
            "{} instructions executed, in {} functions",
            folded.total,
            folded.lines.len()
        ),
        warnings,
    })
}
