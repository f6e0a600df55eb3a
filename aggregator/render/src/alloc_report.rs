//! The allocation text report: per allocator, its counters and the stacks still holding
//! memory.

use std::collections::HashMap;
use std::io::{self, Write};

use kern_profile_alloc::{AllocatorProfile, Analysis, Source};

/// Skipped regions listed one by one before the rest are summed up.
const SKIPS_LISTED: usize = 10;

/// Writes the report of `a`: warnings about the input, then for each allocator its counters
/// and its `top` stacks by units still live at the end, named by `name_stack` (which gets the
/// stack's addresses, innermost first). Sizes are in the trace's units.
pub fn write_report(
    out: &mut dyn Write,
    a: &Analysis,
    name_stack: &mut dyn FnMut(&[u64]) -> String,
    top: usize,
) -> io::Result<()> {
    let (source, records) = noun(a.source);
    writeln!(
        out,
        "{source}: {} {records}, {} allocator(s)",
        a.records,
        a.allocators.len()
    )?;
    if let Some(t) = &a.truncation {
        writeln!(out, "warning: {t}")?;
    }
    if !a.skips.is_empty() {
        let bytes = a.skips.iter().fold(0u64, |t, s| t.saturating_add(s.bytes));
        writeln!(
            out,
            "warning: skipped {} unreadable region(s), {} bytes in all (lenient):",
            a.skips.len(),
            bytes
        )?;
        for s in a.skips.iter().take(SKIPS_LISTED) {
            writeln!(out, "  {} bytes at byte offset {}", s.bytes, s.offset)?;
        }
        if a.skips.len() > SKIPS_LISTED {
            writeln!(out, "  and {} more", a.skips.len() - SKIPS_LISTED)?;
        }
    }
    for p in &a.allocators {
        writeln!(out)?;
        write_allocator(out, p, name_stack, top)?;
    }
    Ok(())
}

fn write_allocator(
    out: &mut dyn Write,
    p: &AllocatorProfile,
    name_stack: &mut dyn FnMut(&[u64]) -> String,
    top: usize,
) -> io::Result<()> {
    let s = &p.stats;
    writeln!(out, "allocator `{}` (sizes in the trace's units)", p.name)?;
    let line = |out: &mut dyn Write, label: &str, n: u64, note: &str| {
        writeln!(out, "  {label:<28}{n:>14}{note}")
    };
    line(out, "operations", s.operations, "")?;
    line(out, "allocations", s.allocations, "")?;
    let note = if s.unknown_reallocs > 0 {
        format!("  ({} of a pointer not live)", s.unknown_reallocs)
    } else {
        String::new()
    };
    line(out, "reallocations", s.reallocations, &note)?;
    line(out, "frees", s.frees, "")?;
    line(
        out,
        "units allocated",
        s.bytes_allocated,
        "  (allocations and reallocations' new sizes)",
    )?;
    let note = if s.peak_live > 0 {
        format!(
            "  at operation #{} (byte offset {})",
            s.peak_at_op, s.peak_at_offset
        )
    } else {
        String::new()
    };
    line(out, "peak live", s.peak_live, &note)?;
    line(
        out,
        "live at end",
        s.live_at_end,
        &format!("  in {} block(s)", s.live_blocks_at_end),
    )?;
    if s.live_moved_at_end > 0 {
        line(
            out,
            "  of which moved by realloc",
            s.live_moved_at_end,
            "  (pointer unknown)",
        )?;
    }
    if s.live_unconfirmed_at_end > 0 {
        line(
            out,
            "  of which last reallocated",
            s.live_unconfirmed_at_end,
            "  (kept at the old pointer, may have moved)",
        )?;
    }
    line(out, "frees of unknown pointers", s.unknown_frees, "")?;
    line(out, "double frees", s.double_frees, "")?;
    if s.moves_detected > 0 {
        line(
            out,
            "reallocs proven moved",
            s.moves_detected,
            "  (their old pointer was allocated again)",
        )?;
    }
    if s.matched_to_moved > 0 {
        line(
            out,
            "taken as moved blocks",
            s.matched_to_moved,
            "  (unknown/double frees and reallocs matched to a block a realloc may have moved)",
        )?;
    }
    if s.reused_live > 0 {
        line(
            out,
            "allocs at a live pointer",
            s.reused_live,
            "  (a free missing from the trace; the earlier block is taken as freed)",
        )?;
    }
    if s.failed > 0 {
        line(
            out,
            "failed (null result)",
            s.failed,
            "  (not counted as allocations)",
        )?;
    }
    if s.unreturned > 0 {
        line(
            out,
            "calls that never returned",
            s.unreturned,
            "  (result unknown; a reallocated block is kept)",
        )?;
    }

    if top == 0 || p.live_stacks.is_empty() {
        return Ok(());
    }
    // Distinct address stacks often name the same (call sites on one line, several loop
    // iterations): merge them by name, as the flamegraph does.
    let mut named: HashMap<String, u64> = HashMap::new();
    for (frames, &units) in &p.live_stacks {
        let sum = named.entry(name_stack(frames)).or_insert(0);
        *sum = sum.saturating_add(units);
    }
    let mut stacks: Vec<(String, u64)> = named.into_iter().collect();
    stacks.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let shown = stacks.len().min(top);
    writeln!(
        out,
        "  top {shown} of {} stack(s) still holding memory:",
        stacks.len()
    )?;
    for (name, units) in stacks.into_iter().take(top) {
        let pct = if s.live_at_end > 0 {
            100.0 * units as f64 / s.live_at_end as f64
        } else {
            0.0
        };
        writeln!(out, "  {units:>14} {pct:>6.1}%  {name}")?;
    }
    Ok(())
}

/// What the analysis's records are: `memtrace: N records`.
fn noun(source: Source) -> (&'static str, &'static str) {
    match source {
        Source::Memtrace => ("memtrace", "records"),
        Source::Hooks => ("allocation hooks", "events"),
    }
}
