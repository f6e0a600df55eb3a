//! Sampling through the gdbstub: one connection, then looks at a steady rate. Each look stops
//! the whole VM (the stub is all-stop: a 0x03 byte stops every vCPU), reads every vCPU's
//! registers and stack, and resumes it. Each interval is jittered (0.5x to 1.5x the rate's,
//! at random) so that the looks never lock onto the period of a loop in the guest: a
//! workload whose round lasts a multiple of the interval was otherwise looked at in the same
//! phase of every round (one function's share 0.19 to 0.39 from run to run). The time the guest spends stopped is measured and
//! kept under a budget (5% of the run by default) by spacing the looks, as the plugin's host
//! timer keeps its own cost down; the report says when that slowed the rate asked for.
//!
//! A stub that goes away mid-run (QEMU exited) ends the sampling, not the recording: what was
//! looked at is kept, and the report says why it ended.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kern_profile_format::Arch;

use crate::client::{Client, Limits};
use crate::stacks::{StackOptions, Stop, Target, VcpuStack};
use crate::GdbError;

/// How to sample.
#[derive(Debug, Clone)]
pub struct SampleOptions {
    /// Looks a second asked for (each samples every vCPU).
    pub rate_hz: u32,
    /// Stop after this long; `None`: until the stop flag is set or the stub goes away.
    pub duration: Option<Duration>,
    /// The largest share of the run the guest may spend stopped (default 0.05).
    pub stopped_budget: f64,
    pub stack: StackOptions,
}

impl Default for SampleOptions {
    fn default() -> Self {
        SampleOptions {
            rate_hz: 100,
            duration: None,
            stopped_budget: 0.05,
            stack: StackOptions::default(),
        }
    }
}

/// Why the sampling ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// `duration` elapsed; the guest runs on (detached).
    Duration,
    /// The stop flag was set (Ctrl-C); the guest runs on (detached).
    Stopped,
    /// The stub went away (QEMU exited): its last error.
    Gone(String),
}

/// What a sampling run did.
#[derive(Debug, Clone)]
pub struct Sampled {
    pub arch: Arch,
    pub vcpus: u32,
    /// Looks taken (each sampled every vCPU).
    pub looks: u64,
    /// How long the guest was stopped at each look, in order.
    pub stopped: Vec<Duration>,
    /// From connecting to the end.
    pub elapsed: Duration,
    /// Connecting and learning the target (the guest stopped meanwhile), before the first
    /// look; not in `stopped`, nor in the budget (it happens once).
    pub setup: Duration,
    /// Looks taken later than the rate asked, to keep the stopped share under its budget.
    pub slowed: u64,
    pub end: End,
}

impl Sampled {
    /// The median time the guest was stopped for one look.
    pub fn median_stopped(&self) -> Duration {
        let mut v = self.stopped.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }

    /// The share of the run the guest spent stopped.
    pub fn stopped_share(&self) -> f64 {
        let stopped: Duration = self.stopped.iter().sum();
        stopped.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Samples the guest behind the stub at `addr`. `start` gets the architecture and the number
/// of vCPUs before the first look's samples; `sink` each look's stacks with the host time since
/// connecting, in ns. A connection that fails before the first look is an error; later
/// failures end the run (`End::Gone`).
pub fn sample(
    addr: &str,
    limits: Limits,
    opts: &SampleOptions,
    stop: &AtomicBool,
    start: impl FnOnce(Arch, u32) -> std::io::Result<()>,
    mut sink: impl FnMut(u64, &[VcpuStack]) -> std::io::Result<()>,
) -> Result<Sampled, GdbError> {
    let t0 = Instant::now();
    // Connecting stops the guest.
    let mut c = Client::connect(addr, limits)?;
    let mut target = Target::open(&mut c)?;
    let io = |e: std::io::Error| GdbError::Io {
        addr: addr.to_string(),
        request: "writing the samples".into(),
        source: e,
    };
    start(target.arch, target.threads.len() as u32).map_err(io)?;
    let interval = Duration::from_secs_f64(1.0 / f64::from(opts.rate_hz.max(1)));
    let budget = opts.stopped_budget.clamp(0.001, 1.0);
    let mut run = Sampled {
        arch: target.arch,
        vcpus: target.threads.len() as u32,
        looks: 0,
        stopped: Vec::new(),
        elapsed: Duration::ZERO,
        setup: t0.elapsed(),
        slowed: 0,
        end: End::Stopped,
    };
    let opened = Instant::now();
    let mut stopped_at = opened;
    // Connecting stopped the guest; each later look stops it itself.
    let mut how = Stop::Already;
    let mut rng =
        fastrand::Rng::with_seed(t0.elapsed().as_nanos() as u64 ^ u64::from(std::process::id()));
    let end = loop {
        let vcpus = match target.look(&mut c, &opts.stack, how) {
            Ok(v) => v,
            Err(e) => break End::Gone(e.to_string()),
        };
        let at = stopped_at.duration_since(t0).as_nanos() as u64;
        // The guest runs again before the look is written out.
        let resumed = c.resume();
        let stopped = stopped_at.elapsed();
        sink(at, &vcpus).map_err(io)?;
        run.stopped.push(stopped);
        run.looks += 1;
        if let Err(e) = resumed {
            break End::Gone(e.to_string());
        }
        // The next look: after the interval, or later where the stops so far would take
        // more than the budget's share of the run (over the whole run, so that one slow stop,
        // a vCPU thread the host did not schedule, spreads its cost over the next looks).
        let total: Duration = run.stopped.iter().sum();
        let since = opened.elapsed();
        let wait = interval.mul_f64(0.5 + rng.f64()).saturating_sub(stopped);
        let floor = total.div_f64(budget).saturating_sub(since);
        if floor > wait {
            run.slowed += 1;
        }
        if let Some(e) = wait_for(wait.max(floor), t0, opts.duration, stop) {
            break e;
        }
        stopped_at = Instant::now();
        how = Stop::Interrupt;
    };
    run.elapsed = t0.elapsed();
    if !matches!(end, End::Gone(_)) {
        // Stopped (the stub only takes packets then), then detached: the guest runs on.
        c.interrupt()?;
        c.detach(target.pid)?;
    }
    run.end = end;
    Ok(run)
}

/// Sleeps `wait`, in short steps that watch the stop flag and the run's end; `Some` when the
/// run is over.
fn wait_for(
    wait: Duration,
    t0: Instant,
    duration: Option<Duration>,
    stop: &AtomicBool,
) -> Option<End> {
    let until = Instant::now() + wait;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Some(End::Stopped);
        }
        if duration.is_some_and(|d| t0.elapsed() >= d) {
            return Some(End::Duration);
        }
        let now = Instant::now();
        if now >= until {
            return None;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(20)));
    }
}
