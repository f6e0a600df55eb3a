//! Version 4's stack table (`stacks=on`, which `record` passes) on the i386 example kernel
//! in a real QEMU: the same run recorded both ways reports the same shares, in a fraction of
//! the bytes; and the recordings of older versions committed as fuzz seeds still read.

use kern_profile_e2e::*;

/// Each function's share of the self samples, in points.
fn shares(raw: &std::path::Path) -> (std::collections::BTreeMap<String, f64>, u64) {
    let folded = folded_of(raw, &kernel(), &[]);
    let counts = self_counts(&folded);
    let total: u64 = counts.values().sum();
    let shares = counts
        .into_iter()
        .map(|(f, n)| (f, 100.0 * n as f64 / total as f64))
        .collect();
    (shares, total)
}

#[test]
fn the_table_reports_what_full_records_report() {
    if skip_i386() {
        return;
    }
    // period= samples follow the instructions: both runs sample the same code, but for
    // boot's few timing-dependent loops.
    let full = boot("stacks-off", "period=20000", "");
    let table = boot("stacks-on", "period=20000,stacks=on", "");
    let v4 = census(&table.raw);
    assert_eq!(v4.header.ptr_width(), 4);
    assert!(v4.stats.is_some() && v4.truncation.is_none());
    let (a, n_full) = shares(&full.raw);
    let (b, n_table) = shares(&table.raw);
    assert!(
        n_full.abs_diff(n_table) * 100 < n_full,
        "{n_full} against {n_table} samples"
    );
    for (f, share) in &a {
        let other = b.get(f).copied().unwrap_or(0.0);
        assert!(
            (share - other).abs() < 0.5,
            "{f}: {share:.2}% with full records, {other:.2}% with the table"
        );
    }
    assert!(a[&hottest()] > 10.0);
    let size = |p: &std::path::Path| std::fs::metadata(p).unwrap().len();
    let (bytes_full, bytes_table) = (size(&full.raw), size(&table.raw));
    println!(
        "{:.1} bytes a sample with full records, {:.1} with the table",
        bytes_full as f64 / n_full as f64,
        bytes_table as f64 / n_table as f64
    );
    assert!(
        bytes_table * 4 < bytes_full,
        "{bytes_table} against {bytes_full}"
    );
}

/// The fuzz seeds recorded by earlier builds: the legacy format, version 2 plain, cut and
/// compressed, version 4. Each reads to its samples and reports them (their kernel was
/// another build: only the counts are checked, named against today's kernel).
#[test]
fn recordings_of_every_version_still_read() {
    if skip_i386() {
        return;
    }
    let seeds = root().join("fuzz/corpus/cpu_e2e");
    let kernel = kernel();
    let k = kernel.to_str().unwrap();
    for name in [
        "i386-period.raw",
        "i386-period-cut.raw",
        "i386-period-zstd.raw",
        "i386-period-stacks.raw",
        "i386-smp.raw",
    ] {
        let raw = seeds.join(name);
        let c = census(&raw);
        assert!(c.samples > 0, "{name}");
        let text = kern_profile(&[raw.to_str().unwrap(), k, "-f", "text"]);
        assert!(
            text.contains(&format!("samples: {} read", c.samples)),
            "{name}: {text}"
        );
    }
    let legacy = seeds.join("i386-period.legacy");
    let text = kern_profile(&[legacy.to_str().unwrap(), k, "-f", "text"]);
    assert!(text.contains("legacy"), "{text}");
}
