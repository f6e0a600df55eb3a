//! The plugin refuses bad arguments before the guest runs, and a killed QEMU leaves a
//! readable file.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use kern_profile_e2e::*;

fn refused(args: &str, needle: &str) {
    let dir = scratch("bad-args");
    let mut c = qemu(&dir, None, "");
    c.arg("-plugin")
        .arg(format!("{},{args}", plugin().display()));
    let out = output_with_timeout(c, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(33),
        "QEMU ran the guest with `{args}`"
    );
    assert!(!out.status.success(), "`{args}` accepted");
    assert!(
        stderr.contains(needle),
        "`{args}`: stderr does not name `{needle}`: {stderr}"
    );
}

#[test]
fn bad_arguments_stop_qemu_with_a_message() {
    if skip_i386() {
        return;
    }
    let out = scratch("bad-args-out").join("raw");
    let out = out.display();
    refused(&format!("out={out},bogus=1"), "bogus");
    refused(&format!("out={out},delay=ten"), "delay");
    refused(&format!("out={out},period=0"), "period");
    refused(&format!("out={out},delay=10,period=1000"), "period");
    refused(&format!("out={out},depth=-3"), "depth");
    refused(&format!("out={out},exact=maybe"), "exact");
    refused("delay=10", "out");
    refused("out=/nonexistent-dir/raw", "/nonexistent-dir/raw");
}

#[test]
fn sigkill_leaves_a_readable_file() {
    sigkill_leaves_a_readable("sigkill", "period=10000");
}

/// Compressed (`record`'s recordings), a stream flushed after every batch: all the batches
/// before the kill decompress, and the file reads as a plain one cut there.
#[test]
fn sigkill_leaves_a_readable_compressed_file() {
    sigkill_leaves_a_readable("sigkill-zstd", "period=10000,compress=on");
}

fn sigkill_leaves_a_readable(name: &str, args: &str) {
    if skip_i386() {
        return;
    }
    let dir = scratch(name);
    // A long run (rounds=200000, ~11 s bare), killed after 3 s.
    let mut c = qemu(&dir, Some(args), "rounds=200000");
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let raw = dir.join("raw");
    let head = std::fs::read(&raw).unwrap();
    assert_eq!(
        head.starts_with(&kern_profile_format::compressed::ZSTD_MAGIC),
        args.contains("compress=on"),
        "{args}"
    );
    let c = census(&raw);
    assert!(c.stats.is_none(), "no statistics record after SIGKILL");
    let samples = c.samples;
    assert!(
        samples > 1000,
        "only {samples} samples flushed before the kill"
    );
    // The aggregator uses it (a torn last record only warns).
    let k = kernel();
    let text = kern_profile(&[raw.to_str().unwrap(), k.to_str().unwrap(), "-f", "text"]);
    assert!(text.contains(&hottest()), "{text}");
}

#[test]
fn sigterm_and_sigint_end_the_file_cleanly() {
    if skip_i386() {
        return;
    }
    for signal in ["TERM", "INT"] {
        let dir = scratch(&format!("sig{signal}"));
        let mut c = qemu(&dir, Some("period=10000"), "rounds=200000");
        let child = c
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Signal a guest that runs: once samples reach the file (QEMU, its signal handlers
        // and the plugin are up; a fixed sleep raced QEMU's start on a loaded machine).
        let raw = dir.join("raw");
        let t = std::time::Instant::now();
        while std::fs::metadata(&raw).map_or(0, |m| m.len()) < 64 << 10 {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "SIG{signal}: no samples"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let killed = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("samples written"),
            "SIG{signal}: no summary: {stderr}"
        );
        let c = census(&dir.join("raw"));
        let (samples, stats) = (c.samples, c.stats);
        assert!(c.truncation.is_none(), "SIG{signal}: torn file");
        let stats = stats.unwrap_or_else(|| panic!("SIG{signal}: no statistics record"));
        assert_eq!(stats.samples, samples, "SIG{signal}");
        assert!(samples > 1000, "SIG{signal}: {samples} samples");
    }
}

/// SIGTERM once the guest halted (`halt=on`: `cli; hlt` for good, QEMU left running, as one
/// stops a real kernel), ten times, by host time and by instructions: each run ends its file
/// with the statistics record, counting every sample in it, and prints the summary.
#[test]
fn sigterm_after_the_guest_halted_ends_the_file_cleanly() {
    if skip_i386() {
        return;
    }
    for run in 0..10u64 {
        let sampling = if run % 2 == 0 {
            "delay=200"
        } else {
            "period=20000"
        };
        let what = format!("run {run} ({sampling})");
        let dir = scratch(&format!("halt-sigterm-{run}"));
        // Signal at varied moments after the halt (the idle callback, the timer's ticks).
        let after = Duration::from_millis(10 + 37 * run);
        let stderr = term_after_halt(&dir, sampling, "alloc_rounds=1", after, &what);
        assert!(
            stderr.contains("samples written"),
            "{what}: no summary: {stderr}"
        );
        let c = census(&dir.join("raw"));
        assert!(c.truncation.is_none(), "{what}: torn file");
        let stats = c
            .stats
            .unwrap_or_else(|| panic!("{what}: no statistics record: {stderr}"));
        assert_eq!(stats.samples, c.samples, "{what}");
        assert!(c.samples > 10, "{what}: {} samples", c.samples);
    }
}

/// `delay=`'s timer sleeps while every vCPU is halted: a guest halted for good (interrupts
/// off) gets no ticks, where it got 100,000 a second at `delay=10` (3.0 s of host CPU in a
/// 4 s run, 0.3 s now).
#[test]
fn a_halted_guest_gets_no_timer_ticks() {
    if skip_i386() {
        return;
    }
    let dir = scratch("halt-no-ticks");
    let after = Duration::from_secs(2);
    let stderr = term_after_halt(&dir, "delay=10", "alloc_rounds=0", after, "halted guest");
    let number_after = |key: &str| -> f64 {
        let at = stderr
            .find(key)
            .unwrap_or_else(|| panic!("no `{key}` in {stderr}"));
        let rest = &stderr[at + key.len()..];
        let end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        rest[..end].parse().unwrap()
    };
    let ticks = number_after("host timer: ");
    let halted_s = number_after("halted (not sampled): vCPU 0 ");
    // The ticks the halt would have had: at least 2 s at 10 µs.
    let halt_ticks = halted_s * 100_000.0;
    assert!(halted_s >= 2.0, "halted {halted_s} s: {stderr}");
    assert!(
        ticks < halt_ticks / 4.0,
        "{ticks} ticks delivered in a run halted {halted_s} s: {stderr}"
    );
}

/// Runs the i386 kernel with `halt=on` under `sampling`, sends QEMU SIGTERM `after` the guest
/// halted, and returns its stderr.
fn term_after_halt(
    dir: &Path,
    sampling: &str,
    append: &str,
    after: Duration,
    what: &str,
) -> String {
    let mut c = qemu(dir, Some(sampling), &format!("rounds=500 {append} halt=on"));
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    // COM1 ends lines with CR LF.
    while !std::fs::read_to_string(dir.join("com1")).is_ok_and(|s| s.contains("halted")) {
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("{what}: never halted");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(after);
    let killed = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    exit_within(child, Duration::from_secs(60), what)
}

/// Waits for `child` (stderr piped) to exit; a QEMU that does not is killed and fails `what`.
fn exit_within(mut child: std::process::Child, limit: Duration, what: &str) -> String {
    use std::io::Read;
    use wait_timeout::ChildExt;
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    });
    if child.wait_timeout(limit).unwrap().is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{what}: QEMU still running {limit:?} after SIGTERM: {}",
            reader.join().unwrap()
        );
    }
    reader.join().unwrap()
}

/// `out=` on a full disk (a file-size limit: `write()` fails with EFBIG, SIGXFSZ ignored):
/// the plugin reports the error once, while the guest still runs, and its summary counts
/// as written only samples whose bytes are in the file; the guest is not disturbed.
#[test]
fn a_full_disk_is_reported_once_when_it_happens_and_not_counted_as_written() {
    if skip_i386() {
        return;
    }
    // Far below the ~8 MB this run writes, far above what is written before it applies.
    const LIMIT: u64 = 2 << 20;
    let dir = scratch("full-disk");
    let c = qemu(&dir, Some("period=10000"), "rounds=8000 alloc_rounds=1");
    // SIGXFSZ ignored (inherited through exec) so that write() fails instead.
    let mut sh = std::process::Command::new("sh");
    sh.arg("-c")
        .arg(r#"trap "" XFSZ; exec "$@""#)
        .arg("sh")
        .arg(c.get_program())
        .args(c.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = sh.spawn().unwrap();
    // The limit goes on once samples reach the file: QEMU itself needs large files until
    // the guest runs (its RAM is a memfd, which the limit also caps).
    let raw = dir.join("raw");
    let t = std::time::Instant::now();
    while std::fs::metadata(&raw).map_or(0, |m| m.len()) < 8 << 10 {
        assert!(t.elapsed() < Duration::from_secs(60), "no output file");
        std::thread::sleep(Duration::from_millis(5));
    }
    let limited = std::process::Command::new("prlimit")
        .arg(format!("--pid={}", child.id()))
        .arg(format!("--fsize={LIMIT}"))
        .status()
        .unwrap();
    assert!(limited.success());
    let size_at_limit = std::fs::metadata(&raw).unwrap().len();
    assert!(
        size_at_limit < LIMIT,
        "the guest wrote {size_at_limit} bytes already"
    );
    // Each stderr line, with whether the guest had finished its CPU phase when it came.
    let com1 = dir.join("com1");
    let pipe = child.stderr.take().unwrap();
    let lines = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(pipe)
            .lines()
            .map_while(Result::ok)
            .map(|l| {
                let done =
                    std::fs::read_to_string(&com1).is_ok_and(|s| s.contains("phase cpu: done"));
                (l, done)
            })
            .collect::<Vec<_>>()
    });
    let status = {
        use wait_timeout::ChildExt;
        let s = child.wait_timeout(Duration::from_secs(300)).unwrap();
        s.unwrap_or_else(|| {
            let _ = child.kill();
            panic!("QEMU did not finish")
        })
    };
    let lines = lines.join().unwrap();
    let all: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(status.code(), Some(33), "the guest was disturbed: {all:#?}");
    let errors: Vec<&(String, bool)> = lines
        .iter()
        .filter(|(l, _)| l.contains("too large"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line: {all:#?}");
    let (error, guest_done) = errors[0];
    assert!(
        error.contains(&dir.join("raw").display().to_string()),
        "{error}"
    );
    assert!(
        !guest_done,
        "reported only after the guest's CPU phase: {all:#?}"
    );

    assert_eq!(std::fs::metadata(&raw).unwrap().len(), LIMIT);
    let summary = all
        .iter()
        .find(|l| l.contains("samples written"))
        .unwrap_or_else(|| panic!("no summary: {all:#?}"));
    let (written, dropped) = written_and_dropped(summary);
    let c = census(&raw);
    assert!(c.stats.is_none(), "no room for the statistics record");
    // A batch counts only once all of it is written: the one cut at the limit counts as
    // dropped, though its first records are in the file.
    assert!(
        written <= c.samples && c.samples < written + 2000,
        "summary: {written} written; the file holds {}",
        c.samples
    );
    assert!(written > 100 && dropped > 1000, "{summary}");
}

/// N and D of the summary's "N samples written, D dropped".
fn written_and_dropped(summary: &str) -> (u64, u64) {
    let number_before = |what: &str| -> u64 {
        let head = &summary[..summary.find(what).unwrap()];
        head.split_whitespace().last().unwrap().parse().unwrap()
    };
    (number_before(" samples written"), number_before(" dropped"))
}

/// The plugin build the QEMU on PATH does not load (`kern-profile-api7.so` on QEMU 10.0,
/// `kern-profile.so` on 11.1) says which one it does before QEMU refuses it, and QEMU exits
/// before the guest runs, writing nothing.
#[test]
fn the_other_build_names_the_one_this_qemu_loads() {
    if skip_i386() {
        return;
    }
    let fits = plugin_build_file();
    let other = ["kern-profile.so", "kern-profile-api7.so"]
        .into_iter()
        .find(|f| *f != fits)
        .unwrap();
    let other_path = plugin().with_file_name(other);
    if !other_path.exists() {
        assert!(
            std::env::var("KP_E2E").as_deref() != Ok("required"),
            "{} is missing: scripts/build.sh builds both plugin builds",
            other_path.display()
        );
        return;
    }
    let dir = scratch("other-build");
    let raw = dir.join("raw");
    let mut c = qemu(&dir, None, "");
    c.arg("-plugin")
        .arg(format!("{},out={}", other_path.display(), raw.display()));
    let out = output_with_timeout(c, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let ours = stderr
        .lines()
        .find(|l| l.starts_with("kern-profile: this plugin file is the build for"))
        .unwrap_or_else(|| panic!("no word from the plugin: {stderr}"));
    assert!(
        ours.contains(&format!("QEMU {} loads the API-", qemu_version()))
            && ours.contains(&format!(", {fits} (beside this one")),
        "{ours}"
    );
    assert!(stderr.contains("plugin requires API version"), "{stderr}");
    assert!(!raw.exists(), "nothing is written");
}
