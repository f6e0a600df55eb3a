//! A `perf report`-style table: the top functions by self and by total share.
//!
//! *Self* counts the samples whose leaf is the function; *total* counts the samples with the
//! function anywhere on the stack (once per sample, even when recursive).

use std::io::{self, Write};

use rustc_hash::FxHashMap;

pub use kern_profile_profile::percent::pct;

use crate::describe::describe;
use crate::{write_err, Collected, CpuRenderer, Drawn};
use kern_profile_profile::collect::Run;
use kern_profile_profile::folded::Folded;

/// One function's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionRow {
    pub name: String,
    pub self_count: u64,
    pub total_count: u64,
}

/// Self and total counts per function, from named stacks.
pub fn function_rows(folded: &Folded) -> Vec<FunctionRow> {
    let mut self_c: FxHashMap<&str, u64> = FxHashMap::default();
    let mut total_c: FxHashMap<&str, u64> = FxHashMap::default();
    let mut seen: Vec<&str> = Vec::new();
    for (stack, n) in &folded.lines {
        seen.clear();
        let mut last = "";
        for f in stack.split(';') {
            last = f;
            if !seen.contains(&f) {
                seen.push(f);
                let c = total_c.entry(f).or_insert(0);
                *c = c.saturating_add(*n);
            }
        }
        let c = self_c.entry(last).or_insert(0);
        *c = c.saturating_add(*n);
    }
    let mut rows: Vec<FunctionRow> = total_c
        .into_iter()
        .map(|(name, total_count)| FunctionRow {
            name: name.to_string(),
            self_count: self_c.get(name).copied().unwrap_or(0),
            total_count,
        })
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    rows
}

/// Writes the header lines (each prefixed `# `), then the two top-N tables.
pub fn write_report(
    folded: &Folded,
    header: &[String],
    top: usize,
    unit: &str,
    mut out: impl Write,
) -> io::Result<()> {
    for h in header {
        writeln!(out, "# {h}")?;
    }
    let total = folded.total;
    let mut rows = function_rows(folded);
    writeln!(out)?;
    if total == 0 {
        writeln!(out, "No {unit}.")?;
        return Ok(());
    }
    rows.sort_by(|a, b| {
        b.self_count
            .cmp(&a.self_count)
            .then(b.total_count.cmp(&a.total_count))
            .then(a.name.cmp(&b.name))
    });
    let by_self: Vec<&FunctionRow> = rows.iter().filter(|r| r.self_count > 0).take(top).collect();
    writeln!(
        out,
        "Top {} functions by self {unit} (of {total}):",
        by_self.len()
    )?;
    table(&by_self, total, &mut out)?;
    rows.sort_by(|a, b| {
        b.total_count
            .cmp(&a.total_count)
            .then(b.self_count.cmp(&a.self_count))
            .then(a.name.cmp(&b.name))
    });
    let by_total: Vec<&FunctionRow> = rows.iter().take(top).collect();
    writeln!(out)?;
    writeln!(
        out,
        "Top {} functions by total {unit} (callees included):",
        by_total.len()
    )?;
    table(&by_total, total, &mut out)
}

fn table(rows: &[&FunctionRow], total: u64, out: &mut impl Write) -> io::Result<()> {
    let w = rows
        .iter()
        .map(|r| r.total_count.max(r.self_count).to_string().len())
        .max()
        .unwrap_or(1)
        .max(5);
    writeln!(
        out,
        "  {:>w$}  {:>7}  {:>w$}  {:>7}  Function",
        "Self", "Self%", "Total", "Total%"
    )?;
    for r in rows {
        writeln!(
            out,
            "  {:>w$}  {:>6.2}%  {:>w$}  {:>6.2}%  {}",
            r.self_count,
            pct(r.self_count, total),
            r.total_count,
            pct(r.total_count, total),
            r.name
        )?;
    }
    Ok(())
}

/// The text report of the sampled profile.
pub struct TextRenderer {
    /// Rows of each table.
    pub top: usize,
    /// The kernel/user split per vCPU too (`--per-cpu`, which has no frames here).
    pub per_cpu_lines: bool,
}

impl CpuRenderer for TextRenderer {
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let folded = run.name(profile);
        let split = profile.summary.tally.user_samples > 0 || run.sym.has_user_binaries();
        let mut header = describe(profile, &run.kernel, run.filter, split, self.per_cpu_lines);
        header.extend(run.sym.corrections().describe());
        write_report(&folded, &header, self.top, "samples", out).map_err(write_err)?;
        Ok(run.summary(profile, &folded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folded_lines;

    #[test]
    fn self_and_total_count_recursion_once() {
        let f = folded_lines(&[("main;a;a;b", 3), ("main;a", 1), ("main;c", 6)]);
        let rows = function_rows(&f);
        let get = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
        assert_eq!(get("main").total_count, 10);
        assert_eq!(get("main").self_count, 0);
        assert_eq!(get("a").total_count, 4);
        assert_eq!(get("a").self_count, 1);
        assert_eq!(get("b").self_count, 3);
        assert_eq!(get("c").self_count, 6);
    }

    #[test]
    fn report_layout() {
        let f = folded_lines(&[("main;a", 1), ("main;c", 3)]);
        let mut out = Vec::new();
        write_report(&f, &["samples: 4".into()], 1, "samples", &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("# samples: 4\n"));
        assert!(s.contains("Top 1 functions by self samples (of 4):"));
        assert!(s.contains("      3   75.00%      3   75.00%  c"));
        assert!(s.contains("      0    0.00%      4  100.00%  main"));
    }
}
