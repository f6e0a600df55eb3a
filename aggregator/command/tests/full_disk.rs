//! A write that fails part-way (a full disk, here a file-size limit: `write()` fails with
//! EFBIG once the file would pass it) leaves the earlier output untouched and no temporary
//! file behind, and says which file it could not write.

mod common;

use std::path::Path;
use std::process::{Command, Output};

/// Bytes any file `kern-profile` writes may reach: far below what each output below needs.
const LIMIT: u64 = 4096;

/// `kern-profile ARGS` in `dir` under a file-size limit of [`LIMIT`] bytes, SIGXFSZ ignored
/// (so that the write fails instead of the signal killing the process).
fn kp_limited(dir: &Path, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(r#"trap "" XFSZ; exec prlimit --fsize="$0" -- "$@""#)
        .arg(LIMIT.to_string())
        .arg(env!("CARGO_BIN_EXE_kern-profile"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn have_prlimit() -> bool {
    Command::new("prlimit").arg("--version").output().is_ok()
}

/// Runs `args`, which write `out` (already there, holding "old"), and checks the failure.
fn fails_cleanly(dir: &Path, args: &[&str], out: &str) {
    std::fs::write(dir.join(out), b"old").unwrap();
    let o = kp_limited(dir, args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(
        stderr.contains(out) && stderr.contains("too large"),
        "{args:?}: the error names neither {out} nor the cause: {stderr}"
    );
    assert_eq!(
        std::fs::read(dir.join(out)).unwrap(),
        b"old",
        "{args:?}: the earlier {out} was touched"
    );
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".kern-profile-"))
        .collect();
    assert!(left.is_empty(), "{args:?}: temporary files left: {left:?}");
}

#[test]
fn a_failed_write_keeps_the_old_file_and_leaves_no_temporary() {
    if !have_prlimit() {
        eprintln!("skipped: no prlimit (util-linux)");
        return;
    }
    let dir = common::temp_dir("full-disk");
    let data = common::data("example");
    for f in ["raw-period-exact", "kernel.elf", "memtrace"] {
        std::fs::copy(data.join(f), dir.join(f)).unwrap();
    }
    // Unlimited, each output is larger than the limit (else this test proves nothing).
    let o = Command::new(env!("CARGO_BIN_EXE_kern-profile"))
        .args(["raw-period-exact", "kernel.elf", "-o", "big.svg"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(dir.join("big.svg")).unwrap().len() > 4 * LIMIT);

    fails_cleanly(
        &dir,
        &["raw-period-exact", "kernel.elf", "-o", "cpu.svg"],
        "cpu.svg",
    );
    fails_cleanly(
        &dir,
        &["raw-period-exact", "kernel.elf", "-f", "firefox"],
        "profile.json",
    );
    std::fs::create_dir(dir.join("mem")).unwrap();
    fails_cleanly(
        &dir.join("mem"),
        &["--alloc", "../memtrace", "../kernel.elf", "-o", "."],
        "mem-kmalloc.svg",
    );
}
