//! The collect stage of a CPU run, as renderers call it: sample files read into interned
//! address stacks ([`CpuProfile`]), then named ([`Folded`]), with what went wrong noted as
//! [`Warning`]s.

use std::path::Path;

use kern_profile_format::SamplingMode;

use crate::error::ProfileError;
use crate::filter::SampleFilter;
use crate::folded::Folded;
use crate::input::CpuInput;
use crate::off_cpu;
use crate::profile::{CpuProfile, SampleSink};
use crate::stacks::{synthetic_roots, NameStyle, StackNamer};
use crate::symbolize::Symbolizer;
use crate::warning::Warning;

/// What a renderer draws from: a job's input, filter and naming style, the loaded
/// symbols, and the warnings so far.
pub struct Run<'a> {
    pub input: &'a Path,
    pub progress: bool,
    pub filter: &'a SampleFilter,
    pub style: NameStyle,
    /// The kernel's name, for titles.
    pub kernel: String,
    pub sym: &'a mut Symbolizer,
    pub warnings: Vec<Warning>,
}

impl<'a> Run<'a> {
    /// A run over `input`, its symbols' loading warnings first; `kernel` names the kernel
    /// in titles.
    pub fn new(
        input: &'a Path,
        progress: bool,
        filter: &'a SampleFilter,
        style: NameStyle,
        kernel: String,
        sym: &'a mut Symbolizer,
    ) -> Self {
        let warnings = sym.warnings().into_iter().map(Warning::Symbols).collect();
        Run {
            input,
            progress,
            filter,
            style,
            kernel,
            sym,
            warnings,
        }
    }

    /// Opens `path` for streaming, checking its architecture against the symbols, and that
    /// its samples have times when a time range is asked for.
    pub fn open(&mut self, path: &Path) -> Result<CpuInput, ProfileError> {
        let input = CpuInput::open(path, self.progress)?;
        if let Some(h) = &input.header {
            self.sym.check_arch(h.arch)?;
            // Neither samples nor exact counts: the plugin only hooked allocators.
            if h.sampling == SamplingMode::Off && !h.exact {
                return Err(ProfileError::AllocationsOnly {
                    path: path.to_path_buf(),
                });
            }
        }
        if input.header.is_none() && self.filter.time.is_set() {
            return Err(ProfileError::Unsupported(format!(
                "{} is a legacy file (the original C plugin's): its samples have no time, so \
                 --from-time/--to-time cannot apply",
                path.display()
            )));
        }
        Ok(input)
    }

    /// Whether the input is an `exact=only` recording: exact counts and no samples, as its
    /// header says (the header only is read here).
    pub fn exact_only(&self) -> Result<bool, ProfileError> {
        let input = CpuInput::open(self.input, false)?;
        Ok(input
            .header
            .is_some_and(|h| h.sampling == SamplingMode::Off && h.exact))
    }

    /// Collects the samples of `path` (exact counts too with `want_exact`): the samples the
    /// filter keeps, then, with `--focus`/`--exclude`, the distinct stacks their names keep.
    pub fn collect(&mut self, path: &Path, want_exact: bool) -> Result<CpuProfile, ProfileError> {
        let input = self.open(path)?;
        self.collect_from(input, want_exact, &mut [])
    }

    /// [`Run::collect`] of an input already open, feeding `sinks` every kept sample on the
    /// way (one pass for several outputs).
    pub fn collect_from(
        &mut self,
        input: CpuInput,
        want_exact: bool,
        sinks: &mut [&mut dyn SampleSink],
    ) -> Result<CpuProfile, ProfileError> {
        let mut profile =
            CpuProfile::collect_into(input, self.sym, self.filter, want_exact, sinks)?;
        let sym = &mut *self.sym;
        profile
            .summary
            .off_cpu
            .forget_exits(|addrs| off_cpu::exit_path(sym, addrs));
        if let Some(what) = self.filter.task_options() {
            let tasks = &profile.summary.tasks;
            if !tasks.any() {
                return Err(ProfileError::NoTasks {
                    path: profile.path.clone(),
                    what,
                });
            }
            let unmatched = self.filter.task_rules.unmatched(tasks);
            self.warnings.extend(
                unmatched
                    .into_iter()
                    .map(|(option, value)| Warning::TaskFilterMatchesNothing { option, value }),
            );
        }
        if self.filter.names.is_active() {
            let rules = &self.filter.names;
            let mut namer = StackNamer::new(self.sym, self.style).of_profile(&profile);
            profile.retain_stacks(|key, frames| {
                namer.name_key(key, frames);
                rules.keeps(frames, synthetic_roots(key))
            });
        }
        self.warnings.extend(profile.warnings());
        self.warnings.extend(profile.spaces.warnings(self.sym));
        let sections = self.sym.elf().map_or(&[][..], |e| &e.unwind_sections[..]);
        self.warnings.extend(Warning::shallow_walks(
            &profile.walk_tally,
            &self.kernel,
            sections,
        ));
        Ok(profile)
    }

    /// A namer for the job's style.
    pub fn namer(&mut self) -> StackNamer<'_> {
        StackNamer::new(self.sym, self.style)
    }

    /// A namer for `profile`'s stacks: user programs named by address space.
    pub fn namer_for(&mut self, profile: &CpuProfile) -> StackNamer<'_> {
        self.namer().of_profile(profile)
    }

    /// Names `profile`'s stacks; warns when most fall in no known function, and when user
    /// programs overlapped with nothing to tell which ran.
    pub fn name(&mut self, profile: &CpuProfile) -> Folded {
        let filter = self.filter;
        let mut namer = self.namer_for(profile);
        let folded = Folded::from_counts(&profile.counts, &mut namer, &filter.names);
        let overlap = namer.overlap_warning();
        self.warnings.extend(overlap);
        let unknown =
            Warning::mostly_unknown(&folded, &self.kernel, self.style.addresses, profile.format);
        self.warnings.extend(unknown);
        let mut frames = Vec::new();
        for s in &profile.stuck {
            self.namer_for(profile).name_key(&s.key, &mut frames);
            self.warnings.push(Warning::StuckVcpu {
                vcpu: s.vcpu,
                share: s.share,
                samples: s.samples,
                stack: frames.iter().map(|f| &**f).collect::<Vec<_>>().join(";"),
            });
        }
        folded
    }

    /// The usual one-line summary of a sampled profile.
    pub fn summary(&self, profile: &CpuProfile, folded: &Folded) -> String {
        format!(
            "{} of {} samples, {} distinct address stacks named as {} stacks, {} addresses \
             symbolized",
            profile.kept,
            profile.summary.tally.samples,
            profile.counts.distinct(),
            folded.lines.len(),
            self.sym.resolved()
        )
    }
}
