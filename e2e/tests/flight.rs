//! The flight recorder (`record --flight`, the plugin's `flight=`) and `max_size=` on the
//! i386 example kernel in a real QEMU: a guest that spins, then panics, profiled by its last
//! seconds only; the ring written at exit when nothing triggers it; a recording cut at its
//! size and still read.

use std::process::{Command, Stdio};
use std::time::Duration;

use kern_profile_e2e::*;

const LIMIT: Duration = Duration::from_secs(300);

/// `kern-profile record ARGS -o out -- QEMU` on the example kernel (`append`), in `dir`.
fn record(dir: &std::path::Path, args: &[&str], append: &str) -> Command {
    let q = qemu_console(append);
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .arg("record")
        .args(args)
        .args(["-o", "out", "--"])
        .arg(q.get_program())
        .args(q.get_args())
        .stdin(Stdio::null())
        .env("XDG_CACHE_HOME", dir.join("cache"));
    c
}

/// Stacks holding `function`, and their samples.
fn samples_under(folded: &[(Vec<String>, u64)], function: &str) -> u64 {
    folded
        .iter()
        .filter(|(stack, _)| stack.iter().any(|f| f == function))
        .map(|(_, n)| n)
        .sum()
}

/// `record --flight 2 --flight-trigger panic` on a kernel that runs its workloads (about
/// 2 s), spins 4 s, then panics: the profile holds the spin and the panic path, and nothing
/// from before the window (the workloads).
#[test]
fn record_flight_keeps_the_seconds_before_the_panic() {
    if skip_i386() {
        return;
    }
    let dir = scratch("flight-record");
    let c = record(
        &dir,
        &["--flight", "2", "--flight-trigger", "panic"],
        "rounds=30000 spin_panic=4",
    );
    let out = output_with_timeout(c, LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(35), "the panic's status\n{stderr}");
    assert!(
        stderr.contains("flight recorder: vCPU 0 reached core::panicking::panic_fmt"),
        "{stderr}"
    );
    assert!(
        stderr.contains("samples before them left out (from the trigger on"),
        "{stderr}"
    );
    let raw = dir.join("out/cpu.raw");
    let folded = folded_of(&raw, &kernel(), &[]);
    let total: u64 = folded.iter().map(|(_, n)| n).sum();
    let spin = samples_under(&folded, "kernel::spin_panic::spin_before_panic");
    let panic = samples_under(&folded, "core::panicking::panic_fmt");
    let run = samples_under(&folded, "kernel::spin_panic::run");
    println!("{total} samples: {spin} in the spin, {panic} in the panic path");
    assert!(total >= 200, "{total} samples");
    assert!(panic >= 1, "no sample in the panic path: {folded:?}");
    assert!(
        spin as f64 >= 0.9 * total as f64,
        "{spin} of {total} in the spin"
    );
    // Everything is under spin_panic::run: no workload, no allocation phase.
    let before: Vec<_> = folded
        .iter()
        .filter(|(stack, _)| !stack.iter().any(|f| f == "kernel::spin_panic::run"))
        .collect();
    assert_eq!(run, total, "samples from before the window: {before:?}");
    assert!(census(&raw).stats.is_some());
}

/// Nothing triggers the ring: QEMU's exit writes its last second, compressed as `record`
/// writes; the samples before it are counted, not written.
#[test]
fn the_ring_is_written_at_exit() {
    if skip_i386() {
        return;
    }
    let run = boot("flight-exit", "flight=1,compress=on", "rounds=150000");
    let c = census(&run.raw);
    let left_out: u64 = run
        .stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("kern-profile: flight recorder: the last 1 s kept, ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no flight line: {}", run.stderr));
    assert!(run.stderr.contains("nothing triggered it: written at exit"));
    let stats = c.stats.expect("a statistics record");
    assert_eq!(stats.samples, c.samples);
    assert_eq!(stats.dropped, 0, "left-out samples are not drops");
    // The workload runs 3 to 8 s: most of it is before the last second.
    assert!(
        left_out > c.samples / 2,
        "{left_out} left out, {} kept",
        c.samples
    );
    assert!(c.samples > 100 && c.truncation.is_none(), "{}", c.samples);
}

/// `max_size=1M`: the file stops short of 1 MiB (its exit records after), holds every
/// sample before the cut, and reads.
#[test]
fn max_size_bounds_the_recording() {
    if skip_i386() {
        return;
    }
    let run = boot("max-size", "period=1000,max_size=1M", "rounds=20000");
    let len = std::fs::metadata(&run.raw).unwrap().len();
    assert!(len <= (1 << 20) + (16 << 10), "{len} bytes");
    assert!(
        run.stderr.contains("max_size=1048576: the output is full"),
        "{}",
        run.stderr
    );
    let c = census(&run.raw);
    assert!(c.samples > 5000, "{} samples", c.samples);
    assert_eq!(c.stats.map(|s| s.samples), Some(c.samples));
    let folded = folded_of(&run.raw, &kernel(), &[]);
    assert!(samples_under(&folded, "kmain") > 5000);
}

/// SIGUSR1 to `record --flight` writes the ring while the guest runs on (a hang: the guest
/// spins); SIGTERM then stops it, and the recording holds the ring and what came after.
#[test]
fn sigusr1_writes_the_ring_while_the_guest_runs() {
    if skip_i386() {
        return;
    }
    let dir = scratch("flight-usr1");
    let mut c = record(&dir, &["--flight", "2"], "rounds=20000 spin_panic=60");
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let partial = dir.join("out/cpu.raw.recording");
    let kill = |sig: &str| {
        let ok = Command::new("kill")
            .args([format!("-{sig}"), child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    };
    // The ring holds nothing for a while: only the header is written.
    let t = std::time::Instant::now();
    while !partial.exists() {
        assert!(t.elapsed() < LIMIT, "no recording started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    let before = std::fs::metadata(&partial).unwrap().len();
    kill("USR1");
    let t = std::time::Instant::now();
    while std::fs::metadata(&partial).map_or(0, |m| m.len()) < before + 4096 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "SIGUSR1 wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    kill("TERM");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(before < 4096, "{before} bytes written before SIGUSR1");
    assert!(
        stderr.contains("SIGUSR1: the flight recorder writes its ring"),
        "{stderr}"
    );
    assert!(
        stderr.contains("from the trigger on, everything"),
        "{stderr}"
    );
    assert!(
        !dir.join("out/cpu.raw.dump").exists(),
        "the trigger file is left"
    );
    let raw = dir.join("out/cpu.raw");
    assert!(census(&raw).samples > 100);
}

/// Debian's amd64 Linux panicking for real (no init: "VFS: Unable to mount root fs"), with
/// `flight_trigger=panic` found in the bzImage's kallsyms (its vmlinux has no symbols): the
/// ring is written at `panic`, the profile holds the panic path, and the boot before the
/// window is left out.
#[test]
fn a_linux_panic_writes_the_ring() {
    let dir = root().join("target/linux/x86_64");
    let vmlinuz = dir.join("vmlinuz");
    if !linux_guest_present(&dir, std::slice::from_ref(&vmlinuz)) {
        return;
    }
    let out_dir = scratch("flight-linux");
    let mut c = Command::new("bash");
    c.arg(root().join("scripts/guests/run-linux.sh"))
        .args([
            "--arch",
            "x86_64",
            "--timeout",
            "600",
            "--append",
            "rdinit=/nonexistent",
        ])
        .arg("--out")
        .arg(&out_dir)
        .arg("--plugin")
        .arg(format!(
            "flight=2,flight_trigger=panic,elf={},stacks=on,compress=on",
            vmlinuz.display()
        ))
        .env("KP_PLUGIN", plugin());
    let out = output_with_timeout(c, Duration::from_secs(700));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console = std::fs::read_to_string(out_dir.join("console.log")).unwrap_or_default();
    assert!(console.contains("Kernel panic"), "{console}");
    assert!(stderr.contains("reached panic after"), "{stderr}");
    let left_out: u64 = stderr
        .lines()
        .find_map(|l| {
            l.split("kern-profile: flight recorder: the last 2 s kept, ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no flight line: {stderr}"));
    assert!(left_out > 0, "{stderr}");
    let folded = folded_of(&out_dir.join("cpu.raw"), &vmlinuz, &[]);
    let total: u64 = folded.iter().map(|(_, n)| n).sum();
    let panicking = samples_under(&folded, "panic");
    println!("{total} samples, {panicking} under panic, {left_out} left out");
    assert!(
        total > 100 && panicking >= 1,
        "{total} samples, {panicking} under panic"
    );
}

/// A QMP command writes the ring: Debian's amd64 Linux recorded by `record --flight 3
/// --flight-trigger nmi`, QEMU started with a QMP socket; once the workload runs, QMP's
/// `inject-nmi` sends the vCPUs an NMI, Linux's `exc_nmi` takes it (and says so on the
/// console), the ring is written there, and the guest goes on to finish its workload.
#[test]
fn a_qmp_nmi_writes_the_ring() {
    use std::ffi::OsStr;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;

    let dir = root().join("target/linux/x86_64");
    let vmlinuz = dir.join("vmlinuz");
    if !linux_guest_present(&dir, std::slice::from_ref(&vmlinuz)) {
        return;
    }
    let out_dir = scratch("flight-nmi");
    let argv = run_linux_argv(&[
        OsStr::new("--arch"),
        "x86_64".as_ref(),
        "--out".as_ref(),
        out_dir.as_os_str(),
    ]);
    let sock = out_dir.join("qmp.sock");
    let mut c = Command::new(bin());
    c.current_dir(&out_dir)
        .args(["record", "--flight", "3", "--flight-trigger", "nmi", "-o"])
        .arg(out_dir.join("rec"))
        .arg("--")
        .args(&argv)
        .arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", sock.display()))
        .stdin(Stdio::null())
        .env("XDG_CACHE_HOME", out_dir.join("cache"));

    // QMP, once the workload runs: the greeting, capabilities, then the NMI.
    let console = out_dir.join("console.log");
    let qmp = std::thread::spawn(move || -> Result<String, String> {
        let t = std::time::Instant::now();
        while !std::fs::read_to_string(&console)
            .unwrap_or_default()
            .contains("workload start")
        {
            if t.elapsed() > Duration::from_secs(500) {
                return Err("the workload never started".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let s = UnixStream::connect(&sock).map_err(|e| format!("{}: {e}", sock.display()))?;
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut w = s;
        let mut said = String::new();
        for cmd in ["", "qmp_capabilities", "inject-nmi"] {
            if !cmd.is_empty() {
                writeln!(w, "{{\"execute\": \"{cmd}\"}}").map_err(|e| e.to_string())?;
            }
            let mut line = String::new();
            r.read_line(&mut line).map_err(|e| e.to_string())?;
            said.push_str(&line);
        }
        Ok(said)
    });
    let out = output_with_timeout(c, Duration::from_secs(700));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console = std::fs::read_to_string(out_dir.join("console.log")).unwrap_or_default();
    assert!(out.status.success(), "{stderr}\n{console}");
    let said = qmp
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("QMP: {e}\n{stderr}\n{console}"));
    assert_eq!(said.matches("\"return\": {}").count(), 2, "{said}");
    assert!(
        console.contains("NMI received for unknown reason"),
        "{console}"
    );
    assert!(console.contains("workload done"), "{console}");
    assert!(stderr.contains("reached exc_nmi after"), "{stderr}");
    let folded = folded_of(&out_dir.join("rec/cpu.raw"), &vmlinuz, &[]);
    let total: u64 = folded.iter().map(|(_, n)| n).sum();
    let in_nmi = samples_under(&folded, "exc_nmi");
    println!("{total} samples, {in_nmi} under exc_nmi");
    assert!(
        total > 100 && in_nmi >= 1,
        "{total} samples, {in_nmi} under exc_nmi"
    );
}
