//! The outputs drawn from every kept sample at its time (Firefox, trace events): one
//! [`CpuRenderer`] around their own drawing, reading the input itself or taking the samples
//! a shared pass kept.

use std::io::Write;

use kern_profile_profile::collect::Run;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::timed::TimedSamples;
use kern_profile_profile::ProfileError;

use crate::{Collected, CpuRenderer, Needs};

/// Draws a profile from its samples in time order.
pub trait DrawTimed {
    /// Names and writes `samples` (kept by the pass over `profile`'s file); returns the
    /// one-line summary for the user.
    fn draw_samples(
        &self,
        run: &mut Run<'_>,
        profile: &CpuProfile,
        samples: &TimedSamples,
        out: &mut dyn Write,
    ) -> Result<String, ProfileError>;
}

/// A [`DrawTimed`] as an output.
pub struct Timed<D>(pub D);

impl<D: DrawTimed> CpuRenderer for Timed<D> {
    fn render(&self, run: &mut Run<'_>, out: &mut dyn Write) -> Result<String, ProfileError> {
        let input = run.open(run.input)?;
        let mut samples = TimedSamples::default();
        let profile =
            CpuProfile::collect_into(input, run.sym, run.filter, false, &mut [&mut samples])?;
        self.0.draw_samples(run, &profile, &samples, out)
    }

    fn needs(&self) -> Needs {
        Needs {
            exact: false,
            samples: true,
        }
    }

    fn draw(
        &self,
        run: &mut Run<'_>,
        collected: &mut Collected,
        out: &mut dyn Write,
    ) -> Option<Result<String, ProfileError>> {
        let none = TimedSamples::default();
        let samples = collected.samples.as_ref().unwrap_or(&none);
        Some(self.0.draw_samples(run, &collected.profile, samples, out))
    }
}
