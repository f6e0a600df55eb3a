//! Folded output: collapsed stacks, root first, `a;b;c N` per line, sorted.

use std::io::{self, Write};

use crate::folded::Folded;

/// Writes `folded` as collapsed stack lines.
pub fn write_folded(folded: &Folded, out: impl Write) -> io::Result<()> {
    folded.write(out)
}
