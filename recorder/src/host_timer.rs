//! The one timer thread of host-timer sampling (`delay=`): every `delay` µs of host time it
//! arms the slots of all running vCPUs ([`ArmSlots::arm_all`]); while none runs it sleeps.
//!
//! Deadlines lie on an absolute grid (`start + k × delay`), each moved by a random jitter of
//! up to ±delay/2 so that samples do not lock onto a guest loop of the same period. A late
//! wake-up never bunches ticks: grid points already past are skipped and counted, so the
//! exit summary can say how many ticks the host could not deliver.

use crate::arm_slots::ArmSlots;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Absolute, jittered deadlines.
#[derive(Debug, Clone)]
pub struct Schedule {
    interval_ns: u64,
    /// Index of the last grid point handed out.
    k: u64,
    rng: fastrand::Rng,
}

impl Schedule {
    pub fn new(interval_ns: u64, seed: u64) -> Self {
        Schedule {
            interval_ns: interval_ns.max(1),
            k: 0,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The next deadline (ns since the start) after `now_ns`, and how many grid points were
    /// skipped because `now_ns` was already past them.
    pub fn next(&mut self, now_ns: u64) -> (u64, u64) {
        let mut skipped = 0;
        loop {
            self.k += 1;
            let base = self.k.saturating_mul(self.interval_ns);
            let jitter = self.rng.u64(0..self.interval_ns);
            let deadline = (base + jitter).saturating_sub(self.interval_ns / 2);
            if deadline > now_ns {
                return (deadline, skipped);
            }
            skipped += 1;
            // Far behind (a stopped process, say): jump to the present in one step.
            let behind = now_ns / self.interval_ns;
            if behind > self.k + 1 {
                skipped += behind - self.k - 1;
                self.k = behind - 1;
            }
        }
    }

    /// Moves the grid to `now_ns` without counting the points passed as late (the timer
    /// slept on purpose); returns how many it passed.
    pub fn skip_to(&mut self, now_ns: u64) -> u64 {
        // The point after `now_ns` too: its jittered deadline may lie before it.
        let past = now_ns / self.interval_ns + 1;
        let passed = past.saturating_sub(self.k);
        self.k = self.k.max(past);
        passed
    }
}

/// What the timer thread did, returned when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    /// Ticks delivered (each armed every running vCPU).
    pub ticks: u64,
    /// Grid points skipped because the thread woke too late.
    pub late: u64,
}

/// The running timer thread; [`HostTimer::stop`] ends it.
#[derive(Debug)]
pub struct HostTimer {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<TimerStats>>,
}

impl HostTimer {
    /// Starts the thread, arming `slots` every `interval_ns` on average.
    pub fn spawn(interval_ns: u64, slots: Arc<ArmSlots>, seed: u64) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = thread::Builder::new()
            .name("kern-profile-timer".into())
            .spawn(move || run(Schedule::new(interval_ns, seed), &slots, &flag))?;
        Ok(HostTimer {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread and returns its figures.
    pub fn stop(mut self) -> TimerStats {
        self.halt()
    }

    fn halt(&mut self) -> TimerStats {
        self.stop.store(true, Relaxed);
        let Some(handle) = self.handle.take() else {
            return TimerStats::default();
        };
        handle.thread().unpark();
        handle.join().unwrap_or_default()
    }
}

impl Drop for HostTimer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(mut schedule: Schedule, slots: &ArmSlots, stop: &AtomicBool) -> TimerStats {
    lower_timer_slack();
    let start = Instant::now();
    let mut stats = TimerStats::default();
    let elapsed = || start.elapsed().as_nanos() as u64;
    let mut last_tick = 0;
    while !stop.load(Relaxed) {
        if slots.sleep_while_none_runs(stop) {
            slots.add_idle_ticks(schedule.skip_to(elapsed()));
        }
        let (deadline, late) = schedule.next(elapsed());
        stats.late += late;
        // park_timeout may return early (unpark, spuriously): wait out the deadline.
        loop {
            let now = elapsed();
            if now >= deadline || stop.load(Relaxed) {
                break;
            }
            thread::park_timeout(Duration::from_nanos(deadline - now));
        }
        if stop.load(Relaxed) {
            break;
        }
        // Sampling debt is paid off in host time actually elapsed, late wake-ups included.
        let now = elapsed();
        slots.arm_all(now - last_tick);
        last_tick = now;
        stats.ticks += 1;
    }
    stats
}

/// Linux delays a sleeping thread's wake-up by up to its timer slack (50 µs by default),
/// which would stretch `delay=10` five-fold; 1 µs is enough for this one thread.
fn lower_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_stay_on_the_grid_within_half_an_interval() {
        let mut s = Schedule::new(100, 7);
        let mut now = 0;
        for k in 1..=1000u64 {
            let (d, late) = s.next(now);
            assert_eq!(late, 0);
            assert!(d + 50 >= k * 100 && d < k * 100 + 50, "tick {k} at {d}");
            now = d;
        }
    }

    #[test]
    fn a_late_wake_up_skips_past_grid_points_instead_of_bunching() {
        let mut s = Schedule::new(100, 1);
        let (_, late) = s.next(0);
        assert_eq!(late, 0);
        let (d, late) = s.next(10_000);
        assert!(d > 10_000 && d < 10_200, "next deadline {d}");
        assert!((97..=100).contains(&late), "skipped {late}");
    }

    #[test]
    fn jitter_spreads_deadlines() {
        let mut s = Schedule::new(1_000, 3);
        let offsets: Vec<u64> = (1..=200).map(|k| s.next(0).0 + 500 - k * 1_000).collect();
        let low = offsets.iter().filter(|&&o| o < 500).count();
        assert!((60..=140).contains(&low), "{low} of 200 in the lower half");
    }

    #[test]
    fn thread_arms_registered_slots_and_stops() {
        let slots = Arc::new(ArmSlots::new(1));
        let mut entry = Box::new(0u64);
        // SAFETY: `entry` outlives the timer, which is stopped below.
        unsafe { slots.register(0, &mut *entry) };
        let timer = HostTimer::spawn(50_000, Arc::clone(&slots), 5).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !slots.disarm(0) {
            assert!(Instant::now() < deadline, "the timer never armed the slot");
            thread::sleep(Duration::from_millis(1));
        }
        let stats = timer.stop();
        assert!(stats.ticks >= 1);
    }

    #[test]
    fn skip_to_passes_grid_points_without_counting_them_late() {
        let mut s = Schedule::new(100, 1);
        s.next(0);
        assert_eq!(s.skip_to(10_000), 100);
        for now in [10_000, 10_099] {
            let mut t = s.clone();
            let (d, late) = t.next(now);
            assert_eq!(late, 0, "counted late at {now}");
            assert!(d > now && d < 10_300, "next deadline {d}");
        }
    }

    #[test]
    fn the_timer_sleeps_while_every_vcpu_is_halted_and_a_resume_wakes_it() {
        let slots = Arc::new(ArmSlots::new(1));
        let mut entry = Box::new(0u64);
        // SAFETY: `entry` outlives the timer, which is stopped below.
        unsafe { slots.register(0, &mut *entry) };
        slots.went_idle(0, 0);
        // 100 µs: 2,000 ticks would be due in the 200 ms halt.
        let timer = HostTimer::spawn(100_000, Arc::clone(&slots), 5).unwrap();
        thread::sleep(Duration::from_millis(200));
        slots.resumed(0, 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !slots.disarm(0) {
            assert!(Instant::now() < deadline, "the resume never woke the timer");
            thread::sleep(Duration::from_millis(1));
        }
        let stats = timer.stop();
        let idle = slots.idle_stats(0, 0).idle_ticks;
        assert!(stats.ticks < 1_000, "{} ticks delivered", stats.ticks);
        // A sleep is not lateness (2,000 late ticks otherwise); a loaded host may wake the
        // timer late a few times.
        assert!(stats.late < 100, "{} ticks counted late", stats.late);
        assert!(idle >= 1_900, "{idle} idle ticks for 200 ms at 100 µs");
    }
}
