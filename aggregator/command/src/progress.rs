//! A progress bar on stderr, by bytes read, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Read};

use indicatif::{ProgressBar, ProgressBarIter, ProgressDrawTarget, ProgressFinish, ProgressStyle};

/// Inputs smaller than this finish before a bar would be worth drawing.
const MIN_BYTES: u64 = 8 << 20;

/// A reader that advances a bar by the bytes it reads (indicatif's `wrap_read`); the bar is
/// cleared when the reader drops.
pub type ProgressReader<R> = ProgressBarIter<R>;

/// A bar for reading `len` bytes of `what`; hidden when `enabled` is false, when stderr is
/// not a terminal, or when the input is small.
pub fn bar(enabled: bool, len: u64, what: &str) -> ProgressBar {
    if !enabled || len < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "{prefix} [{bar:40}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
        .with_style(style)
        .with_prefix(what.to_string())
        .with_finish(ProgressFinish::AndClear)
}

/// Installs the bar as the profile crate's reader wrapper (CPU runs' sample files).
pub fn install() {
    kern_profile_profile::progress::install(|file, len, what| {
        Box::new(reader(file, true, len, what))
    });
}

/// `inner` read through a bar for `len` bytes of `what` (see [`bar`]).
pub fn reader<R: Read>(inner: R, enabled: bool, len: u64, what: &str) -> ProgressReader<R> {
    bar(enabled, len, what).wrap_read(inner)
}
