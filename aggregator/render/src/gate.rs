//! The regression gate of `kern-profile diff BASE NEW --fail-above PCT`: each function's self
//! share (percentage points of all samples), or with exact counts its instruction count
//! (percent growth), in a base run and a new run of the same kernel; the functions that grew
//! past the tolerance fail the gate.

use std::io::{self, Write};
use std::path::Path;

use kern_profile_profile::collect::Run;
use kern_profile_profile::exact::exact_folded;
use kern_profile_profile::folded::Folded;
use kern_profile_profile::percent::pct;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::stacks::UNKNOWN_FRAME;
use kern_profile_profile::unnamed::{BOOT_FRAME, BOOT_PAGING_OFF_FRAME, FIRMWARE_FRAME};
use kern_profile_profile::ProfileError;

use crate::file_name;
use crate::text::function_rows;

/// What the gate compares and how much growth it lets pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    /// Samples: percentage points of the total; exact counts: percent of the base's count.
    pub tolerance: f64,
    /// Exact instruction counts instead of sampled shares.
    pub exact: bool,
}

/// One function in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub name: String,
    pub base: u64,
    pub new: u64,
    /// Samples: new share minus base share, in points; exact counts: percent growth of the
    /// count (infinite for a function the base never ran).
    pub growth: f64,
    /// Grew past the tolerance.
    pub failed: bool,
}

/// The gate's verdict over two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub gate: Gate,
    pub base_total: u64,
    pub new_total: u64,
    /// Every function of either run, the largest growth first.
    pub changes: Vec<Change>,
}

impl Verdict {
    /// The functions that grew past the tolerance.
    pub fn failed(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.failed)
    }

    /// `name (+growth)` for each failed function, comma-separated.
    pub fn failed_list(&self) -> String {
        self.failed()
            .map(|c| format!("{} ({})", c.name, self.growth_text(c.growth)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn growth_text(&self, g: f64) -> String {
        match (self.gate.exact, g.is_finite()) {
            (true, true) => format!("{g:+.2}%"),
            (true, false) => "new".into(),
            (false, _) => format!("{g:+.2} points"),
        }
    }

    /// The table: the `top` largest growths, then whether the gate passed.
    pub fn write(&self, top: usize, mut out: impl Write) -> io::Result<()> {
        let unit = if self.gate.exact {
            "instructions"
        } else {
            "samples"
        };
        let what = if self.gate.exact {
            "instructions (exact counts)"
        } else {
            "self share"
        };
        let tol = match (self.gate.tolerance.is_finite(), self.gate.exact) {
            (false, _) => "none (no --fail-above)".to_string(),
            (true, true) => format!("{}%", self.gate.tolerance),
            (true, false) => format!("{} points", self.gate.tolerance),
        };
        writeln!(
            out,
            "# {what}: base {} {unit}, new {} {unit}; tolerance {tol}",
            self.base_total, self.new_total
        )?;
        let w = self
            .changes
            .iter()
            .map(|c| c.base.max(c.new).to_string().len())
            .max()
            .unwrap_or(1)
            .max(5);
        writeln!(
            out,
            "  {:>w$}  {:>7}  {:>w$}  {:>7}  {:>13}  Function",
            "Base", "Base%", "New", "New%", "Growth"
        )?;
        for c in self.changes.iter().take(top) {
            writeln!(
                out,
                "  {:>w$}  {:>6.2}%  {:>w$}  {:>6.2}%  {:>13}  {}{}",
                c.base,
                pct(c.base, self.base_total),
                c.new,
                pct(c.new, self.new_total),
                self.growth_text(c.growth),
                c.name,
                if c.failed { "  FAILED" } else { "" }
            )?;
        }
        let n = self.failed().count();
        if n == 0 {
            writeln!(out, "passed: no function grew past the tolerance")
        } else {
            writeln!(
                out,
                "failed: {n} function(s) grew past the tolerance: {}",
                self.failed_list()
            )
        }
    }
}

/// Compares the functions' self counts of two named runs.
pub fn compare(base: &Folded, new: &Folded, gate: Gate) -> Verdict {
    let mut counts: Vec<(String, u64, u64)> = Vec::new();
    let base_rows = function_rows(base);
    let mut new_rows = function_rows(new);
    new_rows.retain(|r| r.self_count > 0);
    for r in base_rows.iter().filter(|r| r.self_count > 0) {
        counts.push((r.name.clone(), r.self_count, 0));
    }
    for r in new_rows {
        match counts.iter_mut().find(|c| c.0 == r.name) {
            Some(c) => c.2 = r.self_count,
            None => counts.push((r.name, 0, r.self_count)),
        }
    }
    let mut changes: Vec<Change> = counts
        .into_iter()
        .map(|(name, b, n)| {
            let growth = if gate.exact {
                match b {
                    0 if n > 0 => f64::INFINITY,
                    0 => 0.0,
                    _ => (n as f64 - b as f64) * 100.0 / b as f64,
                }
            } else {
                pct(n, new.total) - pct(b, base.total)
            };
            Change {
                name,
                base: b,
                new: n,
                growth,
                failed: growth > gate.tolerance,
            }
        })
        .collect();
    changes.sort_by(|a, b| {
        b.growth
            .total_cmp(&a.growth)
            .then_with(|| a.name.cmp(&b.name))
    });
    Verdict {
        gate,
        base_total: base.total,
        new_total: new.total,
        changes,
    }
}

/// Collects and names the run's input and `base`, and compares them. `base_run` names the
/// base with its own symbols (another build of the kernel: `--base-elf`); without it both are
/// named with the run's, and recordings that do not look made with them are refused.
pub fn run_gate(
    run: &mut Run<'_>,
    base: &Path,
    base_run: Option<&mut Run<'_>>,
    gate: Gate,
) -> Result<Verdict, ProfileError> {
    let new_path = run.input;
    let new_p = collect(run, new_path, gate.exact)?;
    let new_f = name(run, &new_p, gate.exact);
    match base_run {
        Some(b) => {
            let base_p = collect(b, base, gate.exact)?;
            same_arch(&base_p, &new_p)?;
            let base_f = name(b, &base_p, gate.exact);
            Ok(compare(&base_f, &new_f, gate))
        }
        None => {
            let base_p = collect(run, base, gate.exact)?;
            same_arch(&base_p, &new_p)?;
            let base_f = name(run, &base_p, gate.exact);
            same_kernel(run, (&base_p, &base_f), (&new_p, &new_f))?;
            Ok(compare(&base_f, &new_f, gate))
        }
    }
}

fn collect(run: &mut Run<'_>, path: &Path, exact: bool) -> Result<CpuProfile, ProfileError> {
    let p = run.collect(path, exact)?;
    if exact && !p.summary.has_exact() {
        return Err(ProfileError::NoExactData { path: p.path });
    }
    Ok(p)
}

fn name(run: &mut Run<'_>, profile: &CpuProfile, exact: bool) -> Folded {
    if exact {
        let (addresses, filter) = (run.style.addresses, run.filter);
        exact_folded(
            &profile.summary.exact,
            &mut run.namer(),
            addresses,
            &filter.names,
        )
    } else {
        run.name(profile)
    }
}

/// Two architectures cannot be one kernel (the ELF, when given, was checked against each).
fn same_arch(base: &CpuProfile, new: &CpuProfile) -> Result<(), ProfileError> {
    if let (Some(b), Some(n)) = (&base.header, &new.header) {
        if b.arch != n.arch {
            return Err(ProfileError::Unsupported(format!(
                "{} was recorded on {} and {} on {}: recordings of different kernels cannot be \
                 compared",
                base.path.display(),
                b.arch.name(),
                new.path.display(),
                n.arch.name()
            )));
        }
    }
    Ok(())
}

/// The raw header does not identify the kernel: a recording whose kernel samples mostly fall
/// in no function of the symbols, while the other's are named, was not made with them.
fn same_kernel(
    run: &Run<'_>,
    base: (&CpuProfile, &Folded),
    new: (&CpuProfile, &Folded),
) -> Result<(), ProfileError> {
    if run.style.addresses {
        return Ok(());
    }
    let (ub, un) = (unnamed_kernel_share(base.1), unnamed_kernel_share(new.1));
    let (odd, share, other, other_share) = if ub > 50.0 && un < 25.0 {
        (base.0, ub, new.0, un)
    } else if un > 50.0 && ub < 25.0 {
        (new.0, un, base.0, ub)
    } else {
        return Ok(());
    };
    Err(ProfileError::Unsupported(format!(
        "{}: {share:.0}% of its kernel samples fall in no function of {}, against \
         {other_share:.0}% of {}'s: recordings of different kernels? (diff compares two runs \
         of the kernel whose symbols it is given)",
        file_name(&odd.path),
        run.kernel,
        file_name(&other.path)
    )))
}

/// The share of the samples taken in the kernel (firmware, boot with paging off and user
/// mode left out) whose leaf no symbol names.
fn unnamed_kernel_share(f: &Folded) -> f64 {
    let (mut unnamed, mut kernel) = (0u64, 0u64);
    for (stack, n) in &f.lines {
        let leaf = stack.rsplit(';').next().unwrap_or("");
        if leaf == FIRMWARE_FRAME || leaf == BOOT_PAGING_OFF_FRAME || leaf.starts_with("[user") {
            continue;
        }
        kernel += n;
        if leaf == UNKNOWN_FRAME || leaf == BOOT_FRAME || leaf.starts_with("[kernel ") {
            unnamed += n;
        }
    }
    pct(unnamed, kernel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::folded_lines;

    #[test]
    fn shares_grow_in_points() {
        let base = folded_lines(&[("main;a", 50), ("main;b", 50)]);
        let new = folded_lines(&[("main;a", 70), ("main;b", 30)]);
        let gate = Gate {
            tolerance: 5.0,
            exact: false,
        };
        let v = compare(&base, &new, gate);
        assert_eq!(v.changes[0].name, "a");
        assert!((v.changes[0].growth - 20.0).abs() < 1e-9);
        assert!(v.changes[0].failed);
        assert!(!v.changes[1].failed);
        assert_eq!(v.failed_list(), "a (+20.00 points)");
        let v = compare(
            &base,
            &new,
            Gate {
                tolerance: 25.0,
                ..gate
            },
        );
        assert_eq!(v.failed().count(), 0);
        let mut out = Vec::new();
        v.write(10, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("passed"), "{text}");
        assert!(text.contains("+20.00 points  a"), "{text}");
    }

    #[test]
    fn exact_counts_grow_in_percent() {
        let base = folded_lines(&[("a", 100), ("b", 1000)]);
        let new = folded_lines(&[("a", 111), ("b", 1000), ("c", 1)]);
        let gate = Gate {
            tolerance: 10.0,
            exact: true,
        };
        let v = compare(&base, &new, gate);
        let names: Vec<&str> = v.failed().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["c", "a"]);
        assert_eq!(v.failed_list(), "c (new), a (+11.00%)");
    }
}
