//! Running QEMU as a child: its console on ours (or in a log file), and the signals that
//! would stop us (Ctrl-C, `kill`, a closed ssh session) forwarded to it, so that QEMU stops
//! cleanly, the plugin completes its file, and we go on to aggregate.
//!
//! A terminal's Ctrl-C reaches QEMU by itself too (same process group); QEMU takes a second
//! SIGINT as calmly as the first.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::{Handle, Signals};

use super::RecordError;

/// Where QEMU's standard streams go.
#[derive(Debug, Clone)]
pub enum Console {
    /// Ours: the guest's console in our terminal, our stdin to QEMU.
    Inherit,
    /// Stdout and stderr to this file, stdin from /dev/null (`top` owns the terminal).
    Log(std::path::PathBuf),
}

/// A running QEMU.
pub struct Guest {
    child: Child,
    pid: Arc<AtomicI32>,
    signalled: Arc<AtomicBool>,
    handle: Handle,
    forwarder: Option<JoinHandle<()>>,
}

impl Guest {
    /// Starts `cmd` with `console`, forwarding SIGINT, SIGTERM and SIGHUP to it.
    pub fn spawn(cmd: Command, console: &Console, program: &str) -> Result<Self, RecordError> {
        Guest::spawn_with(cmd, console, program, None)
    }

    /// [`Guest::spawn`], and with `usr1`, SIGUSR1 creates that file instead of being passed
    /// on (the plugin's `flight_dump=`: the flight recorder's ring is written).
    pub fn spawn_with(
        mut cmd: Command,
        console: &Console,
        program: &str,
        usr1: Option<std::path::PathBuf>,
    ) -> Result<Self, RecordError> {
        let spawn_err = |source| RecordError::Spawn {
            program: program.to_string(),
            source,
        };
        match console {
            Console::Inherit => {}
            Console::Log(path) => {
                let log = std::fs::File::create(path).map_err(|source| RecordError::Io {
                    what: format!("cannot create {}", path.display()),
                    source,
                })?;
                let err = log.try_clone().map_err(spawn_err)?;
                cmd.stdin(Stdio::null()).stdout(log).stderr(err);
            }
        }
        // Catch the signals before the child exists: one arriving in between must not kill
        // us and orphan QEMU.
        let mut wanted = vec![SIGINT, SIGTERM, SIGHUP];
        wanted.extend(usr1.is_some().then_some(SIGUSR1));
        let mut signals = Signals::new(wanted).map_err(spawn_err)?;
        let handle = signals.handle();
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                handle.close();
                return Err(spawn_err(e));
            }
        };
        let pid = Arc::new(AtomicI32::new(child.id() as i32));
        let signalled = Arc::new(AtomicBool::new(false));
        let (p, s) = (Arc::clone(&pid), Arc::clone(&signalled));
        let forwarder = std::thread::spawn(move || {
            for sig in signals.forever() {
                if let (SIGUSR1, Some(path)) = (sig, &usr1) {
                    match std::fs::File::create(path) {
                        Ok(_) => crate::say!(
                            "kern-profile: SIGUSR1: the flight recorder writes its ring; the recording goes on to the end"
                        ),
                        Err(e) => crate::say!("kern-profile: SIGUSR1: cannot create {}: {e}", path.display()),
                    }
                    continue;
                }
                s.store(true, Ordering::Relaxed);
                let pid = p.load(Ordering::Relaxed);
                if pid > 0 {
                    // SAFETY: plain kill(2) of our own child, which we have not reaped yet
                    // (the pid is cleared before reaping).
                    unsafe { libc::kill(pid, sig) };
                }
            }
        });
        Ok(Guest {
            child,
            pid,
            signalled,
            handle,
            forwarder: Some(forwarder),
        })
    }

    /// Asks QEMU to stop as Ctrl-C would.
    pub fn interrupt(&self) {
        let pid = self.pid.load(Ordering::Relaxed);
        if pid > 0 {
            // SAFETY: as in the forwarder.
            unsafe { libc::kill(pid, SIGINT) };
        }
    }

    /// Whether we were sent a signal (and passed it on).
    pub fn was_signalled(&self) -> bool {
        self.signalled.load(Ordering::Relaxed)
    }

    /// QEMU's status if it has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, RecordError> {
        // Reaping frees the pid: stop forwarding to it first. Peek without reaping.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let pid = self.pid.load(Ordering::Relaxed);
        if pid <= 0 {
            return self.wait().map(Some);
        }
        // SAFETY: waitid on our own child with WNOWAIT leaves it unreaped.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid is set by waitid when a child changed state (0 otherwise).
        if r == 0 && unsafe { info.si_pid() } != 0 {
            return self.wait().map(Some);
        }
        Ok(None)
    }

    /// Waits for QEMU to exit; stops forwarding signals.
    pub fn wait(&mut self) -> Result<ExitStatus, RecordError> {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let pid = self.pid.load(Ordering::Relaxed);
        if pid > 0 {
            // Wait for the exit without reaping, so that the forwarder never signals a
            // recycled pid; then clear the pid, then reap.
            loop {
                // SAFETY: as in try_wait, blocking.
                let r = unsafe {
                    libc::waitid(
                        libc::P_PID,
                        pid as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if r == 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break;
                }
            }
            self.pid.store(0, Ordering::Relaxed);
        }
        let status = self.child.wait().map_err(|source| RecordError::Io {
            what: "waiting for QEMU".into(),
            source,
        })?;
        self.stop_forwarding();
        Ok(status)
    }

    fn stop_forwarding(&mut self) {
        self.handle.close();
        if let Some(f) = self.forwarder.take() {
            let _ = f.join();
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        // An error path dropped a running QEMU: stop it rather than orphan it.
        if self.pid.load(Ordering::Relaxed) > 0 {
            self.interrupt();
            let _ = self.wait();
        }
        self.stop_forwarding();
    }
}

/// A status as a person reads it: `status 33`, `killed by signal 9`.
pub fn describe_status(s: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".into(),
    }
}

/// The exit code that passes QEMU's status on: its code, or 128 + the signal that killed it.
pub fn exit_code(s: &ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_pass_through() {
        let mut g = Guest::spawn(
            {
                let mut c = Command::new("sh");
                c.args(["-c", "exit 33"]);
                c
            },
            &Console::Inherit,
            "sh",
        )
        .unwrap();
        let s = g.wait().unwrap();
        assert_eq!(exit_code(&s), 33);
        assert_eq!(describe_status(&s), "status 33");
        assert!(!g.was_signalled());
    }

    #[test]
    fn interrupt_stops_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut c = Command::new("sh");
        // The shell's exec'd sleep dies of the SIGINT (no handler).
        c.args(["-c", "echo started; exec sleep 30"]);
        let mut g = Guest::spawn(c, &Console::Log(log.clone()), "sh").unwrap();
        while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(g.try_wait().unwrap().is_none());
        g.interrupt();
        let s = g.wait().unwrap();
        assert_eq!(exit_code(&s), 128 + 2, "{}", describe_status(&s));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "started\n");
    }
}
