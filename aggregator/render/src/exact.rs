//! The exact counts of an `exact=on` recording (see [`crate::exact`]) as a flamegraph,
//! folded stacks or a text report: instructions instead of samples.

use std::io::Write;

use crate::svg::{write_svg, SvgRenderer};
use crate::text::write_report;
use crate::{write_err, Collected, CpuRenderer, Drawn, Needs};
use kern_profile_profile::collect::Run;
use kern_profile_profile::exact::exact_folded;
use kern_profile_profile::folded::Folded;
use kern_profile_profile::options::{Options, OutputFormat};
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::ProfileError;
use rustc_hash::FxHashMap;

/// Exact instruction counts, drawn as `format`.
pub struct ExactRenderer {
    format: OutputFormat,
    svg: SvgRenderer,
    top: usize,
    /// Attributed to the innermost inlined function (else the real one), for the header.
    inline: bool,
}

impl ExactRenderer {
    pub fn new(opts: &Options) -> Self {
        ExactRenderer {
            format: opts.format,
            svg: SvgRenderer::new(opts),
            top: opts.top,
            inline: opts.inline,
        }
    }

    fn header(&self, run: &Run<'_>, folded: &Folded, addresses: usize) -> Vec<String> {
        vec![
            format!(
                "kern-profile exact profile of {}, from {} (exact=on)",
                run.kernel,
                run.input.display()
            ),
            format!(
                "instructions executed: {} at {addresses} distinct addresses; attributed to the {} function",
                folded.total,
                if self.inline {
                    "innermost (inlined)"
                } else {
                    "real (outer)"
                }
            ),
        ]
    }
}

/// Exact counts are the whole run's: no time range.
pub(crate) fn no_time_range(run: &Run<'_>) -> Result<(), ProfileError> {
    if run.filter.time.is_set() {
        return Err(ProfileError::Unsupported(
            "exact counts are totals of the whole run, without time: drop \
             --from-time/--to-time"
                .into(),
        ));
    }
    Ok(())
}

/// The exact counts of the pass's `profile`: an error when a time range is asked (they are
/// the whole run's) or the recording has none.
pub(crate) fn exact_counts<'p>(
    run: &Run<'_>,
    profile: &'p CpuProfile,
) -> Result<&'p FxHashMap<u64, u64>, ProfileError> {
    no_time_range(run)?;
    if !profile.summary.has_exact() {
        return Err(ProfileError::NoExactData {
            path: profile.path.clone(),
        });
    }
    Ok(&profile.summary.exact)
}

impl CpuRenderer for ExactRenderer {
    fn needs(&self) -> Needs {
        Needs::EXACT
    }

    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let exact = exact_counts(run, profile)?;
        let (addresses, filter) = (run.style.addresses, run.filter);
        let folded = exact_folded(exact, &mut run.namer(), addresses, &filter.names);
        match self.format {
            OutputFormat::Folded => folded.write(&mut *out),
            OutputFormat::Text => {
                let header = self.header(run, &folded, exact.len());
                write_report(&folded, &header, self.top, "instructions", &mut *out)
            }
            _ => {
                let params = self.svg.params(
                    || format!("{}: {} instructions (exact)", run.kernel, folded.total),
                    "exact=on: every executed instruction, by function".into(),
                    "instructions",
                );
                write_svg(&folded, &params, &mut *out)
            }
        }
        .map_err(write_err)?;
        Ok(format!(
            "{} instructions executed, in {} functions",
            folded.total,
            folded.lines.len()
        ))
    }
}
