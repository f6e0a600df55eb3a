//! Differential flamegraphs (inferno's `differential`): this run against a base run of the
//! same kernel. Frames are as wide as in this run and coloured by the change: red grew, blue
//! shrank.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::svg::{write_svg_lines, SvgParams, SvgRenderer};
use crate::{file_name, write_err, Collected, CpuRenderer, Drawn, Needs};
use kern_profile_profile::collect::Run;
use kern_profile_profile::folded::Folded;
use kern_profile_profile::options::{Options, OutputFormat};

/// The two-count folded lines `stack BASE THIS`, sorted.
pub fn diff_lines(base: &Folded, this: &Folded, normalize: bool) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let opts = inferno::differential::Options {
        normalize,
        strip_hex: false,
    };
    inferno::differential::from_readers(
        opts,
        base.to_bytes().as_slice(),
        this.to_bytes().as_slice(),
        &mut out,
    )?;
    // inferno emits its hash map's order: sort, for stable output.
    let text = String::from_utf8_lossy(&out);
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    lines.sort_unstable();
    let mut sorted = Vec::with_capacity(out.len());
    for l in lines {
        sorted.extend_from_slice(l.as_bytes());
        sorted.push(b'\n');
    }
    Ok(sorted)
}

/// Writes the two-count folded lines.
pub fn write_diff_folded(
    base: &Folded,
    this: &Folded,
    normalize: bool,
    mut out: impl Write,
) -> io::Result<()> {
    out.write_all(&diff_lines(base, this, normalize)?)
}

/// Draws the differential flamegraph.
pub fn write_diff_svg(
    base: &Folded,
    this: &Folded,
    normalize: bool,
    params: &SvgParams,
    out: impl Write,
) -> io::Result<()> {
    let lines = diff_lines(base, this, normalize)?;
    let text = String::from_utf8_lossy(&lines);
    write_svg_lines(text.lines().filter(|l| !l.is_empty()), params, out)
}

/// This run against a base run: two-count folded lines, or a differential flamegraph.
pub struct DiffRenderer {
    base: PathBuf,
    /// Scale the base to this run's sample count.
    normalize: bool,
    /// `None`: folded lines.
    svg: Option<SvgRenderer>,
}

impl DiffRenderer {
    pub fn new(base: &Path, opts: &Options) -> Self {
        DiffRenderer {
            base: base.to_path_buf(),
            normalize: opts.diff_normalize,
            svg: (opts.format == OutputFormat::Svg).then(|| SvgRenderer::new(opts)),
        }
    }

    fn subtitle(&self, this: &Path) -> String {
        format!(
            "{} against {}: red grew, blue shrank{}",
            file_name(this),
            file_name(&self.base),
            if self.normalize {
                " (base scaled to this run)"
            } else {
                ""
            }
        )
    }
}

impl CpuRenderer for DiffRenderer {
    fn needs(&self) -> Needs {
        Needs {
            base: Some(self.base.clone()),
            ..Needs::default()
        }
    }

    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let this = &collected.profile;
        let base = collected
            .base
            .as_ref()
            .expect("the pass reads the base it needs");
        let filter = run.filter;
        let base_f = Folded::from_counts(&base.counts, &mut run.namer_for(base), &filter.names);
        let this_f = run.name(this);
        match &self.svg {
            None => write_diff_folded(&base_f, &this_f, self.normalize, &mut *out),
            Some(svg) => {
                let params = svg.params(
                    || {
                        format!(
                            "{}: {} samples vs {} in the base",
                            run.kernel, this.kept, base.kept
                        )
                    },
                    self.subtitle(&this.path),
                    "samples",
                );
                write_diff_svg(&base_f, &this_f, self.normalize, &params, &mut *out)
            }
        }
        .map_err(write_err)?;
        Ok(format!(
            "differential of {} samples against {} base samples",
            this.kept, base.kept
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folded_lines;

    #[test]
    fn two_counts_per_stack() {
        let base = folded_lines(&[("a;b", 2), ("a;c", 2)]);
        let this = folded_lines(&[("a;b", 5)]);
        let out = String::from_utf8(diff_lines(&base, &this, false).unwrap()).unwrap();
        assert!(out.contains("a;b 2 5"), "{out}");
        assert!(out.contains("a;c 2 0"), "{out}");
    }
}
