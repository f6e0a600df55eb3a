//! Where a sample file's reader may be wrapped, e.g. in the command's progress bar: this crate
//! draws nothing itself (no terminal crates), the command installs its bar once at start.

use std::fs::File;
use std::io::Read;
use std::sync::OnceLock;

/// Wraps a file of `len` bytes named `what` for reading (e.g. a bar that advances with it).
pub type Wrap = fn(File, u64, &str) -> Box<dyn Read>;

static WRAP: OnceLock<Wrap> = OnceLock::new();

/// Installs the wrapper used when progress is allowed; the first one installed stays.
pub fn install(wrap: Wrap) {
    let _ = WRAP.set(wrap);
}

/// `file` as read for a CPU run: through the installed wrapper when `enabled`.
pub fn reader(file: File, enabled: bool, len: u64, what: &str) -> Box<dyn Read> {
    match WRAP.get() {
        Some(wrap) if enabled => wrap(file, len, what),
        _ => Box::new(file),
    }
}
