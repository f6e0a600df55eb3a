//! The subcommands: `report` (the default command's other name), `completions`, `man`, and
//! what `record` and `top` refuse before any guest runs (QEMU stood in for by small scripts
//! that print a version; the real runs are e2e/tests/record.rs).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{kp, stderr};

#[test]
fn report_is_the_default_command() {
    let dir = common::kernel_dir("sub-report", &[("raw-data", &common::synthetic_raw(false))]);
    let args = ["raw-data", "kernel.elf", "-f", "folded", "-o", "-"];
    let default = kp(&dir, &args);
    let mut sub = vec!["report"];
    sub.extend(args);
    let report = kp(&dir, &sub);
    assert!(default.status.success() && report.status.success());
    assert_eq!(default.stdout, report.stdout);
    assert!(!default.stdout.is_empty());
    // Focus options reach every output, here the folded one.
    let o = kp(
        &dir,
        &[
            "raw-data",
            "kernel.elf",
            "-f",
            "folded",
            "-o",
            "-",
            "--focus",
            "middle",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        !text.is_empty() && text.lines().all(|l| l.starts_with("middle")),
        "{text}"
    );
    // A subcommand's options do not mix with the default command's.
    let o = kp(&dir, &["raw-data", "kernel.elf", "record"]);
    assert!(!o.status.success());
}

#[test]
fn completions_and_man_pages_come_from_the_definitions() {
    let dir = common::temp_dir("sub-gen");
    for shell in ["bash", "zsh", "fish"] {
        let o = kp(&dir, &["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let s = String::from_utf8(o.stdout).unwrap();
        for word in ["kern-profile", "record", "window", "focus"] {
            assert!(s.contains(word), "{shell} completion lacks {word}");
        }
    }
    let o = kp(&dir, &["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));

    let o = kp(&dir, &["man"]);
    assert!(o.status.success());
    let page = String::from_utf8(o.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH kern-profile"),
        "{page}"
    );
    assert!(page.contains("record"));
    let o = kp(&dir, &["man", "--dir", "pages"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for p in [
        "kern-profile.1",
        "kern-profile-record.1",
        "kern-profile-top.1",
    ] {
        let text = std::fs::read_to_string(dir.join("pages").join(p)).unwrap();
        assert!(text.contains(".TH"), "{p}");
    }
}

/// A stand-in for `qemu-system-i386` that prints `version` and exits.
fn fake_qemu(dir: &Path, version: &str) -> PathBuf {
    let p = dir.join(format!("qemu-system-i386-{version}"));
    std::fs::write(
        &p,
        format!("#!/bin/sh\necho 'QEMU emulator version {version} (fake)'\nexit 0\n"),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn record_refuses_bad_input_before_the_guest_runs() {
    let dir = common::temp_dir("sub-record");
    let run = |args: &[&str]| {
        let o = kp(&dir, args);
        (o.status.code(), stderr(&o))
    };
    // No command, or one not after `--`.
    let (code, e) = run(&["record"]);
    assert_eq!(code, Some(1));
    assert!(e.contains("give the QEMU command after `--`"), "{e}");
    let (code, e) = run(&["record", "qemu-system-i386", "-kernel", "k"]);
    assert_eq!(code, Some(2));
    assert!(e.contains("unexpected argument 'qemu-system-i386'"), "{e}");
    let (_, e) = run(&["top"]);
    assert!(
        e.contains("kern-profile top [OPTIONS] -- qemu-system"),
        "{e}"
    );
    // A QEMU that is not there, or too old.
    let (code, e) = run(&["record", "--", "qemu-system-nonesuch", "-kernel", "k"]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("QEMU binary `qemu-system-nonesuch` not found on PATH"),
        "{e}"
    );
    let old = fake_qemu(&dir, "8.2.0");
    let old = old.to_str().unwrap();
    let (code, e) = run(&["record", "--", old, "-kernel", "k"]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("is QEMU 8.2.0, but kern-profile's plugin needs QEMU 9.2 or newer"),
        "{e}"
    );
    // The gdbstub works on any QEMU: the way out is named, for the subcommand given.
    assert!(
        e.contains(&format!("`kern-profile record --gdb -- {old} ...`")),
        "{e}"
    );
    let (_, e) = run(&["top", "--", old, "-kernel", "k"]);
    assert!(
        e.contains(&format!("`kern-profile top --gdb -- {old} ...`")),
        "{e}"
    );
    // A version that is no version.
    let odd = fake_qemu(&dir, "eleven");
    let (code, e) = run(&["record", "--", odd.to_str().unwrap(), "-kernel", "k"]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("did not say which QEMU it is") && e.contains("--version"),
        "{e}"
    );
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    // --trigger interrupt before QEMU 10.2, and with --period.
    let qemu = fake_qemu(&dir, "10.0.2");
    let qemu = qemu.to_str().unwrap();
    let (code, e) = run(&[
        "record",
        "--trigger",
        "interrupt",
        "--",
        qemu,
        "-kernel",
        "k",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("--trigger interrupt needs QEMU 10.2 or newer")
            && e.contains("is QEMU 10.0.2: drop --trigger"),
        "{e}"
    );
    let (code, e) = run(&[
        "record",
        "--trigger",
        "interrupt",
        "--period",
        "100",
        "--",
        qemu,
    ]);
    assert_eq!(code, Some(2));
    assert!(
        e.contains("'--trigger <WHERE>' cannot be used with '--period <N>'"),
        "{e}"
    );
    // A kernel that is no ELF, none at all, or a stripped one.
    std::fs::write(dir.join("bzImage"), b"MZ\0\0 a boot image").unwrap();
    let (code, e) = run(&["record", "-o", "out", "--", qemu, "-kernel", "bzImage"]);
    assert_eq!(code, Some(1));
    assert!(e.contains("-kernel bzImage: not an ELF"), "{e}");
    assert!(e.contains("--kernel ELF"), "{e}");
    let (_, e) = run(&["record", "--", qemu, "-m", "128M"]);
    assert!(e.contains("the QEMU command has no -kernel"), "{e}");
    let (_, e) = run(&[
        "record", "--kernel", "bzImage", "--", qemu, "-kernel", "bzImage",
    ]);
    assert!(e.contains("--kernel bzImage: not an ELF"), "{e}");
    // A window no function matches.
    let elf = common::tiny_elf();
    let elf = elf.to_str().unwrap();
    let (_, e) = run(&[
        "record",
        "--window",
        "no_such_fn",
        "--",
        qemu,
        "-kernel",
        elf,
    ]);
    assert!(
        e.contains("--window no_such_fn: no function of that name"),
        "{e}"
    );
    // An output directory that cannot be made.
    std::fs::write(dir.join("a-file"), b"x").unwrap();
    let (code, e) = run(&["record", "-o", "a-file/out", "--", qemu, "-kernel", elf]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("cannot write to the output directory a-file/out: Not a directory"),
        "{e}"
    );
    // A plugin that is none.
    let (code, e) = run(&[
        "record", "-o", "out", "--plugin", elf, "--", qemu, "-kernel", elf,
    ]);
    assert_eq!(code, Some(1));
    assert!(e.contains("exports no kern_profile_plugin_version"), "{e}");
    // Nothing was left behind by any of them.
    assert!(!dir.join("out").exists());
    assert!(!dir.join("kern-profile-out").exists());
}
