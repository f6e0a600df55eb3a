//! At exit: every vCPU's last batch, the exact block counts, the host-timer and statistics
//! records and the summary lines.

use std::io::Write;
use std::sync::atomic::Ordering;

use crate::sample_costs::SampleCosts;
use crate::summary::{alloc_line, summary_line, timer_line};
use kern_profile_format::{InterruptWaits, SamplingMode, Stats, StopCounts};
use kern_profile_sampler::alloc_hooks::CallCounts;
use kern_profile_sampler::flight::DEFAULT_MAX_BYTES;
use kern_profile_sampler::writer::Finished;

use crate::{lock_within, stderr_line, timer, Plugin, EXIT_LOCK_WAIT, PLUGIN};

/// QEMU's at-exit callback: hand over every vCPU's last batch, stop the writer, append the exact block
/// counts and the statistics, print the summary.
pub fn finish() {
    let Some(p) = PLUGIN.get() else { return };
    if p.exiting.swap(true, Ordering::SeqCst) {
        return;
    }
    let mut timer = timer::stop(p);
    let (stops, mut vcpu_instructions, calls, waits, costs) = drain_vcpus(p);
    if let Some((t, _)) = timer.as_mut().filter(|_| p.cfg.at_interrupts) {
        t.interrupts = Some(waits);
    }
    // Only `period=` counts instructions; otherwise an empty list says so.
    if !matches!(p.cfg.sampling, SamplingMode::PeriodInstructions(_)) {
        vcpu_instructions.clear();
    }
    let Some(fin) = p.writer.finish() else {
        stderr_line("kern-profile: the writer thread is gone; the output may be incomplete");
        return;
    };
    let mut trailer = Vec::new();
    let exact_blocks = p
        .exact
        .as_ref()
        .and_then(|exact| lock_within(exact, EXIT_LOCK_WAIT))
        .map(|e| e.encode(p.width, &mut trailer));
    if let Some((t, _)) = &timer {
        t.encode(&mut trailer);
    }
    let alloc_stats = p.alloc.as_ref().map(|_| {
        let s = crate::alloc::stats(
            fin.events_written,
            p.writer.dropped_events() + fin.events_failed,
        );
        s.encode(&mut trailer);
        s
    });
    let stats = Stats {
        samples: fin.samples_written,
        dropped: p.writer.dropped() + fin.samples_failed,
        stops,
        vcpu_instructions,
    };
    stats.encode(&mut trailer);
    // The writer thread reported its own error when it happened; only a new one is news.
    let bounds = bounds_lines(p, &fin);
    let mut out = fin.out;
    if let Err(e) = out.write_all(&trailer).and_then(|()| out.end()) {
        if fin.error.is_none() {
            stderr_line(&format!(
                "kern-profile: writing {} failed: {e}; the file has no statistics record",
                p.cfg.out.display()
            ));
        }
    }
    stderr_line(&summary_line(
        &stats,
        exact_blocks,
        p.table_refusals.as_deref(),
        &p.cfg.out,
    ));
    for line in bounds {
        stderr_line(&line);
    }
    if p.switches.is_some() {
        stderr_line(&format!(
            "kern-profile: {} task switches recorded, each with the leaving task's stack (those in dropped batches are lost with them)",
            p.switches_seen.load(Ordering::Relaxed)
        ));
    }
    if let (Some((t, wake_cost_ns)), Some(timed)) = (&timer, &p.timed) {
        let mut line = timer_line(t, timed.interval_ns, *wake_cost_ns);
        if p.cfg.at_interrupts && p.icount {
            line.push_str(" (-icount: each at the interrupted instruction, by instructions)");
        }
        if let Some(c) = costs.line() {
            line.push_str("; ");
            line.push_str(&c);
        }
        stderr_line(&line);
    }
    if let (Some(a), Some(s)) = (&p.alloc, alloc_stats) {
        stderr_line(&alloc_line(&s, a.set.hooks.len(), &calls, &a.set.skipped));
    }
}

/// What `flight=` and `max_size=` left out, said at exit.
fn bounds_lines(p: &Plugin, fin: &Finished<crate::output::Output>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(secs) = p.cfg.flight_secs {
        let when = match fin.dumped {
            true => "from the trigger on, everything",
            false => "nothing triggered it: written at exit",
        };
        let mut line = format!(
            "kern-profile: flight recorder: the last {secs} s kept, {} samples before them left out ({when})",
            fin.evicted.samples
        );
        if fin.evicted.samples_for_size > 0 {
            line.push_str(&format!(
                "; {} of them for the ring's bound of {} bytes (max_size=)",
                fin.evicted.samples_for_size,
                p.cfg.max_size.unwrap_or(DEFAULT_MAX_BYTES)
            ));
        }
        lines.push(line);
    }
    if let (Some(max), true) = (p.cfg.max_size, fin.full) {
        lines.push(format!(
            "kern-profile: max_size={max}: the output is full: the last {} samples are not in it (it holds everything before them)",
            fin.samples_over_size
        ));
    }
    lines
}

/// Hands every vCPU's last batch to the writer (with `alloc=`, after its pending calls as
/// calls that never returned); returns the unwind stops of all vCPUs, each one's instruction
/// count, what the hooked calls did, and how long `trigger=interrupt` samples waited.
fn drain_vcpus(
    p: &Plugin,
) -> (
    StopCounts,
    Vec<u64>,
    CallCounts,
    InterruptWaits,
    SampleCosts,
) {
    // vCPUs may still run (the guest wrote isa-debug-exit from one of them): each vCPU's
    // lock orders its last callback before what is read here.
    let mut stops = StopCounts::default();
    let mut icounts = vec![0u64; p.smp_vcpus];
    let mut busy = Vec::new();
    let mut calls = CallCounts::default();
    let mut waits = InterruptWaits::default();
    let mut costs = SampleCosts::default();
    for (i, slot) in p.vcpus.iter().enumerate() {
        let Some(mut v) = lock_within(&slot.0, EXIT_LOCK_WAIT) else {
            busy.push(i);
            continue;
        };
        if !v.ready {
            continue;
        }
        if icounts.len() <= i {
            icounts.resize(i + 1, 0);
        }
        icounts[i] = v.counter.instructions(p.acc.get(i as u32));
        stops.merge(v.capture.stops());
        waits.merge(&v.waits);
        costs.merge(&v.costs);
        crate::alloc::finish_vcpu(p, i as u32, &mut v);
        if let Some(c) = v.hooks.as_ref().map(|h| h.counts()) {
            calls.events += c.events;
            calls.unreturned += c.unreturned;
            calls.nested += c.nested;
        }
        if !v.buffer.is_empty() {
            let batch = v.buffer.take(Vec::new());
            p.writer.submit_blocking(batch);
        }
    }
    if !busy.is_empty() {
        stderr_line(&format!(
            "kern-profile: vCPUs {busy:?} were busy at exit; their last samples are lost"
        ));
    }
    (stops, icounts, calls, waits, costs)
}
