//! Folded output: collapsed stacks, root first, `a;b;c N` per line, sorted.

use std::io::{self, Write};

use crate::{write_err, Collected, CpuRenderer};
use kern_profile_profile::collect::Run;
use kern_profile_profile::folded::Folded;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::ProfileError;

/// Writes `folded` as collapsed stack lines.
pub fn write_folded(folded: &Folded, out: impl Write) -> io::Result<()> {
    folded.write(out)
}

/// Collapsed stacks of the sampled profile.
pub struct FoldedRenderer;

impl CpuRenderer for FoldedRenderer {
    fn render(&self, run: &mut Run<'_>, out: &mut dyn Write) -> Result<String, ProfileError> {
        let profile = run.collect(run.input, false)?;
        draw_profile(run, &profile, out)
    }

    fn draw(
        &self,
        run: &mut Run<'_>,
        collected: &mut Collected,
        out: &mut dyn Write,
    ) -> Option<Result<String, ProfileError>> {
        Some(draw_profile(run, &collected.profile, out))
    }
}

fn draw_profile(
    run: &mut Run<'_>,
    profile: &CpuProfile,
    out: &mut dyn Write,
) -> Result<String, ProfileError> {
    let folded = run.name(profile);
    write_folded(&folded, out).map_err(write_err)?;
    Ok(run.summary(profile, &folded))
}
