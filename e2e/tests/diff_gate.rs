//! `kern-profile diff BASE NEW ELF --fail-above PCT` on two workloads of the example kernel:
//! 20 CPU rounds against 400, where `hot_leaf`'s self share grows by about 31 points (the
//! firmware's fixed instructions weigh less in the longer run), the same workload twice, and
//! an x86_64 recording against the i386 kernel.

use std::process::{Command, Output};
use std::sync::OnceLock;

use kern_profile_e2e::*;

const PLUGIN: &str = "period=10000";

fn short() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| boot("diff-short", PLUGIN, "rounds=20 alloc_rounds=0"))
}

fn long(name: &'static str) -> Run {
    boot(name, PLUGIN, "rounds=400 alloc_rounds=0")
}

fn diff(base: &Run, new: &Run, pct: &str) -> Output {
    Command::new(bin())
        .args([
            "diff".as_ref(),
            base.raw.as_os_str(),
            new.raw.as_os_str(),
            kernel().as_os_str(),
            "--fail-above".as_ref(),
            pct.as_ref(),
        ])
        .output()
        .unwrap()
}

#[test]
fn gate_fails_naming_the_function_that_grew() {
    if skip_i386() {
        return;
    }
    let hot = hottest();
    let o = diff(short(), &long("diff-long"), "20");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains(&format!("{hot} (+")), "{err}");
    // Only hot_leaf grows that much (by about 31 points; recurse next, by about 13); the
    // firmware's share shrinks.
    let failed: Vec<&str> = out.lines().filter(|l| l.ends_with("FAILED")).collect();
    assert_eq!(failed.len(), 1, "{out}");
    assert!(failed[0].contains(&hot), "{out}");
}

#[test]
fn same_workload_twice_passes() {
    if skip_i386() {
        return;
    }
    let (a, b) = (long("diff-same-a"), long("diff-same-b"));
    let o = diff(&a, &b, "5");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("passed"), "{out}");
}

#[test]
fn recordings_of_different_kernels_are_refused() {
    if skip_i386() || skip_x86_64() {
        return;
    }
    let other = boot64("diff-kernel64", PLUGIN, "rounds=20 alloc_rounds=0");
    let o = diff(short(), &other, "20");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("x86_64") && !err.contains("grew past"),
        "{err}"
    );
}
