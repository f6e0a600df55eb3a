//! Interactive flamegraphs through inferno, with fixed options so that the same input
//! always gives the same bytes.

use std::io::{self, Write};

use inferno::flamegraph::{self, color::MultiPalette, Direction, Palette};

use crate::describe::subtitle;
use crate::{write_err, Collected, CpuRenderer, Drawn};
use kern_profile_profile::collect::Run;
use kern_profile_profile::folded::Folded;
use kern_profile_profile::options::Options;

/// What the flamegraph says around its frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SvgParams {
    pub title: String,
    pub subtitle: Option<String>,
    /// Reversed stacks, drawn as an icicle: leaves on top, their callers below.
    pub reverse: bool,
    /// What a frame's count is: `samples`, `instructions`, `bytes`…
    pub count_name: String,
}

/// inferno's options for `p`: Rust palette, colours hashed from names (deterministic).
pub fn inferno_options(p: &SvgParams) -> flamegraph::Options<'static> {
    let mut o = flamegraph::Options::default();
    o.colors = Palette::Multi(MultiPalette::Rust);
    o.hash = true;
    o.title = p.title.clone();
    o.subtitle = p.subtitle.clone();
    o.count_name = p.count_name.clone();
    o.name_type = "Function:".to_string();
    if p.reverse {
        o.reverse_stack_order = true;
        o.direction = Direction::Inverted;
    }
    o
}

/// Draws `folded` as an SVG flamegraph. An empty profile still gives a valid SVG saying so.
pub fn write_svg(folded: &Folded, p: &SvgParams, out: impl Write) -> io::Result<()> {
    let lines = folded.line_strings();
    write_svg_lines(lines.iter().map(String::as_str), p, out)
}

/// Draws already-formatted folded lines (one or two counts each).
pub fn write_svg_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    p: &SvgParams,
    mut out: impl Write,
) -> io::Result<()> {
    let lines: Vec<&str> = lines.into_iter().collect();
    if lines.is_empty() {
        return write_empty(p, &mut out);
    }
    let mut o = inferno_options(p);
    flamegraph::from_lines(&mut o, lines, out)
}

/// inferno refuses an empty input; say "no samples" in a small valid SVG instead.
fn write_empty(p: &SvgParams, out: &mut impl Write) -> io::Result<()> {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    write!(
        out,
        concat!(
            "<?xml version=\"1.0\" standalone=\"no\"?>\n",
            "<svg version=\"1.1\" width=\"1200\" height=\"80\" xmlns=\"http://www.w3.org/2000/svg\">\n",
            "<text x=\"600\" y=\"24\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"17\">{}</text>\n",
            "<text x=\"600\" y=\"56\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"12\">no {} to draw</text>\n",
            "</svg>\n"
        ),
        esc(&p.title),
        esc(&p.count_name)
    )
}

/// The flamegraph of the sampled profile.
pub struct SvgRenderer {
    /// `None`: "`<kernel>`: `<N>` samples".
    pub title: Option<String>,
    pub reverse: bool,
}

impl SvgRenderer {
    pub fn new(opts: &Options) -> Self {
        SvgRenderer {
            title: opts.title.clone(),
            reverse: opts.reverse,
        }
    }

    /// Parameters with this renderer's title, or `default_title` when none was given.
    pub fn params(
        &self,
        default_title: impl FnOnce() -> String,
        subtitle: String,
        count_name: &str,
    ) -> SvgParams {
        SvgParams {
            title: self.title.clone().unwrap_or_else(default_title),
            subtitle: Some(subtitle),
            reverse: self.reverse,
            count_name: count_name.into(),
        }
    }
}

impl CpuRenderer for SvgRenderer {
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let folded = run.name(profile);
        let params = self.params(
            || format!("{}: {} samples", run.kernel, profile.kept),
            subtitle(profile, run.filter, self.reverse),
            "samples",
        );
        write_svg(&folded, &params, out).map_err(write_err)?;
        Ok(run.summary(profile, &folded))
    }
}
