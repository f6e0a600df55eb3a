//! Per-vCPU arm slots for host-timer sampling (`delay=`).
//!
//! Each vCPU has one scoreboard entry that QEMU's conditional callback tests at every block
//! entry (`slot >= ARMED`). The timer thread stores [`ARMED`] into the slots of running vCPUs;
//! the vCPU's next block entry fires the callback, which disarms the slot and samples. So the
//! only per-block cost is the compare, and no instruction counter is needed.
//!
//! A parked vCPU (outside the `window=` function) is not armed either, nor counted.
//!
//! A halted vCPU (QEMU's idle callback) is not armed: its ticks are counted as idle instead,
//! and its halted host time is measured, so the report can show idle time per vCPU. While no
//! vCPU can be armed (all halted or parked) the timer thread sleeps
//! ([`ArmSlots::sleep_while_none_runs`]) and the vCPU that resumes wakes it: an idle guest
//! costs no timer wake-ups (`delay=10` was 100,000 a second, most of a host core here).
//!
//! Sampling cost is bounded whatever the guest does: the callback charges each sample's host
//! time to its vCPU ([`ArmSlots::charge`]), and a vCPU whose samples took more than
//! 1/[`MAX_COST_SHARE`] of the time between ticks skips ticks until the excess is paid off. A
//! guest whose stacks are slow to walk gets fewer samples, never a slower run than that.
//! One sample's charge is capped at [`MAX_CHARGE_NS`]: the read budget keeps a real walk far
//! below it, so a longer one means the host preempted the vCPU's thread mid-sample (a loaded
//! machine), which must not silence sampling for thousands of ticks.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::OnceLock;
use std::thread::{self, Thread};
use std::time::Duration;

/// The slot value that makes the conditional callback fire.
pub const ARMED: u64 = 1;
/// Sampling may take at most 1/MAX_COST_SHARE of a vCPU's host time.
pub const MAX_COST_SHARE: u64 = 10;
/// The most one sample is charged, ns.
pub const MAX_CHARGE_NS: u64 = 100_000;
/// How often a sleeping timer looks again without being woken (a safety net only).
const SLEEP_RECHECK: Duration = Duration::from_millis(100);

/// One vCPU's slot and idle bookkeeping.
#[derive(Debug, Default)]
struct Slot {
    /// The scoreboard entry, or null until the vCPU is initialised.
    entry: AtomicPtr<u64>,
    idle: AtomicBool,
    /// Outside the `window=` function: not armed.
    parked: AtomicBool,
    /// Host time the vCPU went idle (when `idle`).
    idle_since_ns: AtomicU64,
    /// Host time spent halted, summed over finished idle periods.
    idle_ns: AtomicU64,
    /// Timer ticks that found the vCPU halted.
    idle_ticks: AtomicU64,
    /// Timer ticks that armed the slot (not counting ticks that found it still armed).
    armed_ticks: AtomicU64,
    /// Sampling time not yet paid off, ns × MAX_COST_SHARE.
    debt: AtomicU64,
    /// Halted when the timer went to sleep: the ticks it slept through are idle ticks.
    idle_at_sleep: AtomicBool,
    /// Ticks skipped to pay off sampling time.
    throttled_ticks: AtomicU64,
    /// When the slot was last armed afresh ([`monotonic_ns`]), for [`ArmSlots::disarm_waited`].
    armed_at_ns: AtomicU64,
}

/// Host ns since the first call: the clock of [`ArmSlots::disarm_waited`]'s waits.
pub fn monotonic_ns() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// A vCPU's idle figures, for the exit statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IdleStats {
    pub idle_ns: u64,
    pub idle_ticks: u64,
    pub armed_ticks: u64,
    pub throttled_ticks: u64,
}

/// The slots of all vCPUs, shared by the vCPU callbacks and the timer thread.
#[derive(Debug)]
pub struct ArmSlots {
    slots: Box<[Slot]>,
    /// The timer thread, once it has looked whether to sleep.
    timer: OnceLock<Thread>,
    /// The timer sleeps until a vCPU can be armed.
    sleeping: AtomicBool,
}

impl ArmSlots {
    /// Room for `max_vcpus` vCPUs; vCPUs at or above it are never armed.
    pub fn new(max_vcpus: usize) -> Self {
        ArmSlots {
            slots: (0..max_vcpus).map(|_| Slot::default()).collect(),
            timer: OnceLock::new(),
            sleeping: AtomicBool::new(false),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Makes `vcpu`'s slot armable.
    ///
    /// # Safety
    /// `entry` must point to an 8-byte aligned `u64` that stays valid, and that nothing but
    /// QEMU's generated code and [`ArmSlots`] writes, for as long as this `ArmSlots` lives.
    pub unsafe fn register(&self, vcpu: usize, entry: *mut u64) {
        if let Some(slot) = self.slots.get(vcpu) {
            slot.entry.store(entry, SeqCst);
        }
        self.wake_timer();
    }

    /// Whether some registered vCPU is neither halted nor parked.
    fn any_running(&self) -> bool {
        self.slots.iter().any(|s| {
            !s.entry.load(SeqCst).is_null() && !s.idle.load(SeqCst) && !s.parked.load(SeqCst)
        })
    }

    /// In the timer thread: sleeps while no vCPU can be armed, until a vCPU resumes, is
    /// unparked or registered, or `stop` is set; true if it slept (the caller then counts the
    /// ticks it slept through with [`ArmSlots::add_idle_ticks`]).
    pub fn sleep_while_none_runs(&self, stop: &AtomicBool) -> bool {
        // Known and flagged before looking, so that a vCPU resuming after the look wakes us
        // (both sides SeqCst); an unpark before the park makes the park return at once.
        self.timer.get_or_init(thread::current);
        self.sleeping.store(true, SeqCst);
        let mut slept = false;
        while !self.any_running() && !stop.load(SeqCst) {
            if !slept {
                for s in self.slots.iter() {
                    s.idle_at_sleep.store(s.idle.load(SeqCst), Relaxed);
                }
                slept = true;
            }
            thread::park_timeout(SLEEP_RECHECK);
        }
        self.sleeping.store(false, SeqCst);
        slept
    }

    /// After a sleep: `ticks` grid points passed with no tick; each vCPU halted when the
    /// timer went to sleep counts them as idle.
    pub fn add_idle_ticks(&self, ticks: u64) {
        for s in self.slots.iter().filter(|s| s.idle_at_sleep.load(Relaxed)) {
            s.idle_ticks.fetch_add(ticks, Relaxed);
        }
    }

    /// Wakes the timer if it sleeps (a vCPU became armable).
    fn wake_timer(&self) {
        if self.sleeping.load(SeqCst) {
            if let Some(t) = self.timer.get() {
                t.unpark();
            }
        }
    }

    fn entry(&self, vcpu: usize) -> Option<&AtomicU64> {
        let ptr = self.slots.get(vcpu)?.entry.load(Relaxed);
        // SAFETY: `register`'s contract keeps `ptr` valid and aligned.
        (!ptr.is_null()).then(|| unsafe { AtomicU64::from_ptr(ptr) })
    }

    /// Timer tick, `interval_ns` after the last: arms every running vCPU that owes no
    /// sampling time, counts a tick for every halted one.
    pub fn arm_all(&self, interval_ns: u64) {
        let now = monotonic_ns();
        for (vcpu, slot) in self.slots.iter().enumerate() {
            let Some(entry) = self.entry(vcpu) else {
                continue;
            };
            if slot.idle.load(Relaxed) {
                slot.idle_ticks.fetch_add(1, Relaxed);
            } else if slot.parked.load(Relaxed) {
                continue;
            } else if pay_off(&slot.debt, interval_ns) {
                slot.throttled_ticks.fetch_add(1, Relaxed);
            } else if entry.load(Relaxed) < ARMED {
                // A slot still armed from the last tick (the vCPU's host thread was not
                // running) takes one sample for both: count only fresh arms, and its wait
                // runs from the first.
                slot.armed_at_ns.store(now, Relaxed);
                if entry.swap(ARMED, Relaxed) < ARMED {
                    slot.armed_ticks.fetch_add(1, Relaxed);
                }
            }
        }
    }

    /// Parks `vcpu` (no arming, as if the timer skipped it) or lets it be armed again.
    pub fn set_parked(&self, vcpu: usize, parked: bool) {
        if let Some(slot) = self.slots.get(vcpu) {
            slot.parked.store(parked, SeqCst);
        }
        if !parked {
            self.wake_timer();
        }
    }

    /// In the callback: disarms `vcpu`'s slot; true if it was armed (take a sample).
    pub fn disarm(&self, vcpu: usize) -> bool {
        self.entry(vcpu)
            .is_some_and(|entry| entry.swap(0, Relaxed) >= ARMED)
    }

    /// `trigger=interrupt`'s [`ArmSlots::disarm`]: how long, in host ns, the slot was armed
    /// before this disarm; `None` if it was not armed.
    pub fn disarm_waited(&self, vcpu: usize) -> Option<u64> {
        let slot = self.slots.get(vcpu)?;
        self.disarm(vcpu)
            .then(|| monotonic_ns().saturating_sub(slot.armed_at_ns.load(Relaxed)))
    }

    /// In the callback, after the sample: `vcpu`'s sample took `cost_ns` of host time (capped
    /// at [`MAX_CHARGE_NS`]). A tick that armed the slot meanwhile measured the plugin's time,
    /// not the guest's: it is withdrawn (and not counted as armed). Kept, it would sample the
    /// same block again, so that a slow sample (first touches of the record buffers) draws the
    /// next to its place: one of two identical loops drew twice its share for half a second.
    pub fn charge(&self, vcpu: usize, cost_ns: u64) {
        let Some(slot) = self.slots.get(vcpu) else {
            return;
        };
        if self.disarm(vcpu) {
            slot.armed_ticks.fetch_sub(1, Relaxed);
        }
        let charge = cost_ns.min(MAX_CHARGE_NS) * MAX_COST_SHARE;
        slot.debt.fetch_add(charge, Relaxed);
    }

    /// QEMU's idle callback: the vCPU halted at host time `now_ns`.
    pub fn went_idle(&self, vcpu: usize, now_ns: u64) {
        if let Some(slot) = self.slots.get(vcpu) {
            slot.idle_since_ns.store(now_ns, Relaxed);
            slot.idle.store(true, SeqCst);
        }
    }

    /// QEMU's resume callback. A tick that armed the slot just before the halt must not
    /// sample the wake-up path as if it had run all along, so the slot is disarmed.
    pub fn resumed(&self, vcpu: usize, now_ns: u64) {
        let Some(slot) = self.slots.get(vcpu) else {
            return;
        };
        if slot.idle.swap(false, SeqCst) {
            let since = slot.idle_since_ns.load(Relaxed);
            slot.idle_ns
                .fetch_add(now_ns.saturating_sub(since), Relaxed);
        }
        if let Some(entry) = self.entry(vcpu) {
            entry.store(0, Relaxed);
        }
        self.wake_timer();
    }

    /// `vcpu`'s idle figures; a vCPU still halted counts its time up to `now_ns`.
    pub fn idle_stats(&self, vcpu: usize, now_ns: u64) -> IdleStats {
        let Some(slot) = self.slots.get(vcpu) else {
            return IdleStats::default();
        };
        let open = if slot.idle.load(Relaxed) {
            now_ns.saturating_sub(slot.idle_since_ns.load(Relaxed))
        } else {
            0
        };
        IdleStats {
            idle_ns: slot.idle_ns.load(Relaxed) + open,
            idle_ticks: slot.idle_ticks.load(Relaxed),
            armed_ticks: slot.armed_ticks.load(Relaxed),
            throttled_ticks: slot.throttled_ticks.load(Relaxed),
        }
    }
}

/// Takes one tick's worth (`interval_ns`) off `debt`; true if some debt remains, so the tick
/// must be skipped. Only the timer thread subtracts, so a plain load and store race only with
/// the callback's `fetch_add`, whose charge at worst waits one more tick.
fn pay_off(debt: &AtomicU64, interval_ns: u64) -> bool {
    let d = debt.load(Relaxed);
    if d == 0 {
        return false;
    }
    let left = d.saturating_sub(interval_ns);
    // Keep a charge that arrived since the load.
    let _ = debt.compare_exchange(d, left, Relaxed, Relaxed);
    left > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots_with(entries: &mut [u64]) -> ArmSlots {
        let slots = ArmSlots::new(entries.len());
        for (i, e) in entries.iter_mut().enumerate() {
            // SAFETY: `entries` outlives `slots` in every test.
            unsafe { slots.register(i, e) };
        }
        slots
    }

    #[test]
    fn a_wait_runs_from_the_first_tick_that_armed_the_slot() {
        let mut entries = [0u64; 1];
        let slots = slots_with(&mut entries);
        assert_eq!(slots.disarm_waited(0), None);
        slots.arm_all(10);
        std::thread::sleep(Duration::from_millis(20));
        slots.arm_all(10);
        let waited = slots.disarm_waited(0).unwrap();
        assert!(waited >= 20_000_000, "{waited}");
        assert_eq!(slots.disarm_waited(0), None);
    }

    #[test]
    fn tick_arms_running_vcpus_and_disarm_fires_once() {
        let mut entries = [0u64; 2];
        let slots = slots_with(&mut entries);
        slots.arm_all(10);
        slots.arm_all(10);
        assert!(slots.disarm(0));
        assert!(
            !slots.disarm(0),
            "a slot fires once, however many ticks armed it"
        );
        assert!(slots.disarm(1));
        assert_eq!(slots.idle_stats(1, 0).armed_ticks, 1);
    }

    #[test]
    fn a_parked_vcpu_is_neither_armed_nor_counted() {
        let mut entries = [0u64; 2];
        let slots = slots_with(&mut entries);
        slots.set_parked(1, true);
        slots.arm_all(10);
        assert!(slots.disarm(0));
        assert!(!slots.disarm(1));
        assert_eq!(slots.idle_stats(1, 0), IdleStats::default());
        slots.set_parked(1, false);
        slots.arm_all(10);
        assert!(slots.disarm(1));
    }

    #[test]
    fn halted_vcpu_is_not_armed_and_its_idle_time_is_measured() {
        let mut entries = [0u64; 1];
        let slots = slots_with(&mut entries);
        slots.went_idle(0, 1_000);
        slots.arm_all(10);
        slots.arm_all(10);
        assert!(!slots.disarm(0));
        assert_eq!(
            slots.idle_stats(0, 1_500).idle_ns,
            500,
            "open idle period counts"
        );
        slots.resumed(0, 3_000);
        let stats = slots.idle_stats(0, 9_000);
        assert_eq!(
            (stats.idle_ns, stats.idle_ticks, stats.armed_ticks),
            (2_000, 2, 0)
        );
    }

    #[test]
    fn resume_clears_an_arm_from_before_the_halt() {
        let mut entries = [0u64; 1];
        let slots = slots_with(&mut entries);
        slots.arm_all(10);
        slots.went_idle(0, 10);
        slots.resumed(0, 20);
        assert!(!slots.disarm(0));
    }

    #[test]
    fn a_costly_sample_skips_ticks_until_paid_off() {
        let mut entries = [0u64; 1];
        let slots = slots_with(&mut entries);
        // A cheap sample (under a tenth of the interval) skips nothing.
        slots.charge(0, 50);
        slots.arm_all(1_000);
        assert!(slots.disarm(0));
        // A sample that took 3 intervals costs 30 intervals of sampling-free time.
        slots.charge(0, 3_000);
        let mut armed_after = 0;
        for tick in 1..=40 {
            slots.arm_all(1_000);
            if slots.disarm(0) {
                armed_after = tick;
                break;
            }
        }
        assert_eq!(armed_after, 30);
        assert_eq!(slots.idle_stats(0, 0).throttled_ticks, 29);
    }

    #[test]
    fn a_tick_during_a_sample_is_withdrawn() {
        let mut entries = [0u64; 1];
        let slots = slots_with(&mut entries);
        slots.arm_all(10_000);
        assert!(slots.disarm(0));
        // The timer ticks while the sample is being taken: the plugin's time, not the guest's.
        slots.arm_all(10_000);
        slots.charge(0, 50);
        assert!(!slots.disarm(0), "the next block must not be sampled");
        assert_eq!(slots.idle_stats(0, 0).armed_ticks, 1);
    }

    #[test]
    fn a_preempted_sample_is_charged_at_most_the_cap() {
        let mut entries = [0u64; 1];
        let slots = slots_with(&mut entries);
        // 50 ms: the thread was descheduled, not walking.
        slots.charge(0, 50_000_000);
        let skipped = (1..=2_000)
            .take_while(|_| {
                slots.arm_all(1_000);
                !slots.disarm(0)
            })
            .count() as u64;
        assert_eq!(skipped, MAX_CHARGE_NS * MAX_COST_SHARE / 1_000 - 1);
    }

    #[test]
    fn the_timer_sleeps_only_while_no_vcpu_runs() {
        let mut entries = [0u64; 2];
        let slots = slots_with(&mut entries);
        let stop = AtomicBool::new(false);
        assert!(!slots.sleep_while_none_runs(&stop), "both run");
        slots.went_idle(0, 0);
        slots.set_parked(1, true);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                slots.set_parked(1, false);
            });
            assert!(slots.sleep_while_none_runs(&stop), "one halted, one parked");
        });
        slots.add_idle_ticks(7);
        assert_eq!(slots.idle_stats(0, 0).idle_ticks, 7);
        assert_eq!(slots.idle_stats(1, 0).idle_ticks, 0, "parked is not idle");
    }

    #[test]
    fn unregistered_and_out_of_range_vcpus_are_ignored() {
        let slots = ArmSlots::new(1);
        slots.arm_all(10);
        assert!(!slots.disarm(0));
        assert!(!slots.disarm(7));
        slots.went_idle(7, 0);
        slots.resumed(7, 1);
        assert_eq!(slots.idle_stats(7, 5), IdleStats::default());
    }
}
