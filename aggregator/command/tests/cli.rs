//! The `kern-profile` binary: defaults, output files, exit codes and error messages.

mod common;

use std::path::Path;
use std::process::Command;

use common::{kp, stderr};

#[test]
fn help_explains_every_option_with_examples() {
    let o = kp(Path::new("."), &["--help"]);
    assert!(o.status.success());
    let help = String::from_utf8(o.stdout).unwrap();
    for opt in [
        "--output",
        "--format",
        "--title",
        "--reverse",
        "--top",
        "--cpu",
        "--per-cpu",
        "--per-process",
        "--per-task",
        "--task <NAME|TID>",
        "--process <NAME|PID>",
        "--by <WHAT>",
        "--kernel-only",
        "--user-only",
        "--no-inline",
        "--lines",
        "--addresses",
        "--symbols",
        "--exact",
        "--diff",
        "--alloc",
        "--view",
        "--timeline",
        "--lenient",
        "Examples:",
        "kern-profile raw-data kernel.elf",
        "Legacy files",
    ] {
        assert!(help.contains(opt), "--help lacks {opt}");
    }
}

#[test]
fn default_run_writes_cpu_svg() {
    let dir = common::kernel_dir(
        "cli-default",
        &[("raw-data", &common::synthetic_raw(false))],
    );
    let o = kp(&dir, &["raw-data", "kernel.elf"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(dir.join("cpu.svg")).unwrap();
    assert!(svg.contains("kernel.elf: 45 samples"));
    assert!(stderr(&o).contains("wrote cpu.svg"), "{}", stderr(&o));

    let o = kp(&dir, &["raw-data", "kernel.elf", "-f", "folded", "-o", "-"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("_start;kernel::work;middle;leaf 12\n"));

    let o = kp(
        &dir,
        &["raw-data", "kernel.elf", "-f", "text", "--top", "2"],
    );
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Top 2 functions by self samples"), "{text}");

    let o = kp(&dir, &["raw-data", "kernel.elf", "-f", "firefox"]);
    assert!(o.status.success());
    assert!(dir.join("profile.json").exists());

    common::write(&dir, "exact.raw", &common::synthetic_raw(true));
    let o = kp(&dir, &["exact.raw", "kernel.elf", "--exact"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("exact.svg").exists());
    let o = kp(&dir, &["exact.raw", "kernel.elf", "--diff", "raw-data"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("cpu-diff.svg").exists());

    let o = kp(
        &dir,
        &[
            "raw-data",
            "kernel.elf",
            "--cpu",
            "1",
            "--per-cpu",
            "-f",
            "folded",
        ],
    );
    assert!(o.status.success());
    let folded = std::fs::read_to_string(dir.join("cpu.folded")).unwrap();
    assert!(folded.lines().all(|l| l.starts_with("cpu 1;")), "{folded}");
}

/// A closed stderr (`kern-profile ... 2>&1 | head -1` once `head` is gone) loses the
/// messages, not the output: no panic (exit 101), the file written.
#[test]
fn a_closed_stderr_loses_only_the_messages() {
    let dir = common::kernel_dir(
        "cli-closed-stderr",
        &[("raw-data", &common::synthetic_raw(false))],
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_kern-profile"))
        .args(["raw-data", "kernel.elf", "-o", "closed.svg"])
        .current_dir(&dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closed before the command writes: its messages meet EPIPE.
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let svg = std::fs::read_to_string(dir.join("closed.svg")).unwrap();
    assert!(svg.contains("kernel.elf: 45 samples"));
}

#[test]
fn errors_exit_non_zero_and_leave_no_output() {
    let dir = common::kernel_dir("cli-errors", &[]);
    let o = kp(&dir, &["missing.raw", "kernel.elf"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.raw"), "{}", stderr(&o));
    assert!(
        !dir.join("cpu.svg").exists(),
        "a failed run must not leave cpu.svg"
    );

    common::write(&dir, "raw-data", &common::synthetic_raw(false));
    // Arguments swapped.
    let o = kp(&dir, &["kernel.elf", "raw-data"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("the ELF comes second"),
        "{}",
        stderr(&o)
    );
    // No ELF, no symbols.
    let o = kp(&dir, &["raw-data"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--symbols"), "{}", stderr(&o));
    // Bad --cpu list: a usage error.
    let o = kp(&dir, &["raw-data", "kernel.elf", "--cpu", "3-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("backwards"), "{}", stderr(&o));
    let o = kp(
        &dir,
        &["raw-data", "kernel.elf", "--kernel-only", "--user-only"],
    );
    assert_eq!(o.status.code(), Some(2));
    // A truncated file: output plus a warning.
    let bytes = common::synthetic_raw(false);
    common::write(&dir, "cut.raw", &bytes[..bytes.len() - 5]);
    let o = kp(&dir, &["cut.raw", "kernel.elf", "-o", "cut.svg"]);
    assert!(o.status.success());
    assert!(
        stderr(&o).contains("warning:") && stderr(&o).contains("byte offset"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn alloc_mode_writes_per_allocator_files() {
    let dir = common::temp_dir("cli-alloc");
    let memtrace = common::data("example/memtrace");
    let elf = common::data("example/kernel.elf");
    let out = dir.join("mem");
    // `--alloc MEMTRACE ELF`, then `extra`.
    let alloc = |extra: &[&str]| {
        let mut args = vec!["--alloc", memtrace.to_str().unwrap(), elf.to_str().unwrap()];
        args.extend_from_slice(extra);
        kp(&dir, &args)
    };
    let o = alloc(&["--timeline", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for f in [
        "mem-kmalloc.svg",
        "mem-pages.svg",
        "mem-kmalloc-timeline.svg",
        "mem-pages-timeline.svg",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    let o = alloc(&["-f", "text"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("allocator `kmalloc`"));
    let o = alloc(&["-f", "firefox"]);
    assert_eq!(o.status.code(), Some(1));
    let o = kp(&dir, &["raw", elf.to_str().unwrap(), "--view", "peak"]);
    assert_eq!(o.status.code(), Some(2), "--view needs --alloc");
}

#[test]
fn symbols_takes_several_sources_maps_and_elves() {
    let dir = common::kernel_dir(
        "cli-symbols",
        &[("raw-data", &common::synthetic_raw(false))],
    );
    // The synthetic run's one sample outside the kernel: 0x1234, called from 0x5678.
    common::write(
        &dir,
        "boot.map",
        b"00001000 T low_one\n00005000 T low_two\n",
    );
    common::write(
        &dir,
        "kernel.map",
        b"c0100000 T leaf\nc0100040 T middle\nc0100060 T work\nc0100080 T _start\n",
    );
    let folded = |args: &[&str]| {
        let mut all = vec!["raw-data"];
        all.extend_from_slice(args);
        all.extend(["-f", "folded", "-o", "-", "--no-inline"]);
        let o = kp(&dir, &all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    // The ELF, then a map for what it does not name.
    let out = folded(&["kernel.elf", "--symbols", "boot.map"]);
    assert!(
        out.contains("_start;kernel::work;low_two;low_one 1\n"),
        "{out}"
    );
    // Two maps, no ELF: a comma list or --symbols repeated, the same.
    let out = folded(&["--symbols", "kernel.map,boot.map"]);
    assert!(out.contains("_start;work;low_two;low_one 1\n"), "{out}");
    assert!(out.contains("_start;work;middle;leaf "), "{out}");
    let repeated = folded(&["--symbols", "kernel.map", "--symbols", "boot.map"]);
    assert_eq!(out, repeated);
    // A map and an ELF's symbol table (told by its magic), no positional ELF.
    let out = folded(&["--symbols", "boot.map,kernel.elf"]);
    assert!(
        out.contains("_start;kernel::work;low_two;low_one 1\n"),
        "{out}"
    );
    assert!(out.contains("_start;kernel::work;middle;leaf "), "{out}");
    // A file that is neither: the error names it.
    common::write(&dir, "junk", b"\x00\x01not a map\n");
    let o = kp(&dir, &["raw-data", "--symbols", "boot.map,junk", "-o", "-"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("junk"), "{}", stderr(&o));
}
