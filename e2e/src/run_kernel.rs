//! The QEMU commands of scripts/guests/run-kernel.sh, the one place that knows how to boot
//! the example kernels.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::root;

/// run-kernel.sh's arguments booting `kernel` of `arch` with COM1 (the `virt` boards' UART)
/// to the file `com1` and the memtrace to the file `memtrace`, or nowhere.
pub fn run_kernel_args(
    arch: &str,
    kernel: &Path,
    com1: &Path,
    memtrace: Option<&Path>,
) -> Vec<String> {
    vec![
        "--arch".into(),
        arch.into(),
        "--kernel".into(),
        kernel.display().to_string(),
        "--com1".into(),
        com1.display().to_string(),
        "--memtrace".into(),
        memtrace.map_or("none".into(), |p| p.display().to_string()),
    ]
}

/// The QEMU command `scripts/guests/run-kernel.sh --print0 ARGS` prints (the one place that knows
/// how to boot the example kernels), stdin from /dev/null.
pub fn run_kernel_command(args: &[String]) -> Command {
    let out = Command::new("bash")
        .arg(root().join("scripts/guests/run-kernel.sh"))
        .arg("--print0")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("bash not found");
    assert!(
        out.status.success(),
        "scripts/guests/run-kernel.sh --print0 {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let argv: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .split_terminator('\0')
        .map(str::to_string)
        .collect();
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]).stdin(Stdio::null());
    c
}
