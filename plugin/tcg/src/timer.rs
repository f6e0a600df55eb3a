//! Host-timer sampling (`delay=`): the arm slots in the scoreboard, the one timer thread that
//! sets them, QEMU's idle and resume callbacks that keep halted vCPUs out, and the figures
//! written at exit. The logic is `crate::arm_slots` and `crate::host_timer`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::arm_slots::ArmSlots;
use crate::host_timer::{HostTimer, TimerStats};
use kern_profile_format::{HostTimerStats, SamplingMode, VcpuTime};

use crate::{unix_now_ns, Plugin, PLUGIN};

/// QEMU allocates scoreboards for 16 vCPUs and reallocates them (moving every entry) when a
/// vCPU with a higher index starts; the timer thread must not write into a moved entry.
const SCOREBOARD_STABLE: usize = 16;

/// The `delay=` state.
pub struct Timed {
    pub slots: Arc<ArmSlots>,
    timer: Mutex<Option<HostTimer>>,
    pub interval_ns: u64,
    /// vCPUs initialised so far (see [`register_arm_slot`]).
    inited: AtomicU64,
}

impl Timed {
    /// The timer state for `delay=`, or None for other modes.
    pub fn new(sampling: SamplingMode, max_vcpus: usize) -> Option<Timed> {
        let SamplingMode::DelayMicros(us) = sampling else {
            return None;
        };
        Some(Timed {
            slots: Arc::new(ArmSlots::new(max_vcpus)),
            timer: Mutex::new(None),
            interval_ns: us.saturating_mul(1000).max(1),
            inited: AtomicU64::new(0),
        })
    }
}

/// Starts the timer thread (it arms only the slots `register_arm_slot` registered).
pub fn start(p: &Plugin) -> Result<(), String> {
    let Some(t) = &p.timed else { return Ok(()) };
    let timer = HostTimer::spawn(t.interval_ns, Arc::clone(&t.slots), unix_now_ns())
        .map_err(|e| format!("cannot start the timer thread: {e}"))?;
    if let Ok(mut slot) = t.timer.lock() {
        *slot = Some(timer);
    }
    Ok(())
}

/// Hands the timer vCPU `idx`'s arm slot. While QEMU may still move the scoreboard (more
/// than 16 vCPUs possible), that waits until all `-smp` vCPUs exist.
pub fn register_arm_slot(p: &Plugin, t: &Timed, idx: u32) {
    let inited = t.inited.fetch_add(1, Ordering::SeqCst) as usize + 1;
    let register = |i: u32| {
        // SAFETY: the scoreboard is never freed, and no longer moves (see above).
        unsafe { t.slots.register(i as usize, p.acc.element(i) as *mut u64) }
    };
    if p.vcpus.len() <= SCOREBOARD_STABLE {
        register(idx);
    } else if inited == p.smp_vcpus {
        (0..p.smp_vcpus as u32).for_each(register);
    }
}

/// QEMU's idle callback, for the timer: the vCPU halted.
pub fn went_idle(p: &Plugin, vcpu: u32) {
    if let Some(t) = &p.timed {
        t.slots.went_idle(vcpu as usize, p.now_ns());
    }
}

/// QEMU's vCPU-resume callback.
pub fn vcpu_resume(vcpu: u32) {
    let Some(p) = PLUGIN.get() else { return };
    if let Some(t) = &p.timed {
        t.slots.resumed(vcpu as usize, p.now_ns());
    }
}

/// Stops the timer thread; its figures with each vCPU's idle time, for the exit record, and
/// the CPU one of its wake-ups cost (ns).
pub fn stop(p: &Plugin) -> Option<(HostTimerStats, u64)> {
    let t = p.timed.as_ref()?;
    let stats: TimerStats = t
        .timer
        .lock()
        .ok()
        .and_then(|mut g| g.take())
        .map(HostTimer::stop)
        .unwrap_or_default();
    let now = p.now_ns();
    let vcpus = (0..p.smp_vcpus)
        .map(|i| {
            let s = t.slots.idle_stats(i, now);
            VcpuTime {
                idle_ns: s.idle_ns,
                idle_ticks: s.idle_ticks,
                armed_ticks: s.armed_ticks,
                throttled_ticks: s.throttled_ticks,
            }
        })
        .collect();
    let record = HostTimerStats {
        interval_ns: stats.mean_interval_ns(t.interval_ns),
        ticks: stats.ticks,
        late: stats.late,
        vcpus,
        // `trigger=interrupt`: the vCPUs' waits, added at exit.
        interrupts: None,
    };
    Some((record, stats.wake_cost_ns))
}
