//! `record --gdb` and `top --gdb`: the user's QEMU command started with a gdbstub on a private
//! socket, and sampled through it on a thread of its own (as the plugin's writer thread
//! does) into `DIR/cpu.raw.partial`, which `top` tails while it grows. Any QEMU from 7.2, any
//! accelerator.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::attach::{AttachTarget, Attached};
use super::launch::{describe_status, Console, Guest};
use super::qemu::QemuCommand;
use super::RecordError;
use crate::job::SymbolSources;
use crate::symbolize::KernelFile;

/// What `--gdb` was asked.
#[derive(Debug, Clone)]
pub struct GdbSpec {
    /// The QEMU command (after `--`).
    pub qemu: Vec<OsString>,
    /// `--kernel`, else QEMU's `-kernel`.
    pub kernel: Option<PathBuf>,
    pub symbols: Vec<PathBuf>,
    pub out_dir: PathBuf,
    pub rate_hz: u32,
    pub depth: usize,
    /// Name each sample's task where the kernel allows (`--no-tasks`: false).
    pub tasks: bool,
    /// `record` or `top`, for messages.
    pub command: &'static str,
}

/// Checked and ready to start: the command, the kernel's names and tables, the output.
pub struct GdbLaunch {
    pub qemu: QemuCommand,
    /// What was changed in the user's command, and why (for the user).
    pub notes: Vec<String>,
    target: AttachTarget,
    kernel: Option<KernelFile>,
    spec: GdbSpec,
}

/// QEMU running, sampled on a thread.
pub struct GdbRunning {
    pub guest: Guest,
    pub sources: SymbolSources,
    /// The kernel as read before QEMU started, for the drawing.
    kernel: Option<KernelFile>,
    partial: PathBuf,
    sock: PathBuf,
    sampler: JoinHandle<Result<Attached, RecordError>>,
}

impl GdbLaunch {
    /// Checks the command, reads the kernel (and its unwind tables), prepares the output
    /// directory; a Linux kernel is booted with `nokaslr`.
    pub fn prepare(spec: &GdbSpec) -> Result<Self, RecordError> {
        let mut qemu = QemuCommand::check_for_gdbstub(&spec.qemu, spec.command)?;
        let (target, kernel) = AttachTarget::prepare(
            spec.kernel.as_deref(),
            &spec.symbols,
            qemu.kernel().as_deref(),
            &spec.out_dir,
            spec.tasks,
        )?;
        let mut notes = Vec::new();
        if target.linux && qemu.kernel().is_some() {
            notes.extend(qemu.disable_kaslr());
        }
        Ok(GdbLaunch {
            qemu,
            notes,
            target,
            kernel,
            spec: spec.clone(),
        })
    }

    /// What to print about tasks before sampling: on, or why not.
    pub fn tasks_line(&self) -> Option<&str> {
        self.target.tasks_line.as_deref()
    }

    /// The private socket the stub listens on.
    pub fn socket(&self) -> PathBuf {
        std::env::temp_dir().join(format!("kern-profile-{}.gdb", std::process::id()))
    }

    /// Starts QEMU with `console`, waits for its stub to listen and starts sampling it.
    pub fn start(self, console: &Console) -> Result<GdbRunning, RecordError> {
        let sock = self.socket();
        let _ = std::fs::remove_file(&sock);
        let mut cmd = std::process::Command::new(&self.qemu.path);
        cmd.args(&self.qemu.args)
            .arg("-gdb")
            .arg(format!("unix:{},server=on,wait=off", sock.display()));
        let mut guest = Guest::spawn(cmd, console, &self.qemu.name())?;
        if let Err(e) = wait_for_socket(&mut guest, &sock) {
            let _ = std::fs::remove_file(&sock);
            return Err(e);
        }
        let sources = self.target.sources.clone();
        let partial = self.target.raw_partial();
        let (target, spec, kernel) = (self.target, self.spec, self.kernel);
        let addr = format!("unix:{}", sock.display());
        let sampler = std::thread::Builder::new()
            .name("kp-gdb-sampler".into())
            .spawn(move || {
                // QEMU's exit ends the run (the stub goes away); Ctrl-C reaches QEMU.
                let never = AtomicBool::new(false);
                target.sample(&addr, spec.rate_hz, None, spec.depth, &never)
            })
            .map_err(|source| RecordError::Io {
                what: "the sampling thread".into(),
                source,
            })?;
        Ok(GdbRunning {
            guest,
            sources,
            kernel,
            partial,
            sock,
            sampler,
        })
    }
}

impl GdbRunning {
    /// The recording being written.
    pub fn raw_partial(&self) -> PathBuf {
        self.partial.clone()
    }

    /// Waits for QEMU and the sampler: the kept recording, QEMU's status and the kernel as
    /// read before QEMU started.
    pub fn finish(mut self) -> Result<(Attached, ExitStatus, Option<KernelFile>), RecordError> {
        let status = self.guest.wait()?;
        let _ = std::fs::remove_file(&self.sock);
        let done = self.sampler.join().map_err(|_| RecordError::Io {
            what: "the sampling thread".into(),
            source: std::io::Error::other("it panicked"),
        })??;
        Ok((done, status, self.kernel.take()))
    }
}

/// Waits until the stub listens on `sock` (QEMU has set the machine up), or QEMU exits, or
/// 30 s pass (then QEMU is stopped).
fn wait_for_socket(guest: &mut Guest, sock: &Path) -> Result<(), RecordError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sock.exists() {
        if let Some(status) = guest.try_wait()? {
            return Err(RecordError::GdbNotListening {
                why: format!(
                    "QEMU exited ({}) before its gdbstub listened",
                    describe_status(&status)
                ),
            });
        }
        if Instant::now() > deadline {
            guest.interrupt();
            guest.wait()?;
            return Err(RecordError::GdbNotListening {
                why: format!(
                    "QEMU's gdbstub did not listen on {} within 30 s",
                    sock.display()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
