//! The Linux guests `scripts/setup.sh --with-linux` fetches into target/linux/.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::{output_with_timeout, plugin, root, scratch};

/// What a Linux boot left behind.
pub struct LinuxRun {
    pub raw: PathBuf,
    pub kallsyms: PathBuf,
    pub console: String,
}

/// The QEMU command line `scripts/guests/run-linux.sh --print0 ARGS` prints (the one place
/// that knows how to boot the Linux guests), for tests that run it their own way.
pub fn run_linux_argv<S: AsRef<OsStr>>(args: &[S]) -> Vec<String> {
    let o = Command::new("bash")
        .arg(root().join("scripts/guests/run-linux.sh"))
        .arg("--print0")
        .args(args)
        .output()
        .expect("bash not found");
    assert!(
        o.status.success(),
        "scripts/guests/run-linux.sh --print0 failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .split_terminator('\0')
        .map(String::from)
        .collect()
}

/// Boots Linux for `arch` through scripts/guests/run-linux.sh, with the plugin when
/// `plugin_args` is given and `append` on the kernel command line, and asserts the workload
/// finished and the guest powered off.
pub fn boot_linux_with(
    name: &str,
    arch: &str,
    plugin_args: Option<&str>,
    append: Option<&str>,
) -> LinuxRun {
    let dir = scratch(name);
    let mut c = Command::new("bash");
    c.arg(root().join("scripts/guests/run-linux.sh"))
        .args(["--arch", arch, "--timeout", "1200", "--out"])
        .arg(&dir);
    if let Some(a) = plugin_args {
        c.args(["--plugin", a]).env("KP_PLUGIN", plugin());
    }
    if let Some(a) = append {
        c.args(["--append", a]);
    }
    let out = output_with_timeout(c, Duration::from_secs(1300));
    let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "Linux ({arch}, {plugin_args:?}) failed: {}\nconsole:\n{console}",
        String::from_utf8_lossy(&out.stderr)
    );
    LinuxRun {
        raw: dir.join("cpu.raw"),
        kallsyms: dir.join("kallsyms"),
        console,
    }
}

/// Whether every file of `files`, a Linux guest's in `dir`, was fetched; when one is
/// missing, panics under `KP_E2E=required`, otherwise prints why the test is skipped.
pub fn linux_guest_present(dir: &Path, files: &[PathBuf]) -> bool {
    let present = files.iter().all(|f| f.exists());
    if !present {
        let msg = format!(
            "no Linux guest in {}: run scripts/setup.sh --with-linux",
            dir.display()
        );
        assert!(
            std::env::var("KP_E2E").as_deref() != Ok("required"),
            "{msg} (KP_E2E=required)"
        );
        println!("skipped: {msg}");
    }
    present
}
