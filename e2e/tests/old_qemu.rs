//! A QEMU too old for the plugin (Debian 12's own 7.2, `KP_QEMU_72_BIN`): `record` refuses it
//! before anything runs, naming its version and the way that works on it, `record --gdb`;
//! and `record --gdb` of the i386 example kernel on it samples the workload under
//! `_start;kmain` and returns the kernel's status.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kern_profile_e2e::*;

/// The QEMU 7.2 command booting the i386 example kernel (run-kernel.sh's arguments, 7.2's
/// wrapper as the program), COM1 to `dir/com1`.
fn qemu_72_command(q72: &Path, dir: &Path, rounds: u32) -> (PathBuf, Vec<String>) {
    let mut args = run_kernel_args("i386", &kernel(), &dir.join("com1"), None);
    args.extend(["--rounds".into(), rounds.to_string()]);
    args.extend(["--alloc-rounds".into(), "0".into()]);
    let qemu = run_kernel_command(&args);
    let args = qemu
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    (q72.join("qemu-system-i386"), args)
}

/// `kern-profile record OPTIONS -o dir/out -- QEMU`: its output and the output directory.
fn record(options: &[&str], dir: &Path, qemu: &(PathBuf, Vec<String>)) -> (Output, PathBuf) {
    let out_dir = dir.join("out");
    let mut c = Command::new(bin());
    c.arg("record")
        .args(options)
        .arg("-o")
        .arg(&out_dir)
        .arg("--")
        .arg(&qemu.0)
        .args(&qemu.1);
    (output_with_timeout(c, Duration::from_secs(600)), out_dir)
}

#[test]
fn record_names_the_version_and_the_gdbstub() {
    let Some(q72) = qemu_72_bin() else { return };
    if skip_unless(&[Need::Kernel, Need::Bin]) {
        return;
    }
    let dir = scratch("old-qemu-plugin");
    let qemu = qemu_72_command(&q72, &dir, 1000);
    let (out, out_dir) = record(&[], &dir, &qemu);
    let err = String::from_utf8_lossy(&out.stderr);
    println!("{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    let program = qemu.0.display();
    assert!(err.contains(&format!("`{program}` is QEMU 7.2.")), "{err}");
    assert!(
        err.contains(&format!(
            "plugin needs QEMU {} or newer",
            kern_profile_format::qemu::min_qemu_version()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("`kern-profile record --gdb -- {program} ...`")),
        "{err}"
    );
    // Refused before anything ran or was made.
    assert!(!dir.join("com1").exists(), "QEMU ran: {err}");
    assert!(!out_dir.exists(), "an output directory was made: {err}");
}

/// `record --gdb --rate 200` on QEMU 7.2: QEMU's status (the kernel's success) comes back, the
/// workload's samples are rooted at `_start;kmain` and its hottest function is among them.
#[test]
fn record_gdb_samples_the_kernel_on_qemu_7_2() {
    let Some(q72) = qemu_72_bin() else { return };
    if skip_unless(&[Need::Kernel, Need::Bin]) {
        return;
    }
    // Host time: a second emulator on the same cores slows every stop.
    alone(|| {
        let kernel = kernel();
        // A loaded host stops a vCPU slowly and the 5% budget spaces the looks: a longer run
        // when too few looks landed in the workload.
        let (workload, n, err) = with_enough_samples(30, |rounds| {
            let dir = scratch(&format!("old-qemu-gdb-{rounds}"));
            let qemu = qemu_72_command(&q72, &dir, rounds * 6);
            let (out, out_dir) = record(&["--gdb", "--rate", "200"], &dir, &qemu);
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            println!("{err}");
            assert_eq!(out.status.code(), Some(33), "QEMU's status: {err}");
            assert!(err.contains("QEMU exited (status 33)"), "{err}");
            assert!(err.contains("QEMU 7.2."), "not QEMU 7.2: {err}");
            let folded = folded_of(&out_dir.join("cpu.raw"), &kernel, &["--no-inline"]);
            let (workload, n) = workload_of(folded);
            ((workload, n, err), n)
        })
        .0;
        assert!(n >= 30, "{n} workload samples: {err}");
        for (stack, c) in &workload {
            assert!(
                stack[0] == "_start" && stack[1] == "kmain",
                "{c} at {stack:?}"
            );
        }
        let hottest = hottest();
        assert!(
            workload
                .iter()
                .any(|(s, _)| s.last().is_some_and(|f| f.ends_with(&hottest))),
            "{hottest} never sampled in {n} workload samples: {err}"
        );
    })
}
