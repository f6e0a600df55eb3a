//! `kern-profile diff BASE NEW ELF --fail-above PCT`: the regression gate on synthetic
//! recordings against tests/data/tiny.elf (the example kernel's two workloads:
//! e2e/tests/diff_gate.rs).

mod common;

use std::path::Path;
use std::process::Output;

use common::kp;
use common::tiny::*;
use common::Recording;
use kern_profile_format::{Arch, Header};

/// A recording of `leaf` samples (in square, inlined) and `middle` ones, on `arch`'s header.
fn run(arch: Arch, square: u64, middle: u64, nowhere: u64) -> Vec<u8> {
    let mut r = Recording::new(&Header {
        arch,
        ..common::header(1, false)
    });
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    for (pc, frames, n) in [
        (LEAF_SQUARE, &full[..], square),
        (MIDDLE_BODY, &full[1..], middle),
        (0x0000_1234, &full[3..], nowhere),
    ] {
        for _ in 0..n {
            r.sample(0, pc, frames);
        }
    }
    let n = square + middle + nowhere;
    let t = r.time();
    r.stats(n, 0, &[n, 0, 0, 0, 0, 0], &[t]);
    r.bytes
}

fn setup(name: &str, base: &[u8], new: &[u8]) -> std::path::PathBuf {
    common::kernel_dir(name, &[("base.raw", base), ("new.raw", new)])
}

/// `kern-profile diff base.raw new.raw kernel.elf`, then `extra`, in `dir`.
fn diff(dir: &Path, extra: &[&str]) -> Output {
    kp(
        dir,
        &[&["diff", "base.raw", "new.raw", "kernel.elf"][..], extra].concat(),
    )
}

#[test]
fn gate_fails_naming_what_grew() {
    let dir = setup(
        "diff-gate",
        &run(Arch::I386, 50, 50, 0),
        &run(Arch::I386, 70, 30, 0),
    );
    let o = diff(&dir, &["--fail-above", "5"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(err.contains("square_[i] (+20.00 points)"), "{err}");
    assert!(!err.contains("middle"), "{err}");
    assert!(out.contains("FAILED"), "{out}");
    // Within a generous tolerance, and without one: passes.
    for extra in [&["--fail-above", "25"][..], &[]] {
        let o = diff(&dir, extra);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{out}");
        assert!(out.contains("passed"), "{out}");
        assert!(out.contains("+20.00 points  square_[i]"), "{out}");
    }
}

#[test]
fn exact_counts_grow_in_percent() {
    let exact = common::synthetic_raw(true);
    let dir = setup("diff-exact", &exact, &exact);
    let o = diff(&dir, &["--exact", "--fail-above", "0"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("instructions (exact counts)"), "{out}");
    // A sampled-only recording has no exact counts: a clear error.
    common::write(&dir, "sampled.raw", &common::synthetic_raw(false));
    let o = kp(
        &dir,
        &["diff", "base.raw", "sampled.raw", "kernel.elf", "--exact"],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("exact=on"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn recordings_of_different_kernels_are_refused() {
    // Another architecture.
    let dir = setup(
        "diff-arch",
        &run(Arch::I386, 50, 50, 0),
        &run(Arch::X86_64, 50, 50, 0),
    );
    let o = diff(&dir, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("x86_64"), "{err}");
    // Samples the ELF does not name, where the base's are named.
    let dir = setup(
        "diff-kernel",
        &run(Arch::I386, 50, 50, 0),
        &run(Arch::I386, 5, 5, 90),
    );
    let o = diff(&dir, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("new.raw: 90% of its kernel samples fall in no function of kernel.elf")
            && err.contains("different kernels"),
        "{err}"
    );
    // Two builds, each recording named with its own ELF: compared by name.
    std::fs::copy(common::tiny_elf(), dir.join("base.elf")).unwrap();
    let o = diff(&dir, &["--base-elf", "base.elf"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("+90.00 points  [unknown]"), "{out}");
}
