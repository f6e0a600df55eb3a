//! The riscv64 and aarch64 example kernels (examples/kernel-riscv64, examples/kernel-aarch64)
//! booted in a real qemu-system-riscv64 / qemu-system-aarch64 on the `virt` board, without the
//! plugin (virt_profile.rs profiles them with it): each mode exits QEMU by itself with the
//! documented status, prints the checksums of its expected.toml, and the allocation phase
//! writes the documented memtrace through semihosting.
//!
//! The kernels are built (or found up to date) by scripts/guests/build-kernel.sh --arch ARCH,
//! booted as scripts/guests/run-kernel.sh --arch ARCH does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kern_profile_e2e::{
    expected_virt as expected, output_with_timeout, run_kernel_args, run_kernel_command, scratch,
    skip_unless, strings, virt_kernel as kernel, Need,
};

/// Whether `arch`'s test should return at once: its QEMU or its kernel is missing.
fn skip(arch: &'static str) -> bool {
    skip_unless(&[Need::Qemu(arch), Need::VirtKernel(arch)])
}

struct Boot {
    status: Option<i32>,
    uart: String,
    memtrace: PathBuf,
}

/// Boots `arch`'s kernel as scripts/guests/run-kernel.sh does, with `append` and
/// `memtrace=FILE` on its command line and `extra` QEMU arguments.
fn boot(arch: &str, name: &str, append: &str, extra: &[&str]) -> Boot {
    let dir = scratch(&format!("virt-{arch}-{name}"));
    let memtrace = dir.join("memtrace.bin");
    let uart = dir.join("uart.txt");
    let mut args = run_kernel_args(arch, &kernel(arch), &uart, Some(&memtrace));
    args.extend(["-append".into(), append.into()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = output_with_timeout(run_kernel_command(&args), Duration::from_secs(120));
    Boot {
        status: out.status.code(),
        uart: std::fs::read_to_string(&uart).unwrap_or_default(),
        memtrace,
    }
}

fn int(e: &toml::Table, section: &str, key: &str) -> i64 {
    e[section][key].as_integer().unwrap()
}

/// Record count and the fewest and most frames per record of a memtrace file.
fn memtrace_census(path: &Path) -> (u64, usize, usize) {
    let data = std::fs::read(path).unwrap();
    let (mut off, mut n, mut lo, mut hi) = (0, 0, usize::MAX, 0);
    while off < data.len() {
        let nlen = data[off] as usize;
        let nframe = data[off + 1 + nlen + 17] as usize;
        off += 1 + nlen + 18 + 8 * nframe;
        n += 1;
        lo = lo.min(nframe);
        hi = hi.max(nframe);
    }
    assert_eq!(
        off,
        data.len(),
        "{}: the last record is cut",
        path.display()
    );
    (n, lo, hi)
}

fn check_default_run(arch: &'static str) {
    if skip(arch) {
        return;
    }
    let e = expected(arch);
    let b = boot(arch, "default", "", &[]);
    assert_eq!(b.status, Some(0), "{arch}: UART:\n{}", b.uart);
    let checksum = e["kernel"]["checksum"].as_str().unwrap();
    assert!(
        b.uart
            .contains(&format!("phase cpu: done, checksum {checksum}")),
        "{arch}: {}",
        b.uart
    );
    assert_eq!(b.uart.lines().last(), Some("done"), "{arch}: {}", b.uart);
    let bytes = std::fs::metadata(&b.memtrace).unwrap().len();
    assert_eq!(bytes as i64, int(&e, "memtrace", "bytes"), "{arch}");
    let (records, lo, hi) = memtrace_census(&b.memtrace);
    assert_eq!(records as i64, int(&e, "memtrace", "records"), "{arch}");
    assert_eq!(lo as i64, int(&e, "memtrace", "min_frames"), "{arch}");
    assert_eq!(hi as i64, int(&e, "memtrace", "max_frames"), "{arch}");
}

fn check_smp_run(arch: &'static str) {
    if skip(arch) {
        return;
    }
    let e = expected(arch);
    let b = boot(
        arch,
        "smp",
        "smp=on",
        &["-smp", "4", "-accel", "tcg,thread=multi"],
    );
    assert_eq!(b.status, Some(0), "{arch}: UART:\n{}", b.uart);
    assert!(
        b.uart.contains("smp: started 3 secondary CPU(s)"),
        "{arch}: {}",
        b.uart
    );
    for (cpu, sum) in strings(&e["kernel"]["smp"]["checksums"]).iter().enumerate() {
        assert!(
            b.uart
                .contains(&format!("smp: cpu {cpu} checksum {sum}\r\n")),
            "{arch}: cpu {cpu}: {}",
            b.uart
        );
    }
    assert_eq!(b.uart.lines().last(), Some("done"), "{arch}: {}", b.uart);
}

fn check_user_run(arch: &'static str) {
    if skip(arch) {
        return;
    }
    let e = expected(arch);
    let b = boot(arch, "user", "user=on", &[]);
    assert_eq!(b.status, Some(0), "{arch}: UART:\n{}", b.uart);
    let sum = e["kernel"]["user"]["checksum"].as_str().unwrap();
    assert!(
        b.uart.contains(&format!("user: done, checksum {sum}")),
        "{arch}: {}",
        b.uart
    );
    assert!(
        b.uart.contains("phase user: done, exit code 0"),
        "{arch}: {}",
        b.uart
    );
    assert_eq!(b.uart.lines().last(), Some("done"), "{arch}: {}", b.uart);
}

fn check_failures(arch: &'static str) {
    if skip(arch) {
        return;
    }
    let e = expected(arch);
    let b = boot(arch, "panic", "crash=panic", &[]);
    assert_eq!(
        b.status,
        Some(int(&e, "kernel", "exit_panic") as i32),
        "{arch}: {}",
        b.uart
    );
    assert!(b.uart.contains("PANIC: crash=panic"), "{arch}: {}", b.uart);
    let b = boot(arch, "fault", "crash=fault", &[]);
    let want = int(&e, "kernel", "exit_cpu_exception") as i32;
    assert_eq!(b.status, Some(want), "{arch}: {}", b.uart);
    assert!(b.uart.contains("EXCEPTION: "), "{arch}: {}", b.uart);
}

#[test]
fn riscv64_default_run_checksum_and_memtrace() {
    check_default_run("riscv64");
}

#[test]
fn aarch64_default_run_checksum_and_memtrace() {
    check_default_run("aarch64");
}

#[test]
fn riscv64_smp_every_hart_runs_its_workload() {
    check_smp_run("riscv64");
}

#[test]
fn aarch64_smp_every_cpu_runs_its_workload() {
    check_smp_run("aarch64");
}

#[test]
fn riscv64_user_program_runs_and_exits() {
    check_user_run("riscv64");
}

#[test]
fn aarch64_user_program_runs_and_exits() {
    check_user_run("aarch64");
}

#[test]
fn riscv64_panic_and_fault_exit_with_their_status() {
    check_failures("riscv64");
}

#[test]
fn aarch64_panic_and_fault_exit_with_their_status() {
    check_failures("aarch64");
}
