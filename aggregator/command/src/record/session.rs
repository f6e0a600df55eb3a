//! One recording session, `record`'s and `top`'s: everything checked before the guest
//! starts ([`Session::prepare`]), QEMU run with the plugin ([`Session::start`]), and the
//! recording kept only when it holds samples ([`Running::finish`]).

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use kern_profile_format::{RawReader, Record};

use super::kernel::{symbol_sources, window_arg, window_range};
use super::launch::{describe_status, Console, Guest};
use super::outdir::OutputDir;
use super::plugin::{self, Plugin};
use super::qemu::QemuCommand;
use super::RecordError;
use crate::job::SymbolSources;
use crate::symbolize::{KernelFile, SymbolWarning};
use kern_profile_format::qemu::{discon_qemu_version, version_at_least};

/// How the plugin samples (its `-plugin` arguments but `out=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sampling {
    /// `delay=` µs (the plugin's default when neither is given).
    pub delay_us: Option<u64>,
    /// `period=` guest instructions.
    pub period: Option<u64>,
    /// `trigger=interrupt`.
    pub at_interrupts: bool,
    /// `depth=`.
    pub depth: Option<u32>,
    /// `exact=on`.
    pub exact: bool,
    /// `window=`: a function name or `0xSTART-0xEND`.
    pub window: Option<String>,
    /// `flight=`: keep only the last SECS seconds, written at exit or at a trigger.
    pub flight_secs: Option<u64>,
    /// `flight_trigger=`, one per function (or `panic`).
    pub flight_triggers: Vec<String>,
    /// `max_size=` bytes.
    pub max_size: Option<u64>,
}

/// What a session is asked to do.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// `record` or `top`, for messages.
    pub command: &'static str,
    /// The QEMU command: program and arguments.
    pub qemu: Vec<OsString>,
    pub sampling: Sampling,
    pub out_dir: PathBuf,
    /// `--kernel`.
    pub kernel: Option<PathBuf>,
    /// `--symbols`.
    pub symbols: Vec<PathBuf>,
    /// `--user`: user programs, named in the reports and walked by their CFI in the plugin.
    pub user: Vec<PathBuf>,
    /// `--plugin`.
    pub plugin: Option<PathBuf>,
    pub console: ConsoleSpec,
    /// The plugin's `compress=on` and `stacks=on`: the recording is one zstd stream (format's
    /// `compressed`) of a stack table and references to it (format version 4).
    pub compress: bool,
}

/// Where the guest's console goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleSpec {
    /// Our terminal.
    Terminal,
    /// `DIR/console.log`.
    LogFile,
}

/// A session checked and ready to start.
#[derive(Debug)]
pub struct Session {
    pub qemu: QemuCommand,
    pub plugin: Plugin,
    /// What was changed in the user's command, and why (for the user).
    pub notes: Vec<String>,
    pub sources: SymbolSources,
    /// The kernel as read to check it, for the drawing after the run (its unpacked vmlinux
    /// dropped: the plugin reads the tables itself).
    pub kernel: Option<KernelFile>,
    pub window: Option<Range<u64>>,
    pub out: OutputDir,
    plugin_args: String,
    console: Console,
    /// `--flight`: the file SIGUSR1 creates for the plugin's `flight_dump=`.
    flight_dump: Option<PathBuf>,
}

impl Session {
    /// Checks everything that can be checked before the guest runs, in the order a user
    /// fixes things: the command, QEMU, the kernel, the window, the output, the plugin.
    pub fn prepare(spec: &SessionSpec) -> Result<Session, RecordError> {
        let qemu = QemuCommand::check(&spec.qemu, spec.command)?;
        let discon = discon_qemu_version();
        if spec.sampling.at_interrupts && !version_at_least(&qemu.version, discon) {
            return Err(RecordError::NoInterruptTrigger {
                program: qemu.name(),
                found: qemu.version.clone(),
                min: discon,
            });
        }
        let kernel = symbol_sources(
            spec.kernel.as_deref(),
            &spec.symbols,
            qemu.kernel().as_deref(),
        )?;
        let window = spec
            .sampling
            .window
            .as_deref()
            .map(|w| window_range(w, kernel.loaded.as_ref()))
            .transpose()?;
        let mut qemu = qemu;
        // A kernel marked i386 but 64-bit (Asterinas' OSDK's) is x86_64's: said before it runs.
        let mut notes: Vec<String> = kernel
            .loaded
            .iter()
            .flat_map(|k| &k.elf)
            .flat_map(|e| &e.warnings)
            .filter(|w| matches!(w, SymbolWarning::RemarkedElf { .. }))
            .map(ToString::to_string)
            .collect();
        if kernel.is_linux() && qemu.kernel().is_some() {
            notes.extend(qemu.disable_kaslr());
        }
        if !spec.sampling.flight_triggers.is_empty() && kernel.sources.elf.is_none() {
            return Err(RecordError::FlightTriggerWithoutKernel);
        }
        let mut sources = kernel.sources;
        sources.user_binaries = user_programs(&spec.user)?;
        let loaded = kernel.loaded.map(KernelFile::without_vmlinux);
        let out = OutputDir::prepare(&spec.out_dir)?;
        let build = qemu.build.ok_or_else(|| RecordError::QemuTooOld {
            program: qemu.name(),
            found: qemu.version.clone(),
            min: kern_profile_format::qemu::min_qemu_version(),
            command: spec.command,
        })?;
        let plugin = plugin::locate(spec.plugin.as_deref(), build, &qemu.version)
            .inspect_err(|_| out.discard())?;
        let plugin_args = plugin_args(
            &out.raw_partial(),
            &spec.sampling,
            window.as_ref(),
            sources.elf.as_deref(),
            &sources.user_binaries,
            spec.compress,
        );
        let flight_dump = spec
            .sampling
            .flight_secs
            .map(|_| flight_dump(&out.raw_partial()));
        let console = match spec.console {
            ConsoleSpec::Terminal => Console::Inherit,
            ConsoleSpec::LogFile => Console::Log(out.join("console.log")),
        };
        Ok(Session {
            qemu,
            plugin,
            notes,
            sources,
            kernel: loaded,
            window,
            out,
            plugin_args,
            console,
            flight_dump,
        })
    }

    /// The plugin's arguments, `out=` first.
    pub fn plugin_args(&self) -> &str {
        &self.plugin_args
    }

    /// Starts QEMU with the plugin.
    pub fn start(self) -> Result<Running, RecordError> {
        let cmd = self.qemu.with_plugin(&self.plugin.path, &self.plugin_args);
        let usr1 = self.flight_dump.clone();
        match Guest::spawn_with(cmd, &self.console, &self.qemu.name(), usr1) {
            Ok(guest) => Ok(Running {
                session: self,
                guest,
            }),
            Err(e) => {
                self.out.discard();
                Err(e)
            }
        }
    }
}

/// The `--user` programs, made absolute, each checked to be a readable file before the guest
/// runs (the plugin reads them again at start; the reports name samples from them).
fn user_programs(user: &[PathBuf]) -> Result<Vec<PathBuf>, RecordError> {
    user.iter()
        .map(|p| match std::fs::metadata(p) {
            Ok(m) if m.is_file() => Ok(std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            Ok(_) => Err(RecordError::UserProgram {
                path: p.clone(),
                why: "not a file".into(),
            }),
            Err(e) => Err(RecordError::UserProgram {
                path: p.clone(),
                why: e.to_string(),
            }),
        })
        .collect()
}

/// The plugin's arguments; `kernel` (an ELF or a Linux image) gives it the unwind tables
/// (`elf=`) that walk a kernel without frame pointers, `user` the programs' (`user=`).
fn plugin_args(
    raw: &Path,
    s: &Sampling,
    window: Option<&Range<u64>>,
    kernel: Option<&Path>,
    user: &[PathBuf],
    compress: bool,
) -> String {
    let mut a = vec![format!("out={}", raw.display())];
    if let Some(d) = s.delay_us {
        a.push(format!("delay={d}"));
    }
    if let Some(p) = s.period {
        a.push(format!("period={p}"));
    }
    if s.at_interrupts {
        a.push("trigger=interrupt".into());
    }
    if let Some(d) = s.depth {
        a.push(format!("depth={d}"));
    }
    if s.exact {
        a.push("exact=on".into());
    }
    if let Some(w) = window {
        a.push(window_arg(w));
    }
    if let Some(k) = kernel {
        a.push(format!("elf={}", k.display()));
    }
    for u in user {
        a.push(format!("user={}", u.display()));
    }
    if compress {
        a.push("compress=on".into());
        a.push("stacks=on".into());
    }
    if let Some(f) = s.flight_secs {
        a.push(format!("flight={f}"));
    }
    for t in &s.flight_triggers {
        a.push(format!("flight_trigger={t}"));
    }
    if s.flight_secs.is_some() {
        a.push(format!("flight_dump={}", flight_dump(raw).display()));
    }
    if let Some(m) = s.max_size {
        a.push(format!("max_size={m}"));
    }
    a.join(",")
}

/// `flight_dump=`: the file beside the recording whose appearance writes the flight ring
/// (`record` makes it on SIGUSR1).
pub fn flight_dump(raw: &Path) -> PathBuf {
    raw.with_extension("dump")
}

/// A session whose QEMU runs.
pub struct Running {
    pub session: Session,
    pub guest: Guest,
}

/// A session whose QEMU exited with a recording worth keeping.
#[derive(Debug)]
pub struct Recorded {
    pub session: Session,
    pub status: ExitStatus,
    /// The recording, in place as `DIR/cpu.raw`.
    pub raw: PathBuf,
    /// Whether a signal we received stopped QEMU.
    pub interrupted: bool,
}

impl Running {
    /// The file the plugin is writing.
    pub fn raw_partial(&self) -> PathBuf {
        self.session.out.raw_partial()
    }

    /// Waits for QEMU, then keeps the recording if it holds samples (or exact counts),
    /// else removes it and says the guest stopped at once.
    pub fn finish(mut self) -> Result<Recorded, RecordError> {
        let status = self.guest.wait()?;
        // A SIGUSR1 the plugin had no time to see.
        if let Some(p) = &self.session.flight_dump {
            let _ = std::fs::remove_file(p);
        }
        let interrupted = self.guest.was_signalled();
        let partial = self.raw_partial();
        if !holds_data(&partial) {
            self.session.out.discard();
            let status = describe_status(&status);
            return Err(match &self.session.window {
                Some(w) => RecordError::NoWindowSamples {
                    status,
                    start: w.start,
                    end: w.end,
                },
                None => RecordError::NoSamples { status },
            });
        }
        let raw = self.session.out.raw();
        std::fs::rename(&partial, &raw).map_err(|source| RecordError::Io {
            what: format!("cannot move {} to {}", partial.display(), raw.display()),
            source,
        })?;
        Ok(Recorded {
            session: self.session,
            status,
            raw,
            interrupted,
        })
    }
}

/// Whether a raw file holds a sample or exact counts (a cut tail does not matter).
fn holds_data(raw: &Path) -> bool {
    let Ok(f) = std::fs::File::open(raw) else {
        return false;
    };
    let Ok(mut r) = RawReader::open(std::io::BufReader::new(f)) else {
        return false;
    };
    while let Ok(Some(rec)) = r.next_record() {
        if matches!(rec, Record::Sample(_) | Record::ExactBlocks(_)) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_arguments() {
        let s = Sampling {
            period: Some(10000),
            depth: Some(32),
            exact: true,
            ..Sampling::default()
        };
        assert_eq!(
            plugin_args(
                Path::new("/o/cpu.raw.recording"),
                &s,
                Some(&(0x10..0x20)),
                Some(Path::new("/k/vmlinuz")),
                &[PathBuf::from("/u/a.elf"), PathBuf::from("/u/b.elf")],
                true
            ),
            "out=/o/cpu.raw.recording,period=10000,depth=32,exact=on,window=0x10-0x20,elf=/k/vmlinuz,user=/u/a.elf,user=/u/b.elf,compress=on,stacks=on"
        );
        let d = Sampling {
            delay_us: Some(10),
            ..Sampling::default()
        };
        assert_eq!(
            plugin_args(Path::new("r"), &d, None, None, &[], false),
            "out=r,delay=10"
        );
    }
}
