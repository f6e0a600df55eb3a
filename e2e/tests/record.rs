//! `kern-profile record` and `kern-profile top` on the i386 example kernel in a real QEMU:
//! the console and QEMU's status passed through, the outputs and the documented hottest
//! function, `--window`, signals, the plugin found beside the binary or built into it, and
//! bad input refused by name with nothing left behind.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kern_profile_e2e::{
    alone, bin, census, hottest, kern_profile, kernel, output_with_timeout, parse_folded,
    plugin_build_file, qemu_console, scratch, skip_i386,
};

const LIMIT: Duration = Duration::from_secs(300);

/// The example kernel's QEMU command (console on stdio), `append` for its -append.
fn qemu_argv(append: &str) -> Vec<OsString> {
    let c = qemu_console(append);
    std::iter::once(c.get_program().to_os_string())
        .chain(c.get_args().map(|a| a.to_os_string()))
        .collect()
}

/// `kern-profile SUBCOMMAND ARGS -- QEMU...`, in `dir`.
fn kp_session(bin: &Path, dir: &Path, args: &[&str], qemu: &[OsString]) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(dir)
        .args(args)
        .arg("--")
        .args(qemu)
        .stdin(Stdio::null())
        // The built-in plugin, where one is used, goes to a cache of the test's own.
        .env("XDG_CACHE_HOME", dir.join("cache"));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `kern-profile ARGS -- QEMU` on the example kernel (`append` for its -append) in `dir`,
/// run to its end: its output, and its standard output and error as text.
fn run_session(dir: &Path, args: &[&str], append: &str) -> (Output, String, String) {
    let out = output_with_timeout(kp_session(&bin(), dir, args, &qemu_argv(append)), LIMIT);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    (out, stdout, stderr)
}

/// The table `record` prints: function names, hottest first.
fn top_functions(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("kern-profile: hottest functions"))
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect()
}

fn no_leftovers(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with('.') && !name.ends_with(".recording"),
            "left behind: {name}"
        );
    }
}

#[test]
fn record_draws_the_example_kernel() {
    if skip_i386() {
        return;
    }
    let dir = scratch("record");
    let (out, stdout, stderr) = run_session(&dir, &["record", "-o", "out"], "");
    assert_eq!(
        out.status.code(),
        Some(33),
        "QEMU's status passes through\n{stderr}"
    );
    assert!(stdout.contains("phase cpu: done"), "the console: {stdout}");
    // The plugin build this QEMU loads, beside the binary (scripts/build.sh puts both
    // there), checked.
    let beside = bin()
        .canonicalize()
        .unwrap()
        .with_file_name(plugin_build_file());
    assert!(
        stderr.contains(&format!("with plugin {} (installed)", beside.display())),
        "{stderr}"
    );
    let top = top_functions(&stderr);
    let first = top.iter().find(|f| !f.starts_with('['));
    assert_eq!(first, Some(&hottest()), "{stderr}");
    for f in ["kernel::workload::recurse", "kernel::workload::cold_leaf"] {
        assert!(top.iter().any(|t| t == f), "{f} not in the top: {stderr}");
    }
    let o = dir.join("out");
    for f in ["cpu.svg", "report.txt", "profile.json", "cpu.raw"] {
        assert!(
            stderr.contains(&o.join(f).display().to_string()),
            "{f} not named: {stderr}"
        );
    }
    let svg = std::fs::read_to_string(o.join("cpu.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains(&hottest()));
    let report = std::fs::read_to_string(o.join("report.txt")).unwrap();
    assert!(
        report.contains("Top ") && report.contains(&hottest()),
        "{report}"
    );
    let json = std::fs::read_to_string(o.join("profile.json")).unwrap();
    assert!(json.starts_with('{') && json.contains("vCPU 0") && json.contains(&hottest()));
    let c = census(&o.join("cpu.raw"));
    assert!(c.samples > 0 && c.stats.is_some() && c.truncation.is_none());
    no_leftovers(&o);
    // The recording draws again later.
    let again = kern_profile(&[
        o.join("cpu.raw").to_str().unwrap(),
        kernel().to_str().unwrap(),
        "-f",
        "text",
    ]);
    assert!(again.contains(&hottest()));
}

/// `--timeline-samples` reaches record's Firefox profile: at most that many samples, each
/// vCPU's every Nth weighing N, the weights adding up to the recording's samples, and a
/// warning that says so.
#[test]
fn record_caps_the_firefox_timeline_it_draws() {
    if skip_i386() {
        return;
    }
    let dir = scratch("record-timeline-cap");
    let (out, _, stderr) = run_session(
        &dir,
        &["record", "--timeline-samples", "50", "-o", "out"],
        "",
    );
    assert_eq!(out.status.code(), Some(33), "{stderr}");
    let o = dir.join("out");
    let samples = census(&o.join("cpu.raw")).samples;
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(o.join("profile.json")).unwrap()).unwrap();
    let (mut held, mut weight, mut stride) = (0, 0, 0);
    for t in json["threads"].as_array().unwrap() {
        let w = t["samples"]["weight"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        held += t["samples"]["length"].as_u64().unwrap();
        weight += w.iter().map(|x| x.as_u64().unwrap()).sum::<u64>();
        stride = stride.max(w.first().and_then(|x| x.as_u64()).unwrap_or(1));
    }
    println!("{samples} samples: {held} held, weighing {weight}, every {stride}th");
    // About 1,800 samples on a quiet host, fewer on a loaded one (delay= ticks late).
    assert!(samples > 100, "only {samples} samples: nothing to thin");
    assert!(held <= 50 && stride >= 2, "{held} held, every {stride}th");
    assert!(
        weight.abs_diff(samples) < stride,
        "{weight} weighed, {samples} recorded"
    );
    assert!(
        stderr.contains(&format!(
            "warning: the Firefox profile holds each vCPU's every {stride}th sample"
        )) && stderr.contains("--timeline-samples 50"),
        "{stderr}"
    );
}

#[test]
fn record_window_samples_only_inside_the_function() {
    if skip_i386() {
        return;
    }
    let dir = scratch("record-window");
    let window = "kernel::workload::stage_middle";
    for mode in ["--period=10000", "--delay=10"] {
        let args = ["record", mode, "--window", "stage_middle", "-o", "w"];
        let (out, _, stderr) = run_session(&dir, &args, "");
        assert_eq!(out.status.code(), Some(33), "{mode}: {stderr}");
        assert!(stderr.contains(",window=0x"), "{stderr}");
        let raw = dir.join("w/cpu.raw");
        let k = kernel();
        let folded = parse_folded(&kern_profile(&[
            raw.to_str().unwrap(),
            k.to_str().unwrap(),
            "-f",
            "folded",
            "-o",
            "-",
        ]));
        let total: u64 = folded.iter().map(|f| f.1).sum();
        assert!(total > 0, "{mode}: no samples");
        for (stack, n) in &folded {
            assert!(
                stack.iter().any(|f| f == window),
                "{mode}: {n} sample(s) outside {window}: {}",
                stack.join(";")
            );
        }
    }
}

#[test]
fn record_stops_qemu_cleanly_on_sigterm() {
    if skip_i386() {
        return;
    }
    // SIGTERM to kern-profile alone, as `kill` sends it.
    stop_record_with("sigterm", |child| ["TERM".into(), child.to_string()]);
}

#[test]
fn record_stops_qemu_cleanly_on_ctrl_c() {
    if skip_i386() {
        return;
    }
    // Ctrl-C: the terminal sends SIGINT to the whole foreground process group, kern-profile
    // and its QEMU alike (the child leads a group of its own here).
    stop_record_with("ctrl-c", |child| ["INT".into(), format!("-{child}")]);
}

/// Runs `record` on a long guest, sends the signal `kill_args` names (signal, then pid or
/// -pgid) once samples arrive, and checks QEMU stopped in order and the recording was drawn.
fn stop_record_with(name: &str, kill_args: impl Fn(u32) -> [String; 2]) {
    use std::os::unix::process::CommandExt;
    let dir = scratch(&format!("record-{name}"));
    let child = kp_session(
        &bin(),
        &dir,
        &["record", "-o", "out"],
        &qemu_argv("rounds=100000000"),
    )
    .stdout(std::fs::File::create(dir.join("console.txt")).unwrap())
    .stderr(Stdio::piped())
    .process_group(0)
    .spawn()
    .unwrap();
    // Wait for the workload (the console says so: a loaded host can keep the guest in its
    // firmware for a while) and for samples in the file, not for a time.
    let partial = dir.join("out/cpu.raw.recording");
    let start = Instant::now();
    let in_workload = || {
        std::fs::read_to_string(dir.join("console.txt"))
            .is_ok_and(|s| s.contains("phase cpu: start"))
    };
    while !in_workload() || std::fs::metadata(&partial).map_or(0, |m| m.len()) < 64 * 1024 {
        assert!(start.elapsed() < LIMIT, "{name}: no samples came");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A moment of the workload, for the table's hottest function.
    std::thread::sleep(Duration::from_millis(500));
    let [signal, target] = kill_args(child.id());
    // `--`: procps' kill takes a bare `-PGID` for an option.
    let killed = Command::new("kill")
        .args(["-s", &signal, "--", &target])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name}: QEMU's status: {stderr}"
    );
    assert!(stderr.contains("stopped by a signal"), "{name}: {stderr}");
    let c = census(&dir.join("out/cpu.raw"));
    assert!(c.stats.is_some(), "{name}: the plugin completed the file");
    assert!(dir.join("out/cpu.svg").exists());
    assert!(dir.join("out/report.txt").exists());
    assert!(
        top_functions(&stderr).contains(&hottest()),
        "{name}: {stderr}"
    );
}

#[test]
fn top_prints_tables_and_keeps_the_recording() {
    if skip_i386() {
        return;
    }
    let dir = scratch("top");
    let args = ["top", "--rows", "8", "-o", "t"];
    let (out, stdout, stderr) = run_session(&dir, &args, "rounds=20000");
    assert_eq!(out.status.code(), Some(33), "{stderr}");
    // Not a terminal: plain tables, the last one once QEMU exited.
    assert!(
        !stdout.contains('\u{1b}'),
        "no escape sequences in batch mode"
    );
    let last = stdout.rsplit("kern-profile top:").next().expect("a table");
    assert!(last.contains("QEMU exited, status 33"), "{stdout}");
    let rows: Vec<&str> = last
        .lines()
        .skip_while(|l| !l.contains("Function"))
        .skip(1)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(rows.len() <= 8, "{last}");
    assert_eq!(first_function(&rows), Some(hottest().as_str()), "{last}");
    assert!(stderr.contains("recording kept"), "{stderr}");
    assert!(std::fs::read_to_string(dir.join("t/console.log"))
        .unwrap()
        .contains("phase cpu: done"));
    assert_report_names_hottest(&dir.join("t/cpu.raw"));
}

/// The first function (not a `[marker]`) of a `top` table's rows.
fn first_function<'a>(rows: &[&'a str]) -> Option<&'a str> {
    rows.iter()
        .map(|r| r.split_whitespace().nth(3).unwrap_or(""))
        .find(|f| !f.starts_with('['))
}

/// `kern-profile report` of the kept recording names the hottest function.
fn assert_report_names_hottest(raw: &Path) {
    let report = kern_profile(&[
        "report",
        raw.to_str().unwrap(),
        kernel().to_str().unwrap(),
        "-f",
        "text",
    ]);
    assert!(report.contains(&hottest()));
}

/// `top --gdb`: QEMU started with a private gdbstub and sampled through it; the tables come
/// as the samples do and the last one, once QEMU exited, has the hottest function first; the
/// recording is kept for `report`.
#[test]
fn top_gdb_samples_through_the_gdbstub() {
    if skip_i386() {
        return;
    }
    // Host time: a second emulator on the same cores slows every stop.
    alone(|| {
        let dir = scratch("top-gdb");
        let args = ["top", "--gdb", "--rows", "8", "-o", "t"];
        let (out, stdout, stderr) = run_session(&dir, &args, "rounds=100000");
        assert_eq!(out.status.code(), Some(33), "{stderr}");
        assert!(stderr.contains("sampled through its gdbstub"), "{stderr}");
        let tables = stdout.matches("kern-profile top:").count();
        assert!(tables >= 2, "{tables} tables: {stdout}");
        let last = stdout.rsplit("kern-profile top:").next().expect("a table");
        assert!(last.contains("QEMU exited, status 33"), "{stdout}");
        let rows: Vec<&str> = last
            .lines()
            .skip_while(|l| !l.contains("Function"))
            .skip(1)
            .collect();
        assert_eq!(first_function(&rows), Some(hottest().as_str()), "{last}");
        assert!(stderr.contains("recording kept"), "{stderr}");
        assert_report_names_hottest(&dir.join("t/cpu.raw"));
        // --rate goes with --gdb only (a usage error).
        let (out, _, e) = run_session(&dir, &["top", "--rate", "50"], "");
        assert_eq!(out.status.code(), Some(2), "{e}");
        assert!(e.contains("--gdb"), "{e}");
    })
}

#[test]
fn a_lone_binary_uses_its_built_in_plugin() {
    if skip_i386() {
        return;
    }
    let dir = scratch("record-lone");
    let lone = dir.join("bin/kern-profile");
    std::fs::create_dir_all(lone.parent().unwrap()).unwrap();
    std::fs::copy(bin(), &lone).unwrap();
    let out = output_with_timeout(
        kp_session(&lone, &dir, &["record", "-o", "out"], &qemu_argv("")),
        LIMIT,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(33), "{stderr}");
    assert!(stderr.contains("(built in)"), "{stderr}");
    assert!(stderr.contains(&dir.join("cache/kern-profile").display().to_string()));
    assert!(dir.join("out/cpu.svg").exists());
}

fn refused(dir: &Path, args: &[&str], qemu: &[OsString]) -> (Output, String) {
    let out = output_with_timeout(kp_session(&bin(), dir, args, qemu), LIMIT);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    (out, stderr)
}

#[test]
fn bad_input_is_refused_by_name_and_leaves_nothing() {
    if skip_i386() {
        return;
    }
    let dir = scratch("record-bad");
    // A guest that stops at once: QEMU refuses a device after loading the plugin.
    let mut argv = qemu_argv("");
    argv.extend(["-device".into(), "no-such-device".into()]);
    let (_, e) = refused(&dir, &["record", "-o", "out"], &argv);
    assert!(
        e.contains("QEMU exited (status 1) before the plugin recorded a single sample"),
        "{e}"
    );
    assert!(
        e.contains("no-such-device"),
        "QEMU's own message passes: {e}"
    );
    assert!(!dir.join("out").exists(), "nothing left behind");
    // -kernel not an ELF (a real QEMU), and no --kernel.
    let not_elf = dir.join("kernel.bin");
    std::fs::write(&not_elf, b"\xb8\x00\x00 flat binary").unwrap();
    let argv: Vec<OsString> = qemu_argv("")
        .into_iter()
        .map(|a| {
            if a == kernel().as_os_str() {
                not_elf.clone().into()
            } else {
                a
            }
        })
        .collect();
    let (_, e) = refused(&dir, &["record", "-o", "out"], &argv);
    assert!(e.contains("kernel.bin: not an ELF"), "{e}");
    // The same with --kernel naming the ELF works past that check.
    let (_, e) = refused(
        &dir,
        &["record", "-o", "out", "--kernel", "/nonexistent.elf"],
        &argv,
    );
    assert!(
        e.contains("--kernel /nonexistent.elf: cannot read it"),
        "{e}"
    );
    // A QEMU binary that is not there.
    let (_, e) = refused(
        &dir,
        &["top", "-o", "out"],
        &["qemu-system-i387".into(), "-kernel".into(), kernel().into()],
    );
    assert!(
        e.contains("QEMU binary `qemu-system-i387` not found on PATH"),
        "{e}"
    );
    // An output directory that cannot be made.
    std::fs::write(dir.join("file"), b"").unwrap();
    let (_, e) = refused(&dir, &["record", "-o", "file/out"], &qemu_argv(""));
    assert!(
        e.contains("cannot write to the output directory file/out"),
        "{e}"
    );
    assert!(!dir.join("out").exists());
}
