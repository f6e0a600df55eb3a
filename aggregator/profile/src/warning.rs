//! Things a run tells the user besides its output, as data; their wording is all here (the
//! [`Display`](fmt::Display) impl), one line each.

use std::fmt;
use std::path::PathBuf;

use kern_profile_format::{CpuFormat, Truncation};

use crate::folded::Folded;
use crate::input::ReadSummary;
use crate::off_cpu::SwitchProblem;
use crate::stacks::UNKNOWN_FRAME;
use crate::symbolize::SymbolWarning;

/// One warning of a CPU or allocation run.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// A symbol source was only partly usable (unreadable DWARF…).
    Symbols(SymbolWarning),
    /// The input ends inside a record; everything before it was used.
    Truncated { path: PathBuf, at: Truncation },
    /// A raw file without its statistics record: QEMU stopped before the plugin finished.
    NoStatistics { path: PathBuf },
    /// The plugin dropped samples (its writer fell behind).
    Dropped {
        path: PathBuf,
        dropped: u64,
        total: u64,
    },
    /// The statistics record and the file disagree on the sample count.
    StatisticsMismatch {
        path: PathBuf,
        counted: u64,
        read: u64,
    },
    /// Records of kinds this version does not know were skipped.
    UnknownRecords { path: PathBuf, count: u64 },
    /// Legacy samples without any address were skipped.
    EmptySamples { path: PathBuf, count: u64 },
    /// The input holds no samples (nor exact counts).
    NoSamples { path: PathBuf },
    /// Most samples are in no known function: probably the wrong ELF. `legacy`: the file was
    /// read in the legacy format (perhaps it is no sample file at all).
    MostlyUnknown {
        share: f64,
        kernel: String,
        legacy: bool,
    },
    /// Lenient allocation mode skipped unreadable regions.
    SkippedRegions {
        path: PathBuf,
        regions: usize,
        bytes: u64,
        first_offset: u64,
    },
    /// A memtrace without any allocator operation.
    NoAllocations { path: PathBuf },
    /// An address space's recorded code matches none of the `--user` programs: its user
    /// frames are left unnamed.
    SpaceMatchesNoProgram { space: String },
    /// An address space's recorded code matches several `--user` programs (the same bytes at
    /// every recorded address): named from the first of them.
    SpaceMatchesSeveral {
        space: String,
        programs: Vec<String>,
    },
    /// User programs overlap in memory and the recording did not say which ran (no address
    /// spaces or code bytes): `addresses` sampled addresses were named from the first given.
    ProgramsOverlap {
        programs: Vec<String>,
        addresses: u64,
        /// Why the recording could not tell: no address space, or no code recorded in one.
        why: String,
    },
    /// Most kernel stacks were walked by frame pointers to at most one caller, and the
    /// kernel's ELF has unwind tables the plugin was not given: a kernel built without
    /// frame pointers, whose stacks the tables would walk whole.
    ShallowFramePointerWalks {
        /// Addresses per stack, the sampled pc included.
        mean_depth: f64,
        samples: u64,
        kernel: String,
        /// The ELF's unwind sections (`.orc_unwind`, `.eh_frame`, `.debug_frame`).
        sections: Vec<&'static str>,
    },
    /// An output over time holds each vCPU's every `stride`th kept sample, `held` of
    /// `total`, each weighing `stride`: more than `--timeline-samples` (`cap`).
    TimelineThinned {
        output: &'static str,
        held: u64,
        total: u64,
        stride: u64,
        cap: u64,
    },
    /// A `--task` or `--process` value that names no task of the recording.
    TaskFilterMatchesNothing { option: &'static str, value: String },
    /// Task-switch records that do not fit what came before them (counted and skipped over).
    BadSwitches {
        path: PathBuf,
        problem: SwitchProblem,
        count: u64,
    },
    /// A vCPU never left one stack while others ran (a failed bring-up, spinning).
    StuckVcpu {
        vcpu: u32,
        share: f64,
        samples: u64,
        /// The stack, root first, `;`-separated.
        stack: String,
    },
}

impl Warning {
    /// What reading a CPU sample file found wrong with it.
    pub fn of_input(path: &std::path::Path, format: CpuFormat, read: &ReadSummary) -> Vec<Warning> {
        let path = || path.to_path_buf();
        let s = &read.tally;
        let mut w = Vec::new();
        if let Some(t) = &s.truncation {
            w.push(Warning::Truncated {
                path: path(),
                at: *t,
            });
        } else if format == CpuFormat::Raw && s.stats.is_none() {
            w.push(Warning::NoStatistics { path: path() });
        }
        if let Some(st) = &s.stats {
            if st.dropped > 0 {
                w.push(Warning::Dropped {
                    path: path(),
                    dropped: st.dropped,
                    total: st.dropped.saturating_add(st.samples),
                });
            }
            if st.samples != s.samples && s.truncation.is_none() {
                w.push(Warning::StatisticsMismatch {
                    path: path(),
                    counted: st.samples,
                    read: s.samples,
                });
            }
        }
        if s.unknown_records > 0 {
            w.push(Warning::UnknownRecords {
                path: path(),
                count: s.unknown_records,
            });
        }
        if read.empty_samples > 0 {
            w.push(Warning::EmptySamples {
                path: path(),
                count: read.empty_samples,
            });
        }
        w.extend(read.off_cpu.problems().into_iter().map(|(problem, count)| {
            Warning::BadSwitches {
                path: path(),
                problem,
                count,
            }
        }));
        // An `exact=only` recording holds exact counts instead.
        if s.samples == 0 && !read.has_exact() {
            w.push(Warning::NoSamples { path: path() });
        }
        w
    }

    /// [`Warning::ShallowFramePointerWalks`] when most kernel stacks were walked by frame
    /// pointers to at most one caller while the kernel's ELF has unwind tables.
    pub fn shallow_walks(
        walks: &crate::walk_tally::WalkTally,
        kernel: &str,
        sections: &[&'static str],
    ) -> Option<Warning> {
        let mean_depth = walks.mostly_shallow()?;
        (!sections.is_empty()).then(|| Warning::ShallowFramePointerWalks {
            mean_depth,
            samples: walks.samples,
            kernel: kernel.to_string(),
            sections: sections.to_vec(),
        })
    }

    /// [`Warning::MostlyUnknown`] when more than half of `folded` ends in `[unknown]` (never
    /// when unknown addresses are shown as such).
    pub fn mostly_unknown(
        folded: &Folded,
        kernel: &str,
        addresses: bool,
        format: CpuFormat,
    ) -> Option<Warning> {
        if addresses || folded.total == 0 {
            return None;
        }
        let unknown: u64 = folded
            .lines
            .iter()
            .filter(|(s, _)| s.rsplit(';').next() == Some(UNKNOWN_FRAME))
            .fold(0u64, |t, (_, n)| t.saturating_add(*n));
        let share = crate::percent::pct(unknown, folded.total);
        (share > 50.0).then(|| Warning::MostlyUnknown {
            share,
            kernel: kernel.to_string(),
            legacy: format == CpuFormat::Legacy,
        })
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Symbols(w) => w.fmt(f),
            Warning::Truncated { path, at } => write!(f, "{}: {at}", path.display()),
            Warning::NoStatistics { path } => write!(
                f,
                "{} has no statistics record: QEMU was stopped before the plugin finished \
                 (the samples are valid; dropped samples and unwind stops are not known)",
                path.display()
            ),
            Warning::Dropped {
                path,
                dropped,
                total,
            } => write!(
                f,
                "{}: the plugin dropped {dropped} of {total} samples (its writer fell behind)",
                path.display()
            ),
            Warning::StatisticsMismatch {
                path,
                counted,
                read,
            } => write!(
                f,
                "{}: the statistics record counts {counted} samples but the file holds {read}",
                path.display()
            ),
            Warning::UnknownRecords { path, count } => write!(
                f,
                "{}: skipped {count} records of unknown kinds (written by a newer plugin?)",
                path.display()
            ),
            Warning::EmptySamples { path, count } => write!(
                f,
                "{}: skipped {count} samples without any address",
                path.display()
            ),
            Warning::NoSamples { path } => write!(f, "{} holds no samples", path.display()),
            Warning::TimelineThinned {
                output,
                held,
                total,
                stride,
                cap,
            } => write!(
                f,
                "the {output} holds each vCPU's every {stride}th sample, {held} of {total}, each weighing {stride}: the recording has more than --timeline-samples {cap} (the default keeps a timeline a browser opens; 0 keeps every sample); the flamegraph, the report and pprof count them all"
            ),
            Warning::ShallowFramePointerWalks {
                mean_depth,
                samples,
                kernel,
                sections,
            } => write!(
                f,
                "the {samples} kernel stacks were walked by frame pointers to a mean depth \
                 of {mean_depth:.1} frames, and {kernel} has unwind tables ({}): a kernel built \
                 without frame pointers, whose stacks end early although the report calls \
                 them whole. Record with `kern-profile record`, or give the plugin the \
                 kernel (`-plugin kern-profile.so,elf={kernel},...`), and its stacks are \
                 walked by the tables",
                sections.join(", ")
            ),
            Warning::MostlyUnknown {
                share,
                kernel,
                legacy,
            } => {
                write!(
                    f,
                    "{share:.0}% of the samples are in no function {kernel} knows: is it the \
                     very kernel build that ran?"
                )?;
                if *legacy {
                    f.write_str(
                        " (RAW has no kern-profile header, so it was read in the original \
                         plugin's legacy format: is it a CPU sample file at all?)",
                    )?;
                }
                Ok(())
            }
            Warning::SkippedRegions {
                path,
                regions,
                bytes,
                first_offset,
            } => write!(
                f,
                "{}: skipped {regions} unreadable regions ({bytes} bytes; --lenient), the \
                 first at byte offset {first_offset}",
                path.display()
            ),
            Warning::NoAllocations { path } => {
                write!(f, "{} holds no allocator operation", path.display())
            }
            Warning::SpaceMatchesNoProgram { space } => write!(
                f,
                "address space {space}: its code matches none of the --user programs (another \
                 program ran there, or a page directory was reused by several): its user \
                 frames are left unnamed"
            ),
            Warning::SpaceMatchesSeveral { space, programs } => write!(
                f,
                "address space {space}: its recorded code matches {} alike; named from {}, \
                 the first given (which may be the wrong one)",
                programs.join(", "),
                programs.first().map_or("", String::as_str)
            ),
            Warning::ProgramsOverlap {
                programs,
                addresses,
                why,
            } => write!(
                f,
                "the --user programs {} overlap in memory and the recording does not say \
                 which one ran ({why}): {addresses} sampled addresses were named from the \
                 first of them that holds them, which may be the wrong one",
                programs.join(", ")
            ),
            Warning::TaskFilterMatchesNothing { option, value } => write!(
                f,
                "{option} {value} matches no task of the recording (no {} has that name or id)",
                if *option == "--task" {
                    "thread"
                } else {
                    "process"
                }
            ),
            // Counted in tasks, not records.
            Warning::BadSwitches {
                path,
                problem: SwitchProblem::UnknownAddress,
                count,
            } => write!(
                f,
                "{}: {count} tasks of its task switches {}",
                path.display(),
                SwitchProblem::UnknownAddress
            ),
            Warning::BadSwitches {
                path,
                problem,
                count,
            } => write!(
                f,
                "{}: {count} task-switch records {problem}",
                path.display()
            ),
            Warning::StuckVcpu {
                vcpu,
                share,
                samples,
                stack,
            } => write!(
                f,
                "vCPU {vcpu} never left one stack ({:.1}% of its {samples} samples in {stack}): \
                 if that is not its workload it was stuck, e.g. a CPU whose bring-up failed \
                 (README.md, \"Profiling Linux\", says what to do when the guest's timing \
                 breaks under the plugin)",
                share * 100.0
            ),
        }
    }
}
