//! The `kern-profile` binary run in a directory, and directories set up for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `kern-profile` binary with `args` in `dir`.
pub fn kp(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kern-profile"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `kern-profile RAW ELF FLAGS` run in a fresh temporary directory, which must succeed: the
/// directory (removed when dropped), for the files the run wrote there.
pub fn kp_in_fresh_dir(raw: &Path, elf: &Path, flags: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kern-profile"))
        .current_dir(dir.path())
        .arg(raw)
        .arg(elf)
        .args(flags)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

/// A run's standard error, for assertions and their messages.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh temporary directory holding `files` (name, contents) and tiny.elf as
/// `kernel.elf`, so that command lines name them relative to it.
pub fn kernel_dir(name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = super::temp_dir(name);
    for (file, bytes) in files {
        super::write(&dir, file, bytes);
    }
    std::fs::copy(super::tiny_elf(), dir.join("kernel.elf")).unwrap();
    dir
}
