//! What can stop `kern-profile record` and `kern-profile top`: each error names the argument,
//! file or program at fault, and says what to do.

use std::path::PathBuf;

use crate::ProfileError;

/// Errors of a recording session.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "give the QEMU command after `--`: kern-profile {0} [OPTIONS] -- qemu-system-i386 \
         -kernel kernel.elf ..."
    )]
    NoCommand(&'static str),
    #[error("QEMU binary `{program}` not found{where_}: install QEMU {min} or newer (Debian 12: scripts/setup.sh), or give its path")]
    QemuNotFound {
        program: String,
        where_: String,
        min: &'static str,
    },
    #[error("cannot run `{program} --version`: {source}")]
    QemuVersionRun {
        program: String,
        source: std::io::Error,
    },
    #[error("`{program} --version` did not say which QEMU it is (it printed: {said:?}): kern-profile needs a qemu-system-* binary, QEMU {min} or newer")]
    QemuVersionUnknown {
        program: String,
        said: String,
        min: &'static str,
    },
    #[error("`{program}` is QEMU {found}, but kern-profile's plugin needs QEMU {min} or newer (plugin API 4 arrived in 9.2; qemu-version.txt): sample through QEMU's gdbstub instead, which works on any QEMU (`kern-profile {command} --gdb -- {program} ...`), or install a newer QEMU (Debian 12: scripts/setup.sh, from bookworm-backports)")]
    QemuTooOld {
        program: String,
        found: String,
        min: &'static str,
        /// The subcommand (`record`, `top`), for the `--gdb` hint.
        command: &'static str,
    },
    #[error("--trigger interrupt needs QEMU {min} or newer (its discontinuity callback), and `{program}` is QEMU {found}: drop --trigger (sampling at block entries), or use a newer QEMU")]
    NoInterruptTrigger {
        program: String,
        found: String,
        min: &'static str,
    },
    #[error("--flight-trigger finds its functions in the kernel's ELF or image, and there is none: give it with --kernel (a --symbols map is not read by the plugin)")]
    FlightTriggerWithoutKernel,
    #[error("the QEMU command already loads kern-profile's plugin (`-plugin {0}`): drop it, `record` adds its own")]
    PluginGiven(String),
    #[error("the QEMU command has no -kernel: give the kernel's ELF with --kernel ELF, or a symbol map with --symbols FILE (System.map, nm output)")]
    NoKernel,
    #[error("-kernel {}: {why}: give the kernel's ELF with --kernel ELF (e.g. vmlinux), or a symbol map with --symbols FILE (System.map, nm output)", path.display())]
    KernelUnusable { path: PathBuf, why: String },
    #[error("--kernel {}: {why}", path.display())]
    KernelArg { path: PathBuf, why: String },
    #[error("--user {}: {why}", path.display())]
    UserProgram { path: PathBuf, why: String },
    #[error("--window {name}: {why}")]
    Window { name: String, why: String },
    #[error("kern-profile's QEMU plugin {build} was not found; looked for {}. Reinstall kern-profile (`cargo install --path aggregator/command` embeds every plugin build; the Debian package installs them in /usr/lib/kern-profile/), or give one with --plugin", list(searched))]
    PluginNotFound {
        build: String,
        searched: Vec<String>,
    },
    #[error("--plugin {}: {why}", path.display())]
    PluginUnusable { path: PathBuf, why: String },
    #[error("cannot write to the output directory {}: {source}", dir.display())]
    OutputDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("QEMU exited ({status}) before the plugin recorded a single sample: the guest stopped at once, or QEMU refused the command (see its messages above); nothing was kept")]
    NoSamples { status: String },
    #[error("QEMU exited ({status}) without a single sample: --window's function ({start:#x}-{end:#x}) never ran, or QEMU stopped at once (see its messages above); nothing was kept")]
    NoWindowSamples {
        status: String,
        start: u64,
        end: u64,
    },
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("--attach needs the kernel that runs: give it with --kernel ELF (or a Linux vmlinuz), or a symbol map with --symbols FILE")]
    AttachNoKernel,
    #[error(transparent)]
    Gdb(#[from] kern_profile_gdb::GdbError),
    #[error("{addr}: not a single sample was taken ({end}); nothing was kept")]
    AttachNoSamples { addr: String, end: String },
    #[error("{why}; nothing was recorded")]
    GdbNotListening { why: String },
}

fn list(items: &[String]) -> String {
    items.join(", ")
}
