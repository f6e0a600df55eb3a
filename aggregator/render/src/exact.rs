//! The exact counts of an `exact=on` recording (see [`crate::exact`]) as a flamegraph,
//! folded stacks or a text report: instructions instead of samples.

use std::io::Write;

use crate::svg::{write_svg, SvgRenderer};
use crate::text::write_report;
use crate::{write_err, Collected, CpuRenderer, Needs};
use kern_profile_profile::collect::Run;
use kern_profile_profile::exact::exact_folded;
use kern_profile_profile::folded::Folded;
use kern_profile_profile::options::{Options, OutputFormat};
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::ProfileError;

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

/// The run's profile with its exact counts, for the outputs made of them: an error when
/// the file has none, or when a time range is asked (exact counts are the whole run's).
pub(crate) fn collect_exact(run: &mut Run<'_>) -> Result<CpuProfile, ProfileError> {
    no_time_range(run)?;
    let profile = run.collect(run.input, true)?;
    has_exact(&profile)?;
    Ok(profile)
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

pub(crate) fn has_exact(profile: &CpuProfile) -> Result<(), ProfileError> {
    if !profile.summary.has_exact() {
        return Err(ProfileError::NoExactData {
            path: profile.path.clone(),
        });
    }
    Ok(())
}

impl CpuRenderer for ExactRenderer {
    fn render(&self, run: &mut Run<'_>, out: &mut dyn Write) -> Result<String, ProfileError> {
        let profile = collect_exact(run)?;
        self.draw_profile(run, &profile, out)
    }

    fn needs(&self) -> Needs {
        Needs {
            exact: true,
            samples: false,
        }
    }

    fn draw(
        &self,
        run: &mut Run<'_>,
        collected: &mut Collected,
        out: &mut dyn Write,
    ) -> Option<Result<String, ProfileError>> {
        let drawn = no_time_range(run)
            .and_then(|()| has_exact(&collected.profile))
            .and_then(|()| self.draw_profile(run, &collected.profile, out));
        Some(drawn)
    }
}

impl ExactRenderer {
    fn draw_profile(
        &self,
        run: &mut Run<'_>,
        profile: &CpuProfile,
        out: &mut dyn Write,
    ) -> Result<String, ProfileError> {
        let (addresses, filter) = (run.style.addresses, run.filter);
        let folded = exact_folded(
            &profile.summary.exact,
            &mut run.namer(),
            addresses,
            &filter.names,
        );
        match self.format {
            OutputFormat::Folded => folded.write(&mut *out),
            OutputFormat::Text => {
                let header = self.header(run, &folded, profile.summary.exact.len());
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
