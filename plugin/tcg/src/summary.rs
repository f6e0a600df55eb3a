//! The line printed at exit.

use std::path::Path;

use kern_profile_format::{AllocHookStats, HostTimerStats, Stats};

use kern_profile_sampler::alloc_hooks::CallCounts;

/// The one-line summary printed to stderr at exit, from the statistics record just written;
/// `refused`: what `elf=`'s tables refused (`TableStats::refusals`), when they refused any.
pub fn summary_line(
    stats: &Stats,
    exact_blocks: Option<usize>,
    refused: Option<&str>,
    out: &Path,
) -> String {
    // The stops by walker, not whole against cut: that needs the kernel's symbols (boot
    // code outside the kernel, a decompressor, is no kernel stack), which the report has.
    let mut s = format!(
        "kern-profile: {} samples written, {} dropped; unwind stops: {}",
        stats.samples, stats.dropped, stats.stops
    );
    if let Some(n) = exact_blocks {
        s.push_str(&format!("; {n} exact blocks"));
    }
    if let Some(r) = refused {
        s.push_str(&format!("; unwind tables: {r}"));
    }
    s.push_str(&format!("; output {}", out.display()));
    s
}

/// The allocation hooks' line: events written and lost, calls that never returned, calls a
/// hooked call made itself, and the hooked functions the kernel lacked.
pub fn alloc_line(
    stats: &AllocHookStats,
    functions: usize,
    calls: &CallCounts,
    skipped: &[String],
) -> String {
    let mut s = format!(
        "kern-profile: alloc hooks on {functions} functions: {} events written, {} dropped",
        stats.events, stats.dropped
    );
    if calls.unreturned > 0 {
        s.push_str(&format!("; {} calls never returned", calls.unreturned));
    }
    if calls.nested > 0 {
        s.push_str(&format!(
            "; {} calls made by a hooked call of the same allocator (its implementation: not recorded)",
            calls.nested
        ));
    }
    if !skipped.is_empty() {
        s.push_str(&format!("; not in the kernel: {}", skipped.join(", ")));
    }
    s
}

/// The `delay=` timer's line: ticks delivered against the nominal rate, and idle vCPUs.
pub fn timer_line(t: &HostTimerStats, asked_ns: u64, wake_cost_ns: u64) -> String {
    let mut s = format!(
        "kern-profile: host timer: {} ticks every {} µs on average",
        t.ticks,
        t.interval_ns as f64 / 1000.0
    );
    if t.interval_ns > asked_ns {
        s.push_str(&format!(
            " (delay={} asked: a wake-up of the timer cost {:.1} µs of host CPU here, so its ticks were spread to keep it under 1/{} of a core)",
            asked_ns as f64 / 1000.0,
            wake_cost_ns as f64 / 1000.0,
            crate::host_timer::MAX_TIMER_SHARE
        ));
    }
    if t.late > 0 {
        s.push_str(&format!(
            ", {} more skipped (the host woke the timer late)",
            t.late
        ));
    }
    let throttled: u64 = t.vcpus.iter().map(|v| v.throttled_ticks).sum();
    if throttled > 0 {
        s.push_str(&format!(
            "; {throttled} vCPU ticks skipped to keep slow stack walks under a tenth of the run"
        ));
    }
    let idle: Vec<String> = t
        .vcpus
        .iter()
        .enumerate()
        .filter(|(_, v)| v.idle_ns > 0)
        .map(|(i, v)| format!("vCPU {i} {:.3} s", v.idle_ns as f64 / 1e9))
        .collect();
    if !idle.is_empty() {
        s.push_str(&format!("; halted (not sampled): {}", idle.join(", ")));
    }
    if let Some(w) = &t.interrupts {
        s.push_str(&format!("; trigger=interrupt: {}", w.describe()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{StopCounts, StopReason, VcpuTime};

    #[test]
    fn alloc_line_names_losses() {
        let st = AllocHookStats {
            events: 279,
            dropped: 0,
        };
        assert_eq!(
            alloc_line(&st, 6, &CallCounts::default(), &[]),
            "kern-profile: alloc hooks on 6 functions: 279 events written, 0 dropped"
        );
        let calls = CallCounts {
            events: 279,
            unreturned: 2,
            nested: 3,
        };
        assert_eq!(
            alloc_line(&st, 6, &calls, &["kmalloc_trace".into(), "krealloc".into()]),
            "kern-profile: alloc hooks on 6 functions: 279 events written, 0 dropped; 2 calls never returned; 3 calls made by a hooked call of the same allocator (its implementation: not recorded); not in the kernel: kmalloc_trace, krealloc"
        );
    }

    #[test]
    fn timer_line_names_late_ticks_and_idle_vcpus() {
        let t = HostTimerStats {
            interval_ns: 10_000,
            ticks: 90,
            late: 10,
            vcpus: vec![
                VcpuTime::default(),
                VcpuTime {
                    idle_ns: 1_500_000_000,
                    idle_ticks: 3,
                    armed_ticks: 80,
                    throttled_ticks: 7,
                },
            ],
            interrupts: None,
        };
        assert_eq!(
            timer_line(&t, 10_000, 1_500),
            "kern-profile: host timer: 90 ticks every 10 µs on average, 10 more skipped (the host woke the timer late); 7 vCPU ticks skipped to keep slow stack walks under a tenth of the run; halted (not sampled): vCPU 1 1.500 s"
        );
    }

    #[test]
    fn timer_line_says_when_ticks_were_spread() {
        let t = HostTimerStats {
            interval_ns: 201_500,
            ticks: 4_000,
            late: 0,
            vcpus: vec![VcpuTime::default()],
            interrupts: None,
        };
        assert_eq!(
            timer_line(&t, 10_000, 20_160),
            "kern-profile: host timer: 4000 ticks every 201.5 µs on average (delay=10 asked: a wake-up of the timer cost 20.2 µs of host CPU here, so its ticks were spread to keep it under 1/10 of a core)"
        );
    }

    #[test]
    fn line() {
        let mut c = StopCounts::default();
        c.add(StopReason::NullFramePointer);
        c.add(StopReason::NullFramePointer);
        c.add(StopReason::DepthLimit);
        let mut d = StopCounts::default();
        d.merge(&c);
        d.merge(&c);
        assert_eq!(d, [4, 0, 0, 0, 2, 0]);
        let stats = |samples, dropped, stops| Stats {
            samples,
            dropped,
            stops,
            vcpu_instructions: vec![],
        };
        assert_eq!(
            summary_line(&stats(3, 1, c), None, None, Path::new("/tmp/raw")),
            "kern-profile: 3 samples written, 1 dropped; unwind stops: null frame pointer 2, depth limit 1; output /tmp/raw"
        );
        assert_eq!(
            summary_line(&stats(0, 0, StopCounts::default()), Some(7), None, Path::new("x")),
            "kern-profile: 0 samples written, 0 dropped; unwind stops: none; 7 exact blocks; output x"
        );
        let refused =
            "17 of 1251 CFI entries refused (outside the kernel's text 12, overlapping 5)";
        assert_eq!(
            summary_line(&stats(5, 0, StopCounts::default()), None, Some(refused), Path::new("x")),
            "kern-profile: 5 samples written, 0 dropped; unwind stops: none; unwind tables: 17 of 1251 CFI entries refused (outside the kernel's text 12, overlapping 5); output x"
        );
    }
}
