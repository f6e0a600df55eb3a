//! Folded output: collapsed stacks, root first, `a;b;c N` per line, sorted.

use std::io::{self, Write};

use crate::{write_err, Collected, CpuRenderer, Drawn};
use kern_profile_profile::collect::Run;
use kern_profile_profile::folded::Folded;

/// Writes `folded` as collapsed stack lines.
pub fn write_folded(folded: &Folded, out: impl Write) -> io::Result<()> {
    folded.write(out)
}

/// Collapsed stacks of the sampled profile.
pub struct FoldedRenderer;

impl CpuRenderer for FoldedRenderer {
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let folded = run.name(&collected.profile);
        write_folded(&folded, out).map_err(write_err)?;
        Ok(run.summary(&collected.profile, &folded))
    }
}
