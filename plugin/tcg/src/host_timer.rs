//! The one timer thread of host-timer sampling (`delay=`): every `delay` µs of host time it
//! arms the slots of all running vCPUs ([`ArmSlots::arm_all`]); while none runs it sleeps.
//!
//! Deadlines lie on an absolute grid (`start + k × delay`), each moved by a random jitter of
//! up to ±delay/2 so that samples do not lock onto a guest loop of the same period. A late
//! wake-up never bunches ticks: grid points already past are skipped and counted, so the
//! exit summary can say how many ticks the host could not deliver.
//!
//! The timer's own cost is bounded too ([`Spacing`]): each wake-up costs the host a timer
//! interrupt and two context switches, about 20 µs of CPU in the virtual machines these
//! figures come from (2 µs to 5 µs on bare metal), so `delay=10` there would need two whole
//! cores. The thread measures what its wake-ups cost and spreads its ticks so that it stays
//! under 1/[`MAX_TIMER_SHARE`] of one core; the exit summary says so when it did.

use crate::arm_slots::ArmSlots;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The timer thread may use at most 1/MAX_TIMER_SHARE of one host core.
pub const MAX_TIMER_SHARE: u64 = 10;
/// Ticks between two measurements of the timer's CPU cost.
const COST_WINDOW_TICKS: u64 = 64;
/// The widest spacing, ns: a measurement gone wrong must not stop sampling.
const MAX_INTERVAL_NS: u64 = 100_000_000;

/// How far apart ticks are: `delay=`, or ten times what one wake-up of the timer costs in
/// CPU when that is more, so that the timer stays under a tenth of a core.
#[derive(Debug, Clone)]
pub struct Spacing {
    asked_ns: u64,
    interval_ns: u64,
    /// Ticks and the thread's CPU ns when the current measuring window began.
    mark: Option<(u64, u64)>,
    /// The CPU one wake-up cost, ns, as last measured.
    wake_cost_ns: u64,
}

impl Spacing {
    /// Ticks `asked_ns` apart until the first measurement says otherwise.
    pub fn new(asked_ns: u64) -> Self {
        let asked_ns = asked_ns.max(1);
        Spacing {
            asked_ns,
            interval_ns: asked_ns,
            mark: None,
            wake_cost_ns: 0,
        }
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    pub fn wake_cost_ns(&self) -> u64 {
        self.wake_cost_ns
    }

    /// After `ticks` ticks in all: once `COST_WINDOW_TICKS` have passed since the last
    /// measurement, reads the thread's CPU time through `cpu_ns` (a system call, so not at
    /// every tick), measures the cost of a wake-up over the window and moves the spacing
    /// halfway to what that cost allows, so that one odd window moves it little. Returns
    /// the spacing to use from here.
    pub fn observe(&mut self, ticks: u64, cpu_ns: impl FnOnce() -> u64) -> u64 {
        let Some((t0, c0)) = self.mark else {
            self.mark = Some((ticks, cpu_ns()));
            return self.interval_ns;
        };
        if ticks < t0.saturating_add(COST_WINDOW_TICKS) {
            return self.interval_ns;
        }
        let cpu_ns = cpu_ns();
        self.mark = Some((ticks, cpu_ns));
        self.wake_cost_ns = cpu_ns.saturating_sub(c0) / (ticks - t0);
        let allowed = self
            .wake_cost_ns
            .saturating_mul(MAX_TIMER_SHARE)
            .clamp(self.asked_ns, MAX_INTERVAL_NS.max(self.asked_ns));
        self.interval_ns = self.interval_ns / 2 + allowed / 2 + (self.interval_ns & allowed & 1);
        self.interval_ns
    }
}

/// Absolute, jittered deadlines.
#[derive(Debug, Clone)]
pub struct Schedule {
    interval_ns: u64,
    /// Where the grid starts (it moves when the spacing changes).
    origin_ns: u64,
    /// Index of the last grid point handed out.
    k: u64,
    rng: fastrand::Rng,
}

impl Schedule {
    pub fn new(interval_ns: u64, seed: u64) -> Self {
        Schedule {
            interval_ns: interval_ns.max(1),
            origin_ns: 0,
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
            let base = self
                .origin_ns
                .saturating_add(self.k.saturating_mul(self.interval_ns));
            let jitter = self.rng.u64(0..self.interval_ns);
            let deadline = (base + jitter).saturating_sub(self.interval_ns / 2);
            if deadline > now_ns {
                return (deadline, skipped);
            }
            skipped += 1;
            // Far behind (a stopped process, say): jump to the present in one step.
            let behind = now_ns.saturating_sub(self.origin_ns) / self.interval_ns;
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
        let past = now_ns.saturating_sub(self.origin_ns) / self.interval_ns + 1;
        let passed = past.saturating_sub(self.k);
        self.k = self.k.max(past);
        passed
    }

    /// Grid points `interval_ns` apart from the last one handed out on.
    pub fn set_interval(&mut self, interval_ns: u64) {
        let interval_ns = interval_ns.max(1);
        if interval_ns != self.interval_ns {
            self.origin_ns = self
                .origin_ns
                .saturating_add(self.k.saturating_mul(self.interval_ns));
            self.k = 0;
            self.interval_ns = interval_ns;
        }
    }
}

/// What the timer thread did, returned when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    /// Ticks delivered (each armed every running vCPU).
    pub ticks: u64,
    /// Grid points skipped because the thread woke too late.
    pub late: u64,
    /// The spacing of every tick delivered, summed, ns.
    pub interval_sum_ns: u64,
    /// The CPU one wake-up cost, ns, as last measured (0 before the first measurement).
    pub wake_cost_ns: u64,
}

impl TimerStats {
    /// The mean spacing of the ticks delivered, or `asked_ns` when there were none.
    pub fn mean_interval_ns(&self, asked_ns: u64) -> u64 {
        self.interval_sum_ns
            .checked_div(self.ticks)
            .unwrap_or(asked_ns)
    }
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
    let mut spacing = Spacing::new(schedule.interval_ns);
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
        stats.interval_sum_ns = stats.interval_sum_ns.saturating_add(spacing.interval_ns());
        schedule.set_interval(spacing.observe(stats.ticks, thread_cpu_ns));
        stats.wake_cost_ns = spacing.wake_cost_ns();
    }
    stats
}

/// CPU time this thread has used, ns (0 where it cannot be read: the spacing then stays).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
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

    /// `windows` measuring windows at `cost_ns` of CPU a wake-up; the spacing after each.
    fn spacings(s: &mut Spacing, from_tick: u64, cost_ns: u64, windows: u64) -> Vec<u64> {
        (1..=windows)
            .map(|w| {
                let ticks = from_tick + w * COST_WINDOW_TICKS;
                s.observe(ticks, || ticks * cost_ns)
            })
            .collect()
    }

    #[test]
    fn cheap_wake_ups_keep_the_asked_spacing() {
        let mut s = Spacing::new(100_000);
        assert_eq!(s.observe(0, || 0), 100_000);
        // 2 µs a wake-up (bare metal): 20 µs would do, 100 µs was asked.
        assert!(spacings(&mut s, 0, 2_000, 5).iter().all(|&i| i == 100_000));
        assert_eq!(s.wake_cost_ns(), 2_000);
    }

    #[test]
    fn costly_wake_ups_spread_ticks_to_a_tenth_of_a_core() {
        // delay=10 where a wake-up costs 20 µs (a virtual machine's timer interrupt).
        let mut s = Spacing::new(10_000);
        s.observe(0, || 0);
        let seen = spacings(&mut s, 0, 20_000, 12);
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        let last = *seen.last().unwrap();
        assert!((199_000..=200_000).contains(&last), "{seen:?}");
        // Halfway each window: one odd window moves it little.
        assert_eq!(seen[0], 105_000);
    }

    #[test]
    fn the_spacing_returns_to_the_asked_one_when_wake_ups_get_cheap() {
        let mut s = Spacing::new(10_000);
        s.observe(0, || 0);
        spacings(&mut s, 0, 20_000, 12);
        let mut s2 = s.clone();
        let base = 12 * COST_WINDOW_TICKS;
        let cpu0 = base * 20_000;
        let seen: Vec<u64> = (1..=20)
            .map(|w| {
                s2.observe(base + w * COST_WINDOW_TICKS, || {
                    cpu0 + w * COST_WINDOW_TICKS * 500
                })
            })
            .collect();
        assert_eq!(*seen.last().unwrap(), 10_000, "{seen:?}");
    }

    #[test]
    fn the_cpu_clock_is_read_once_a_window_not_at_every_tick() {
        let mut s = Spacing::new(10_000);
        let mut reads = 0;
        for tick in 1..=10 * COST_WINDOW_TICKS {
            s.observe(tick, || {
                reads += 1;
                tick * 20_000
            });
        }
        // The first tick starts the first window; each of the nine full windows after it
        // closes with one read.
        assert_eq!(reads, 10);
        assert_eq!(s.wake_cost_ns(), 20_000);
    }

    #[test]
    fn an_unreadable_cpu_clock_keeps_the_asked_spacing() {
        let mut s = Spacing::new(10_000);
        for w in 0..5 {
            assert_eq!(s.observe(w * COST_WINDOW_TICKS, || 0), 10_000);
        }
    }

    #[test]
    fn a_new_spacing_continues_the_grid_from_the_last_point() {
        let mut s = Schedule::new(100, 9);
        let mut now = 0;
        for _ in 0..10 {
            now = s.next(now).0;
        }
        s.set_interval(1_000);
        // Point 10 was at 1000 (±50); the next ones are 1000 apart (±500) after it.
        for k in 1..=50u64 {
            let (d, late) = s.next(now);
            assert_eq!(late, 0);
            assert!(
                d + 500 >= 1_000 + k * 1_000 && d < 1_000 + k * 1_000 + 500,
                "point {k} at {d}"
            );
            now = d;
        }
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
