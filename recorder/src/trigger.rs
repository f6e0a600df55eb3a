//! When a vCPU takes its next sample.
//!
//! The plugin counts each vCPU's guest instructions with an inline add of every translated
//! block's instruction count into a per-vCPU scoreboard counter, and QEMU calls the sampling
//! callback at block entry when that counter is `>= THRESHOLD` (a conditional callback with a
//! fixed immediate). To wait `budget` instructions, the callback stores
//! `THRESHOLD - budget` into the counter ([`Counter::arm`]); from the stored value and the
//! value read later, [`Counter`] also keeps the vCPU's total instruction count, so one inline
//! add per block serves both.
//!
//! [`Trigger`] turns the sampling setting into budgets:
//! - `period=N`: exactly at the first block entry at or after every multiple of N
//!   instructions (deterministic);
//! - `delay=N`: host time. The budget is the number of instructions the vCPU is expected to
//!   run in *half* the time left until the next sample is due, from its recently measured
//!   speed; when the callback fires it reads the host clock and samples if the sample is due
//!   within an eighth of the delay, else re-arms for half the rest. Aiming at half copes with
//!   a guest that slows down twofold mid-way (kernel code changes speed several-fold within
//!   microseconds); it costs about three clock reads per sample at a steady speed.

use crate::config::Sampling;

/// The counter value at which QEMU calls the sampling callback.
pub const THRESHOLD: u64 = 1 << 62;
/// The smallest budget (instructions) between two callbacks.
pub const MIN_BUDGET: u64 = 64;
/// The largest budget.
pub const MAX_BUDGET: u64 = 1 << 40;

/// A vCPU's instruction count, kept across re-arms of its scoreboard counter.
#[derive(Debug, Clone, Default)]
pub struct Counter {
    /// Instructions executed when the counter was last armed.
    base: u64,
    /// The value the counter was armed with.
    start: u64,
}

impl Counter {
    /// A counter for a scoreboard slot that still holds its initial 0.
    pub fn new() -> Self {
        Counter::default()
    }

    /// Instructions executed, given the scoreboard counter's current value.
    pub fn instructions(&self, counter: u64) -> u64 {
        self.base.wrapping_add(counter.wrapping_sub(self.start))
    }

    /// Arms the counter to fire after `budget` more instructions; returns the value to store
    /// into the scoreboard. `icount` is [`Counter::instructions`] of the current value.
    pub fn arm(&mut self, icount: u64, budget: u64) -> u64 {
        let budget = budget.clamp(1, MAX_BUDGET);
        self.base = icount;
        self.start = THRESHOLD - budget;
        self.start
    }
}

/// What the callback should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// Take a sample.
    pub sample: bool,
    /// Instructions until the next callback.
    pub budget: u64,
}

/// Per-vCPU sampling schedule.
#[derive(Debug, Clone)]
pub enum Trigger {
    Period(PeriodTrigger),
    Delay(DelayTrigger),
}

impl Trigger {
    /// A schedule that starts at host time `now_ns`, with no instructions run yet.
    pub fn new(sampling: Sampling, now_ns: u64) -> Self {
        match sampling {
            Sampling::Period(n) => Trigger::Period(PeriodTrigger::new(n)),
            Sampling::DelayMicros(us) => {
                Trigger::Delay(DelayTrigger::new(us.saturating_mul(1000), now_ns))
            }
        }
    }

    /// The budget to arm the counter with first.
    pub fn first_budget(&self) -> u64 {
        match self {
            Trigger::Period(p) => p.period,
            Trigger::Delay(d) => d.budget(d.next_due.saturating_sub(d.last_ns)),
        }
    }

    /// Called when the budget ran out, with the vCPU's instruction count and the host time
    /// (the period mode ignores the time).
    pub fn check(&mut self, icount: u64, now_ns: u64) -> Check {
        match self {
            Trigger::Period(p) => p.check(icount),
            Trigger::Delay(d) => d.check(icount, now_ns),
        }
    }

    /// Whether `check` needs the host time (it always wants it to stamp a sample).
    pub fn needs_clock(&self) -> bool {
        matches!(self, Trigger::Delay(_))
    }
}

/// `period=N`.
#[derive(Debug, Clone)]
pub struct PeriodTrigger {
    period: u64,
    /// The instruction count of the next sample.
    next: u64,
}

impl PeriodTrigger {
    pub fn new(period: u64) -> Self {
        let period = period.clamp(1, MAX_BUDGET);
        PeriodTrigger {
            period,
            next: period,
        }
    }

    pub fn check(&mut self, icount: u64) -> Check {
        if icount < self.next {
            return Check {
                sample: false,
                budget: self.next - icount,
            };
        }
        // Skip the multiples that a long block jumped over.
        let k = (icount - self.next) / self.period + 1;
        self.next = self.next.saturating_add(k.saturating_mul(self.period));
        Check {
            sample: true,
            budget: self.next.saturating_sub(icount).max(1),
        }
    }
}

/// `delay=N`.
#[derive(Debug, Clone)]
pub struct DelayTrigger {
    delay_ns: u64,
    /// A sample is taken when it is due within this much.
    tolerance_ns: u64,
    next_due: u64,
    /// Time and instruction count of the last speed measurement.
    last_ns: u64,
    last_icount: u64,
    /// Instructions per host nanosecond, last measured.
    rate: f64,
}

/// Speed assumed before the first measurement: low, so the first check comes early.
const INITIAL_RATE: f64 = 0.05;
/// Speed is measured over at least this much host time.
const MIN_MEASURE_NS: u64 = 2_000;
/// The fraction of the time left that a budget aims at.
const AIM: f64 = 0.5;

impl DelayTrigger {
    pub fn new(delay_ns: u64, now_ns: u64) -> Self {
        let delay_ns = delay_ns.max(1);
        DelayTrigger {
            delay_ns,
            tolerance_ns: delay_ns / 8,
            next_due: now_ns.saturating_add(delay_ns),
            last_ns: now_ns,
            last_icount: 0,
            rate: INITIAL_RATE,
        }
    }

    fn budget(&self, remaining_ns: u64) -> u64 {
        // `as` saturates and maps NaN to 0; the clamp does the rest.
        ((self.rate * AIM * remaining_ns.max(1) as f64) as u64).clamp(MIN_BUDGET, MAX_BUDGET)
    }

    pub fn check(&mut self, icount: u64, now_ns: u64) -> Check {
        let dt = now_ns.saturating_sub(self.last_ns);
        if dt >= MIN_MEASURE_NS {
            let di = icount.saturating_sub(self.last_icount);
            self.rate = di as f64 / dt as f64;
            self.last_ns = now_ns;
            self.last_icount = icount;
        }
        let sample = now_ns.saturating_add(self.tolerance_ns) >= self.next_due;
        if sample {
            // Keep the average spacing, unless far behind (the vCPU was idle or descheduled).
            self.next_due = if now_ns >= self.next_due.saturating_add(self.delay_ns) {
                now_ns.saturating_add(self.delay_ns)
            } else {
                self.next_due.saturating_add(self.delay_ns)
            };
        }
        Check {
            sample,
            budget: self.budget(self.next_due.saturating_sub(now_ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a vCPU through blocks of `block` instructions, `ns_per_insn` host ns each, calling
    /// the trigger the way QEMU does; returns (samples as (icount, time), callback count).
    fn simulate(
        mut trigger: Trigger,
        blocks: u64,
        block: impl Fn(u64) -> u64,
        ns_per_insn: impl Fn(u64) -> f64,
    ) -> (Vec<(u64, u64)>, u64) {
        let mut counter = Counter::new();
        let mut score = counter.arm(0, trigger.first_budget());
        let (mut now, mut calls, mut samples) = (0f64, 0, Vec::new());
        for b in 0..blocks {
            // The callback runs at block entry, before the block's own add.
            if score >= THRESHOLD {
                calls += 1;
                let icount = counter.instructions(score);
                let c = trigger.check(icount, now as u64);
                if c.sample {
                    samples.push((icount, now as u64));
                }
                score = counter.arm(icount, c.budget);
            }
            let n = block(b);
            score += n;
            now += n as f64 * ns_per_insn(b);
        }
        assert_eq!(
            counter.instructions(score),
            (0..blocks).map(&block).sum::<u64>()
        );
        (samples, calls)
    }

    #[test]
    fn counter_survives_rearming() {
        let mut c = Counter::new();
        assert_eq!(c.instructions(0), 0);
        let v = c.arm(0, 100);
        assert_eq!(v, THRESHOLD - 100);
        assert_eq!(c.instructions(v + 130), 130);
        let v = c.arm(130, 1);
        assert_eq!(c.instructions(v + 5), 135);
        // Budgets are clamped to at least 1 and at most MAX_BUDGET.
        assert_eq!(c.arm(135, 0), THRESHOLD - 1);
        assert_eq!(c.arm(135, u64::MAX), THRESHOLD - MAX_BUDGET);
    }

    #[test]
    fn period_samples_at_every_multiple() {
        let (samples, calls) = simulate(
            Trigger::new(Sampling::Period(1000), 0),
            10_000,
            |_| 7,
            |_| 1.0,
        );
        // 70,000 instructions: one sample per 1000, at the first block entry after each.
        assert_eq!(samples.len(), 69);
        assert_eq!(calls, 69);
        for (k, (icount, _)) in samples.iter().enumerate() {
            let target = (k as u64 + 1) * 1000;
            assert!(*icount >= target && *icount < target + 7, "{k}: {icount}");
        }
    }

    #[test]
    fn period_skips_multiples_inside_long_blocks() {
        let mut t = PeriodTrigger::new(10);
        assert_eq!(
            t.check(35),
            Check {
                sample: true,
                budget: 5
            }
        );
        assert_eq!(
            t.check(39),
            Check {
                sample: false,
                budget: 1
            }
        );
        assert_eq!(
            t.check(40),
            Check {
                sample: true,
                budget: 10
            }
        );
        let mut t = PeriodTrigger::new(1);
        assert_eq!(
            t.check(5),
            Check {
                sample: true,
                budget: 1
            }
        );
        let mut t = PeriodTrigger::new(u64::MAX);
        let c = t.check(u64::MAX - 1);
        assert!(c.sample && c.budget >= 1);
    }

    fn spacing(samples: &[(u64, u64)]) -> Vec<u64> {
        samples.windows(2).map(|w| w[1].1 - w[0].1).collect()
    }

    #[test]
    fn delay_is_host_time_at_steady_speed() {
        // 2 instructions per ns, blocks of 10: 10 us is about 20,000 instructions.
        let (samples, calls) = simulate(
            Trigger::new(Sampling::DelayMicros(10), 0),
            1_000_000,
            |_| 10,
            |_| 0.5,
        );
        // 5 ms of guest run: about 500 samples.
        assert!((480..=510).contains(&samples.len()), "{}", samples.len());
        let s = spacing(&samples);
        let mean = s.iter().sum::<u64>() / s.len() as u64;
        assert!((9_500..=10_500).contains(&mean), "mean spacing {mean}");
        assert!(s.iter().all(|&d| (8_500..=11_500).contains(&d)), "{s:?}");
        // Calibrated: few callbacks per sample.
        assert!(calls < samples.len() as u64 * 5, "{calls} callbacks");
    }

    #[test]
    fn delay_follows_speed_changes() {
        // Speed halving and doubling every 200 us (1 and 2 ns per instruction).
        let (samples, calls) = simulate(
            Trigger::new(Sampling::DelayMicros(10), 0),
            2_000_000,
            |b| 3 + b % 20,
            |b| if (b / 15_000) % 2 == 0 { 1.0 } else { 2.0 },
        );
        let s = spacing(&samples);
        let mean = s.iter().sum::<u64>() / s.len() as u64;
        assert!((9_500..=10_500).contains(&mean), "mean spacing {mean}");
        assert!(
            calls < samples.len() as u64 * 5,
            "{calls} callbacks for {}",
            samples.len()
        );
        let on_time = s.iter().filter(|&&d| (8_500..=11_500).contains(&d)).count();
        assert!(on_time * 100 >= s.len() * 98, "{on_time} of {}", s.len());
        // Speed changing five-fold every few microseconds, as in real kernel code.
        let (samples, _) = simulate(
            Trigger::new(Sampling::DelayMicros(10), 0),
            4_000_000,
            |b| 3 + b % 17,
            |b| [0.55, 1.1, 2.8][((b / 700) * 7 % 3) as usize],
        );
        let mut s = spacing(&samples);
        s.sort();
        let (p10, p90) = (s[s.len() / 10], s[s.len() * 9 / 10]);
        assert!(p10 >= 7_000 && p90 <= 13_000, "p10 {p10} p90 {p90}");
        // A 25-fold slowdown: the first sample after it comes late, the next ones on time.
        let (samples, _) = simulate(
            Trigger::new(Sampling::DelayMicros(50), 0),
            2_000_000,
            |b| 3 + b % 20,
            |b| if (b / 100_000) % 2 == 0 { 0.2 } else { 5.0 },
        );
        let s = spacing(&samples);
        let mean = s.iter().sum::<u64>() / s.len() as u64;
        assert!((45_000..=60_000).contains(&mean), "mean spacing {mean}");
        let on_time = s
            .iter()
            .filter(|&&d| (40_000..=60_000).contains(&d))
            .count();
        assert!(on_time * 10 >= s.len() * 9, "{on_time} of {}", s.len());
    }

    #[test]
    fn delay_after_a_long_pause() {
        let mut t = DelayTrigger::new(10_000, 0);
        let c = t.check(1_000, 5_000);
        assert!(!c.sample);
        // 1 s later (the vCPU was idle): sample at once, then the next one 10 us later.
        let c = t.check(2_000, 1_000_005_000);
        assert!(c.sample);
        assert_eq!(t.next_due, 1_000_015_000);
        assert!(c.budget >= MIN_BUDGET);
        // Garbage times never panic.
        let c = t.check(0, 0);
        assert!(c.budget >= MIN_BUDGET);
        let c = t.check(u64::MAX, u64::MAX);
        assert!(c.sample && c.budget <= MAX_BUDGET);
    }
}
