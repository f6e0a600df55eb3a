//! A kernel as Asterinas' OSDK leaves it: the x86_64 example kernel (examples/kernel64) with
//! e_machine patched to EM_386 (3) in a copy, still a 64-bit ELF, booted as OSDK boots it
//! (`qemu-system-x86_64 -kernel COPY`: QEMU's multiboot loader takes it through the header's
//! address fields). `kern-profile record -- QEMU...` samples it, says the ELF is taken as
//! x86_64 (record's note before the run, the plugin's `elf=` line, the report's warning), and
//! its hottest functions and shares are the unmarked kernel's; `kern-profile RAW COPY` names
//! them the same. The plugin's `alloc=` hooks it from the re-marked ELF as from the unmarked
//! one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kern_profile_e2e::{
    bin, boot_kernel, expected64, kern_profile, kernel64, output_with_timeout, root,
    run_kernel_command, scratch, skip_x86_64,
};

const LIMIT: Duration = Duration::from_secs(300);
/// Instructions between samples: ~24,000 samples at 2,000 rounds (as e2e/tests/x86_64.rs).
const PERIOD: &str = "10000";
const ROUNDS: &str = "rounds=2000";
/// `kern_profile_arch::REMARKED_NOTE`, as users read it.
const NOTE: &str =
    "the ELF is marked i386 (e_machine EM_386) but is 64-bit (ELFCLASS64): taken as x86_64";

/// A copy of the x86_64 kernel in `dir` whose e_machine says i386, as OSDK patches it.
fn remarked_copy(dir: &Path) -> PathBuf {
    let mut elf = std::fs::read(kernel64()).unwrap();
    assert_eq!(elf[4], 2, "kernel64.elf is a 64-bit ELF");
    assert_eq!(u16::from_le_bytes([elf[18], elf[19]]), 62, "EM_X86_64");
    elf[18..20].copy_from_slice(&3u16.to_le_bytes());
    let copy = dir.join("remarked.elf");
    std::fs::write(&copy, elf).unwrap();
    copy
}

/// The QEMU command booting `kernel` in qemu-system-x86_64 as run-kernel.sh does (console on
/// stdio, no memtrace): `-kernel KERNEL`, as OSDK gives it.
fn qemu_argv(kernel: &Path) -> Vec<OsString> {
    let args: Vec<String> = [
        "--arch",
        "x86_64",
        "--kernel",
        &kernel.display().to_string(),
        "--memtrace",
        "none",
        "-append",
        ROUNDS,
    ]
    .map(String::from)
    .to_vec();
    let c = run_kernel_command(&args);
    std::iter::once(c.get_program().to_os_string())
        .chain(c.get_args().map(|a| a.to_os_string()))
        .collect()
}

/// What `record` printed and left.
struct Recorded {
    stderr: String,
    /// The hottest functions' table: (name, self share in %).
    top: Vec<(String, f64)>,
    raw: PathBuf,
}

/// `kern-profile record --period PERIOD -o out -- QEMU... -kernel KERNEL`, in `dir`.
fn record(dir: &Path, kernel: &Path) -> Recorded {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args(["record", "--period", PERIOD, "-o", "out", "--"])
        .args(qemu_argv(kernel))
        .stdin(Stdio::null())
        .env("XDG_CACHE_HOME", dir.join("cache"));
    let out = output_with_timeout(c, LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(33),
        "the kernel's success\n{stderr}"
    );
    assert!(stdout.contains("phase cpu: done"), "the console: {stdout}");
    Recorded {
        top: top_functions(&stderr),
        raw: dir.join("out/cpu.raw"),
        stderr,
    }
}

/// The table `record` prints: `  Self%  Total%  Function` rows, hottest first.
fn top_functions(stderr: &str) -> Vec<(String, f64)> {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("kern-profile: hottest functions"))
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let share = w.next()?.trim_end_matches('%').parse().ok()?;
            Some((w.nth(1)?.to_string(), share))
        })
        .collect()
}

#[test]
fn record_profiles_the_remarked_kernel_as_the_unmarked_one() {
    if skip_x86_64() {
        return;
    }
    let dir = scratch("remarked-elf");
    let copy = remarked_copy(&dir);
    let (plain_dir, remarked_dir) = (dir.join("plain"), dir.join("remarked"));
    std::fs::create_dir_all(&plain_dir).unwrap();
    std::fs::create_dir_all(&remarked_dir).unwrap();
    let plain = record(&plain_dir, &kernel64());
    let remarked = record(&remarked_dir, &copy);

    // Said before the run (record), at the plugin's start (elf=) and in the report.
    let said = |prefix: &str| format!("kern-profile: {prefix}{}: {NOTE}", copy.display());
    let e = &remarked.stderr;
    let (before, run) = (said("note: "), said("note: elf="));
    assert!(e.contains(&before), "record's note: {e}");
    assert!(e.contains(&run), "the plugin's line: {e}");
    assert!(e.contains(&said("warning: ")), "the report's warning: {e}");
    assert!(
        e.find(&before) < e.find("kern-profile: QEMU "),
        "the note comes before QEMU runs: {e}"
    );
    assert!(!plain.stderr.contains("marked i386"), "{}", plain.stderr);

    // Sampled and named as the unmarked kernel: the same functions, hottest first, at the
    // same shares (the same instructions, a sample every PERIOD).
    let hottest = expected64()["kernel"]["hottest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        remarked
            .top
            .iter()
            .find(|(f, _)| !f.starts_with('['))
            .map(|t| &t.0),
        Some(&hottest),
        "{e}"
    );
    // Every function above 1% in either run, at the same share in the other.
    let share = |r: &Recorded, f: &str| r.top.iter().find(|t| t.0 == f).map(|t| t.1);
    for (f, _) in remarked.top.iter().chain(&plain.top).filter(|t| t.1 >= 1.0) {
        let (a, b) = (share(&remarked, f), share(&plain, f));
        assert!(
            a.zip(b).is_some_and(|(a, b)| (a - b).abs() < 1.0),
            "{f}: {a:?}% re-marked, {b:?}% unmarked\n{e}\n{}",
            plain.stderr
        );
    }

    // The report of the recording, from the re-marked ELF: the same names, the warning.
    let mut c = Command::new(bin());
    c.arg(&remarked.raw)
        .arg(&copy)
        .args(["-f", "text"])
        .stdin(Stdio::null());
    let out = output_with_timeout(c, LIMIT);
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{err}");
    assert!(text.contains(&hottest), "{text}");
    assert!(err.contains(&said("warning: ")), "{err}");
}

/// The plugin alone, `alloc=SPEC,elf=COPY`: the hooks found in the re-marked ELF (symbols and
/// DWARF arguments), the note at start, the allocation report the unmarked kernel's.
#[test]
fn alloc_hooks_the_remarked_kernel_as_the_unmarked_one() {
    if skip_x86_64() {
        return;
    }
    let dir = scratch("remarked-elf-alloc");
    let copy = remarked_copy(&dir);
    let spec = root().join("examples/kernel-common/alloc.spec");
    let report = |kernel: &Path, name: &str| {
        let args = format!("alloc={},elf={}", spec.display(), kernel.display());
        let run = boot_kernel("x86_64", kernel, name, &args, "rounds=100");
        let text = kern_profile(&[
            "--alloc",
            run.raw.to_str().unwrap(),
            kernel.to_str().unwrap(),
            "-f",
            "text",
            "-o",
            "-",
        ]);
        (run.stderr, text)
    };
    let (plain_err, plain) = report(&kernel64(), "remarked-alloc-plain");
    let (err, remarked) = report(&copy, "remarked-alloc");
    let note = format!("kern-profile: note: elf={}: {NOTE}", copy.display());
    assert!(err.contains(&note), "{err}");
    assert!(!plain_err.contains("marked i386"), "{plain_err}");
    assert!(remarked.contains("allocator `kmalloc`"), "{remarked}");
    assert_eq!(remarked, plain);
}
