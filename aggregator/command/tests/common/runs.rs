//! CPU profiles made by the command's library, as the tests ask for them: no progress bar.

use std::path::Path;

use kern_profile::{run_cpu, Options, OutputFormat, ProfileError, RunReport};

/// The default options but the output `format`.
pub fn in_format(format: OutputFormat) -> Options {
    Options {
        format,
        ..Options::default()
    }
}

/// `run_cpu` of `raw` against `elf` with `opts`, without a progress bar: its output and
/// report.
pub fn cpu(
    raw: &Path,
    elf: Option<&Path>,
    opts: &Options,
) -> Result<(Vec<u8>, RunReport), ProfileError> {
    let opts = Options {
        progress: false,
        ..opts.clone()
    };
    let mut out = Vec::new();
    let report = run_cpu(raw, elf, &opts, &mut out)?;
    Ok((out, report))
}

/// The lines of an output, sorted: folded stacks compared whatever their order.
pub fn sorted_lines(out: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort_unstable();
    lines
}

/// [`cpu`] on `tests/data/<dir>/<raw>`, a run recorded with the real plugin, against the
/// `kernel.elf` beside it; such a run gives no warning.
pub fn recorded(dir: &str, raw: &str, opts: &Options) -> Result<Vec<u8>, ProfileError> {
    let data = super::data(dir);
    let (out, report) = cpu(&data.join(raw), Some(&data.join("kernel.elf")), opts)?;
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    Ok(out)
}

/// [`recorded`]'s output as text, the data directory's path in it written `$DATA` so that
/// golden files hold no checkout's path.
pub fn recorded_text(dir: &str, raw: &str, opts: &Options) -> String {
    let out = recorded(dir, raw, opts).unwrap_or_else(|e| panic!("{e}"));
    let data = super::data(dir).display().to_string();
    String::from_utf8(out).unwrap().replace(&data, "$DATA")
}
