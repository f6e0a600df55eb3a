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
//! - `delay=N`: host time on average, spaced in instructions: the budget is what the vCPU
//!   runs in N µs at its speed measured over the last millisecond, with random jitter (see
//!   [`DelayTrigger`]); one clock read per sample.

use kern_profile_format::SamplingMode;

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
    pub fn new(sampling: SamplingMode, now_ns: u64) -> Self {
        match sampling {
            SamplingMode::PeriodInstructions(n) => Trigger::Period(PeriodTrigger::new(n)),
            // Never consulted: nothing samples.
            SamplingMode::Off => Trigger::Period(PeriodTrigger::new(MAX_BUDGET)),
            SamplingMode::DelayMicros(us) => {
                Trigger::Delay(DelayTrigger::new(us.saturating_mul(1000), now_ns))
            }
        }
    }

    /// The budget to arm the counter with first.
    pub fn first_budget(&self) -> u64 {
        match self {
            Trigger::Period(p) => p.period,
            Trigger::Delay(d) => {
                ((d.rate * d.delay_ns as f64) as u64).clamp(MIN_BUDGET, MAX_BUDGET)
            }
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

/// What the sampling callback decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// The sample, if one is due: the index of the block instruction the budget ran out at,
    /// and the vCPU's instruction count up to and including it.
    pub sample: Option<(usize, u64)>,
    /// The value to store into the scoreboard counter.
    pub rearm: u64,
}

/// The sampling callback's arithmetic. QEMU has already added the `block_len` instructions of
/// the block being entered to the counter, which now reads `score >= THRESHOLD`; the budget
/// ran out `score - THRESHOLD` instructions before the block's end, and that instruction is
/// the one sampled, so a sample lands on an instruction, not just on a block start.
pub fn fire(
    counter: &mut Counter,
    trigger: &mut Trigger,
    score: u64,
    block_len: usize,
    now_ns: u64,
) -> Fired {
    let overshoot = score
        .saturating_sub(THRESHOLD)
        .min(block_len.max(1) as u64 - 1);
    let after_block = counter.instructions(score);
    let at = after_block.wrapping_sub(overshoot);
    let check = trigger.check(at, now_ns);
    let index = block_len.max(1) - 1 - overshoot as usize;
    Fired {
        sample: check.sample.then_some((index, at)),
        // The budget counts from the sampled instruction; the rest of the block is counted.
        rearm: counter.arm(after_block, check.budget.saturating_sub(overshoot).max(1)),
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
///
/// Samples are spaced in guest instructions, `rate × N` apart on average with ±50% random
/// jitter, where `rate` is the vCPU's speed (instructions per host ns) measured over the last
/// millisecond. So samples come every N µs of host time on average, yet every guest
/// instruction has the same chance of being sampled. Spacing them by the host clock instead
/// would weigh code by what it costs QEMU to emulate, not by the guest's work: an instruction
/// straddling a page boundary, for one, runs about 14 times slower under TCG. The original C
/// plugin measured instructions too, in effect: its callback on every instruction made all
/// instructions cost the same. The jitter keeps samples from locking onto a loop's period.
#[derive(Debug, Clone)]
pub struct DelayTrigger {
    delay_ns: u64,
    /// Instructions per host nanosecond, last measured.
    rate: f64,
    calibrated: bool,
    /// Start of the current speed measurement.
    window_ns: u64,
    window_icount: u64,
    rng: u64,
}

/// Speed assumed before the first measurement: low, so the first samples come early.
const INITIAL_RATE: f64 = 0.05;
/// The first speed measurement spans this much host time...
const FIRST_WINDOW_NS: u64 = 2_000;
/// ...later ones this much: longer than kernel code's speed swings, short enough to follow
/// phases.
const WINDOW_NS: u64 = 1_000_000;
/// A window longer than this held an idle period: it says nothing about speed.
const IDLE_WINDOW_NS: u64 = 50_000_000;

impl DelayTrigger {
    pub fn new(delay_ns: u64, now_ns: u64) -> Self {
        DelayTrigger {
            delay_ns: delay_ns.max(1),
            rate: INITIAL_RATE,
            calibrated: false,
            window_ns: now_ns,
            window_icount: 0,
            rng: 0x9E37_79B9_7F4A_7C15 ^ now_ns,
        }
    }

    /// A jitter factor in [0.5, 1.5).
    fn jitter(&mut self) -> f64 {
        // xorshift64: cheap, and good enough to break aliasing.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        0.5 + (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }

    fn budget(&mut self) -> u64 {
        let mean = self.rate * self.delay_ns as f64;
        // `as` saturates and maps NaN to 0; the clamp does the rest.
        ((mean * self.jitter()) as u64).clamp(MIN_BUDGET, MAX_BUDGET)
    }

    pub fn check(&mut self, icount: u64, now_ns: u64) -> Check {
        let dt = now_ns.saturating_sub(self.window_ns);
        let window = if self.calibrated {
            WINDOW_NS
        } else {
            FIRST_WINDOW_NS
        };
        if dt >= window {
            let di = icount.saturating_sub(self.window_icount);
            if dt < IDLE_WINDOW_NS && di > 0 {
                self.rate = di as f64 / dt as f64;
                self.calibrated = true;
            }
            self.window_ns = now_ns;
            self.window_icount = icount;
        }
        Check {
            sample: true,
            budget: self.budget(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a vCPU through blocks of `block(b)` instructions, `ns_per_insn(b)` host ns each,
    /// the way QEMU does (add the block, then the conditional callback); returns the samples
    /// as (block number, instruction index, icount, host time) and the callback count.
    fn simulate(
        mut trigger: Trigger,
        blocks: u64,
        block: impl Fn(u64) -> u64,
        ns_per_insn: impl Fn(u64) -> f64,
    ) -> (Vec<(u64, usize, u64, u64)>, u64) {
        let mut counter = Counter::new();
        let mut score = counter.arm(0, trigger.first_budget());
        let (mut now, mut calls, mut samples) = (0f64, 0, Vec::new());
        for b in 0..blocks {
            let n = block(b);
            score += n;
            if score >= THRESHOLD {
                calls += 1;
                let f = fire(&mut counter, &mut trigger, score, n as usize, now as u64);
                if let Some((index, icount)) = f.sample {
                    samples.push((b, index, icount, now as u64));
                }
                score = f.rearm;
            }
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
    fn period_samples_exactly_every_n_instructions() {
        let (samples, calls) = simulate(
            Trigger::new(SamplingMode::PeriodInstructions(1000), 0),
            10_000,
            |_| 7,
            |_| 1.0,
        );
        // 70,000 instructions: a sample on instruction 1000, 2000, ... 70,000.
        assert_eq!(samples.len(), 70);
        assert_eq!(calls, 70);
        for (k, &(b, index, icount, _)) in samples.iter().enumerate() {
            let target = (k as u64 + 1) * 1000;
            assert_eq!(icount, target);
            // Instruction `index` of block `b` is instruction number b * 7 + index + 1.
            assert_eq!(b * 7 + index as u64 + 1, target);
        }
    }

    #[test]
    fn period_with_uneven_blocks_lands_on_instructions() {
        let (samples, _) = simulate(
            Trigger::new(SamplingMode::PeriodInstructions(97), 0),
            50_000,
            |b| 1 + (b * 7919) % 23,
            |_| 1.0,
        );
        let mut starts = vec![0u64];
        for b in 0..50_000u64 {
            starts.push(starts[b as usize] + 1 + (b * 7919) % 23);
        }
        for (k, &(b, index, icount, _)) in samples.iter().enumerate() {
            assert_eq!(icount, (k as u64 + 1) * 97);
            assert_eq!(starts[b as usize] + index as u64 + 1, icount);
        }
        assert_eq!(samples.len() as u64, starts[50_000] / 97);
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

    #[test]
    fn fire_clamps_a_stale_counter() {
        let mut c = Counter::new();
        let mut t = Trigger::new(SamplingMode::PeriodInstructions(10), 0);
        let armed = c.arm(0, 10);
        // Far past the threshold (never happens with a sane block): first instruction.
        let f = fire(&mut c, &mut t, armed + 1_000, 3, 0);
        assert_eq!(f.sample.map(|s| s.0), Some(0));
        assert!(f.rearm < THRESHOLD);
        // An empty block never underflows.
        let f = fire(&mut c, &mut t, THRESHOLD, 0, 0);
        assert!(f.rearm <= THRESHOLD);
    }

    fn mean_spacing(samples: &[(u64, usize, u64, u64)]) -> f64 {
        let (first, last) = (samples[0].3, samples[samples.len() - 1].3);
        (last - first) as f64 / (samples.len() - 1) as f64
    }

    #[test]
    fn delay_is_host_time_on_average() {
        // 2 instructions per ns, blocks of 10: 10 us is about 20,000 instructions.
        let (samples, calls) = simulate(
            Trigger::new(SamplingMode::DelayMicros(10), 0),
            1_000_000,
            |_| 10,
            |_| 0.5,
        );
        // 5 ms of guest run: about 500 samples (plus a few early ones while calibrating).
        assert!((480..=520).contains(&samples.len()), "{}", samples.len());
        let mean = mean_spacing(&samples[20..]);
        assert!((9_500.0..=10_500.0).contains(&mean), "mean spacing {mean}");
        // One callback per sample: no clock polling.
        assert_eq!(calls, samples.len() as u64);
        // Jittered: spacings vary, so loops cannot alias with the sampling.
        let spacings: Vec<u64> = samples.windows(2).map(|w| w[1].3 - w[0].3).collect();
        let (min, max) = (
            spacings.iter().min().unwrap(),
            spacings.iter().max().unwrap(),
        );
        assert!(*min < 7_000 && *max > 13_000, "{min}..{max}");
    }

    #[test]
    fn delay_weighs_instructions_not_emulation_cost() {
        // Blocks alternate every 50 blocks between code that is fast to emulate (0.5 ns per
        // instruction) and code 14 times slower; both run the same number of instructions.
        let slow = |b: u64| (b / 50) % 2 == 1;
        let (samples, _) = simulate(
            Trigger::new(SamplingMode::DelayMicros(10), 0),
            4_000_000,
            |_| 8,
            |b| if slow(b) { 7.0 } else { 0.5 },
        );
        let in_slow = samples.iter().filter(|s| slow(s.0)).count() as f64;
        let share = in_slow / samples.len() as f64;
        assert!((share - 0.5).abs() < 0.03, "slow code's share {share}");
        // Still about one sample per 10 us of host time overall.
        let mean = mean_spacing(&samples[20..]);
        assert!((9_000.0..=11_000.0).contains(&mean), "mean spacing {mean}");
    }

    #[test]
    fn delay_follows_phases() {
        // 1 ns per instruction for 2 ms, then 4 ns: the spacing recovers within a window.
        let (samples, _) = simulate(
            Trigger::new(SamplingMode::DelayMicros(10), 0),
            1_000_000,
            |_| 4,
            |b| if b < 500_000 { 1.0 } else { 4.0 },
        );
        let late: Vec<_> = samples
            .iter()
            .filter(|s| s.3 > 4_000_000)
            .copied()
            .collect();
        let mean = mean_spacing(&late);
        assert!((9_000.0..=11_000.0).contains(&mean), "mean spacing {mean}");
    }

    #[test]
    fn delay_survives_idle_and_garbage_times() {
        let mut t = DelayTrigger::new(10_000, 0);
        let c = t.check(1_000_000, 1_000_000);
        assert!(c.sample && c.budget >= MIN_BUDGET);
        let before = t.rate;
        // 1 s idle: the window is dropped, the speed kept.
        let c = t.check(1_000_100, 1_001_000_000);
        assert!(c.sample);
        assert_eq!(t.rate, before);
        let c = t.check(0, 0);
        assert!(c.budget >= MIN_BUDGET);
        let c = t.check(u64::MAX, u64::MAX);
        assert!(c.sample && c.budget <= MAX_BUDGET);
    }
}
