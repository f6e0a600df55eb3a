//! A progress bar on stderr, by bytes read, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Read};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Inputs smaller than this finish before a bar would be worth drawing.
const MIN_BYTES: u64 = 8 << 20;

/// A bar for reading `len` bytes of `what`; hidden when `enabled` is false, when stderr is
/// not a terminal, or when the input is small.
pub fn bar(enabled: bool, len: u64, what: &str) -> ProgressBar {
    if !enabled || len < MIN_BYTES || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix} [{bar:40}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    bar
}

/// A reader that advances a bar by the bytes it reads.
pub struct ProgressReader<R> {
    inner: R,
    bar: ProgressBar,
}

impl<R: Read> ProgressReader<R> {
    pub fn new(inner: R, bar: ProgressBar) -> Self {
        ProgressReader { inner, bar }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl<R: Read> Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

impl<R> Drop for ProgressReader<R> {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
