//! What an end-to-end test needs before it can run (QEMU, the built plugin, kernels, the
//! aggregator), and what it does when something is missing: a plain `cargo test` (a fresh
//! clone, nothing built) skips the test with a message naming what to run; with
//! `KP_E2E=required` (scripts/test.sh sets it) a missing input fails the test.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// One input of an end-to-end test.
pub enum Need {
    /// A program on PATH (Chromium).
    Program(&'static str),
    /// `qemu-system-ARCH` on PATH.
    Qemu(&'static str),
    /// The plugin (`KP_PLUGIN`, target/release/kern-profile.so).
    Plugin,
    /// The i386 example kernel (`KP_KERNEL`, target/examples/kernel.elf).
    Kernel,
    /// The aggregator (`KP_BIN`, target/release/kern-profile).
    Bin,
    /// The i386 kernel's user program (`KP_USER_ELF`, target/examples/user.elf).
    UserElf,
    /// `procs=on`'s second program (`KP_USER_B_ELF`, target/examples/user-b.elf).
    UserBElf,
    /// The x86_64 example kernel, built (or found up to date) by
    /// scripts/guests/build-kernel.sh --arch x86_64 unless `KP_KERNEL64` names it.
    Kernel64,
    /// The riscv64 or aarch64 example kernel, built (or found up to date) by
    /// scripts/guests/build-kernel.sh --arch ARCH.
    VirtKernel(&'static str),
    /// ARCH's example kernel without frame pointers, built (or found up to date) by
    /// scripts/guests/build-kernel.sh --arch ARCH --no-frame-pointers.
    NoFpKernel(&'static str),
}

impl Need {
    /// Why this input is not there, or `None` when it is.
    fn missing(&self) -> Option<String> {
        let file = |p: PathBuf, what: &str| {
            (!p.exists()).then(|| format!("{what} {} not found", p.display()))
        };
        match self {
            Need::Program(name) => program_missing(name),
            Need::Qemu(arch) => program_missing(&format!("qemu-system-{arch}")),
            Need::Plugin => file(crate::plugin_path(), "the plugin"),
            Need::Kernel => file(crate::kernel_path(), "the i386 kernel"),
            Need::Bin => file(crate::bin_path(), "the aggregator"),
            Need::UserElf => file(crate::user_elf_path(), "the user program"),
            Need::UserBElf => file(crate::user_b_elf_path(), "the second user program"),
            Need::Kernel64 => match std::env::var_os("KP_KERNEL64") {
                Some(p) => file(PathBuf::from(p), "KP_KERNEL64"),
                None => built_kernel("scripts/guests/build-kernel.sh", &["--arch", "x86_64"]).err(),
            },
            Need::VirtKernel(arch) => {
                built_kernel("scripts/guests/build-kernel.sh", &["--arch", arch]).err()
            }
            Need::NoFpKernel(arch) => built_kernel(
                "scripts/guests/build-kernel.sh",
                &["--arch", arch, "--no-frame-pointers"],
            )
            .err(),
        }
    }
}

/// Whether the calling test should return at once because an input in `needs` is missing:
/// prints why and what to run, or panics with the same text under `KP_E2E=required`.
pub fn skip_unless(needs: &[Need]) -> bool {
    let missing: Vec<String> = needs.iter().filter_map(Need::missing).collect();
    if missing.is_empty() {
        return false;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("e2e test")
        .to_string();
    let why = missing.join("; ");
    if std::env::var("KP_E2E").as_deref() == Ok("required") {
        panic!("{test}: {why} (KP_E2E=required): run `bash scripts/test.sh`, which builds it");
    }
    eprintln!(
        "skipping {test}: {why}. Run `bash scripts/test.sh` to build the kernels and the \
         plugin and run every end-to-end test (KP_E2E=required turns this skip into a failure)"
    );
    true
}

/// The kernel `script ARGS` (relative to the repository) builds or finds up to date, once
/// per test process and arguments; the script's stderr when it fails.
pub fn built_kernel(script: &str, args: &[&str]) -> Result<PathBuf, String> {
    static BUILT: OnceLock<Mutex<HashMap<String, Result<PathBuf, String>>>> = OnceLock::new();
    let key = format!("{script} {}", args.join(" "));
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    built
        .entry(key.clone())
        .or_insert_with(|| {
            let out = Command::new("bash")
                .arg(crate::root().join(script))
                .args(args)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("bash: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{key} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
        .clone()
}

fn program_missing(name: &str) -> Option<String> {
    (!on_path(name)).then(|| format!("{name} not on PATH (scripts/setup.sh installs it)"))
}

/// Whether `name` is an executable file in a directory of PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| is_executable(&d.join(name))))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
