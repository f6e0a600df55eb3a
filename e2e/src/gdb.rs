//! The example kernels of every architecture sampled through QEMU's gdbstub: a boot with a
//! stub on a Unix socket, `kern-profile stacks` and its blocks, `record --gdb` of a kernel
//! run, and the documented shares checked against what the stub's samples found.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::{
    bin, example_kernel, expected_of, output_of_alone_test, output_with_timeout, run_kernel_args,
    run_kernel_command, scratch, share, skip_unless, Need,
};

/// Whether a gdbstub test of `arch`'s example kernel should return at once: its QEMU, the
/// kernel or the aggregator is missing (the plugin is not needed).
pub fn skip_gdb(arch: &'static str) -> bool {
    let kernel = match arch {
        "i386" => Need::Kernel,
        "x86_64" => Need::Kernel64,
        _ => Need::VirtKernel(arch),
    };
    skip_unless(&[Need::Qemu(arch), Need::Bin, kernel])
}

/// QEMU's status when `arch`'s example kernel finished (expected.toml's `exit_success`).
pub fn exit_success(arch: &str) -> i32 {
    expected_of(arch)["kernel"]["exit_success"]
        .as_integer()
        .unwrap() as i32
}

/// `kern-profile stacks ARGS`, killed after a minute.
pub fn stacks(args: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.arg("stacks").args(args);
    output_with_timeout(c, Duration::from_secs(60))
}

/// The frame names of one vCPU's block of `stacks` output, innermost first.
pub fn frames_of(block: &str) -> Vec<String> {
    block
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            let name = l.split_once(" in ").map_or("", |(_, n)| n);
            name.split(" (").next().unwrap_or("").trim().to_string()
        })
        .collect()
}

/// Waits until `com1` holds `marker` (before it, the firmware or an earlier phase runs).
pub fn wait_for_console(com1: &Path, marker: &str) {
    let t = Instant::now();
    while !std::fs::read_to_string(com1).is_ok_and(|s| s.contains(marker)) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the kernel did not print {marker:?}: {}",
            std::fs::read_to_string(com1).unwrap_or_default()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Boots `kernel` (an example kernel of `arch`) with a gdbstub on a Unix socket in a fresh
/// scratch directory `name`, `args` to scripts/guests/run-kernel.sh, no memtrace, and waits
/// until its console says `marker`: the directory, the stub's address and the guest's
/// thread (`alone`: for a test that runs [`crate::alone`]).
pub fn boot_with_gdbstub(
    arch: &str,
    kernel: &Path,
    name: &str,
    alone: bool,
    args: &[&str],
    marker: &str,
) -> (PathBuf, String, JoinHandle<Output>) {
    let dir = scratch(name);
    let sock = dir.join("gdb.sock");
    let mut all = run_kernel_args(arch, kernel, &dir.join("com1"), None);
    all.extend([
        "-gdb".into(),
        format!("unix:{},server=on,wait=off", sock.display()),
    ]);
    all.extend(args.iter().map(|s| s.to_string()));
    let qemu = run_kernel_command(&all);
    let limit = Duration::from_secs(300);
    let guest = thread::spawn(move || match alone {
        true => output_of_alone_test(qemu, limit),
        false => output_with_timeout(qemu, limit),
    });
    wait_for_console(&dir.join("com1"), marker);
    let attach = format!("unix:{}", sock.display());
    (dir, attach, guest)
}

/// `kern-profile record --gdb --rate 200` of `arch`'s example kernel booted by
/// run-kernel.sh with `args` (no memtrace) in a fresh scratch directory `name`; asserts
/// QEMU's status (the kernel's success) came back and record said so. The output directory
/// and record's stderr (printed).
pub fn record_gdb(arch: &str, name: &str, args: &[&str]) -> (PathBuf, String) {
    let dir = scratch(name);
    let mut all = run_kernel_args(arch, &example_kernel(arch), &dir.join("com1"), None);
    all.extend(args.iter().map(|s| s.to_string()));
    let qemu = run_kernel_command(&all);
    let out_dir = dir.join("out");
    let mut c = Command::new(bin());
    c.args(["record", "--gdb", "--rate", "200", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(qemu.get_program())
        .args(qemu.get_args());
    let out = output_with_timeout(c, Duration::from_secs(600));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("{err}");
    let success = exit_success(arch);
    assert_eq!(out.status.code(), Some(success), "QEMU's status: {err}");
    assert!(
        err.contains(&format!("QEMU exited (status {success})")),
        "{err}"
    );
    (out_dir, err)
}

/// The gap, in points of share, that a stop's weighing by host time leaves between a
/// documented function's self share sampled through the stub and its exact share
/// (expected.toml's `self_share`, by real function: under TCG a stop lands at a block
/// boundary, never in code inlined mid-block), before sampling error. Measured on QEMU
/// 7.2.22, 10.0.2 and 11.1.3, x86_64, riscv64 and aarch64, 270 to 2,000 workload samples a
/// run: 6.9 points at most on quiet runs. Under CI's load, on 10.0.2 and 11.1.3 alike, x86_64
/// runs fall in two groups: blend's loop costs the host twice the time per instruction in
/// some (blend 0.32 to 0.39 against 0.231 exact, hot_leaf down to 0.355 against 0.503; 0.16 to
/// 0.25 in the others; 12 runs here at load 0.8 to 2, two CI runs), so the bias is 17 points.
pub const SHARE_BIAS: f64 = 0.17;

/// How far a share sampled `n` times may lie from `want`: the bias plus three standard
/// errors of a share of `n` samples. A loaded machine gives fewer looks, and the bound
/// widens with them (222 samples of a 50% share: 27 points; 2,000: 20), instead of a fixed
/// bound that a quiet machine's luck had set (12 points failed at 222 samples, load 5-7).
pub fn share_bound(want: f64, n: u64) -> f64 {
    let p = want.clamp(0.0, 1.0);
    SHARE_BIAS + 3.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt()
}

/// Each documented function's self share in `counts` (by real function) within
/// [`share_bound`] of its exact share in `arch`'s expected.toml.
pub fn assert_real_function_shares(arch: &str, counts: &BTreeMap<String, u64>) {
    let total: u64 = counts.values().sum();
    for f in expected_of(arch)["cpu"]["function"].as_array().unwrap() {
        let symbol = f["symbol"].as_str().unwrap();
        let want = f["self_share"].as_float().unwrap();
        let got = share(counts, symbol);
        let bound = share_bound(want, total);
        println!("{arch} {symbol}: {got:.3} sampled, {want:.3} by exact counts (bound {bound:.3})");
        assert!(
            (got - want).abs() < bound,
            "{arch} {symbol}: {got:.3} sampled, {want:.3} by exact counts ({total} samples, bound {bound:.3})"
        );
    }
}

/// The stacks of the workload (`_start;kmain;…run_workload;…`) in `folded`, and their samples.
pub fn workload_of(folded: Vec<(Vec<String>, u64)>) -> (Vec<(Vec<String>, u64)>, u64) {
    let workload: Vec<(Vec<String>, u64)> = folded
        .into_iter()
        .filter(|(s, _)| s.len() > 2 && s[2].ends_with("run_workload"))
        .collect();
    let n = workload.iter().map(|(_, c)| c).sum();
    (workload, n)
}
