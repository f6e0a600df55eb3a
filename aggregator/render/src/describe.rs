//! Words about a CPU profile for people: the text report's header, the flamegraph's
//! subtitle, and the phrases both use.

use std::borrow::Cow;

use kern_profile_format::{
    CpuFormat, Header, HostTimerStats, SamplingMode, StackSummary, StopCounts, StopReason,
    StopsFrom, WalkEnd, Walker,
};

use crate::text::pct;
use kern_profile_profile::filter::SampleFilter;
use kern_profile_profile::input::ReadSummary;
use kern_profile_profile::options::ModeFilter;
use kern_profile_profile::place::StopsByPlace;
use kern_profile_profile::profile::CpuProfile;

/// Header lines of the text report; with `split`, the kernel/user split of the kept
/// samples (by the mode each was sampled in), per vCPU too with `per_cpu`.
pub fn describe(
    p: &CpuProfile,
    kernel: &str,
    filter: &SampleFilter,
    split: bool,
    per_cpu: bool,
) -> Vec<String> {
    let mut h = vec![origin_line(p, kernel), samples_line(p, filter)];
    h.extend(p.header.as_ref().map(sampling_line));
    let asked_ns = p.header.as_ref().and_then(|hd| match hd.sampling {
        SamplingMode::DelayMicros(us) => Some(us.saturating_mul(1000)),
        _ => None,
    });
    h.extend(
        p.summary
            .tally
            .host_timer
            .as_ref()
            .map(|t| host_timer_line(t, asked_ns)),
    );
    if p.per_vcpu.len() > 1 {
        let parts: Vec<String> = p
            .per_vcpu
            .iter()
            .map(|(c, n)| format!("cpu {c} {n} ({:.1}%)", pct(*n, p.kept)))
            .collect();
        h.push(format!("per vCPU: {}", parts.join(", ")));
    }
    // Only recordings with task records: the others' reports stay as they were.
    h.extend(p.summary.tasks.describe(p.summary.tally.samples));
    if split {
        h.extend(split_lines(p, per_cpu));
    }
    if p.format == CpuFormat::Raw {
        h.extend(stacks_lines(p));
        h.extend(stops_line(&p.summary));
        let by_place = place_lines(&p.summary, &p.stops_by_place, filter);
        h.extend(by_place.iter().map(|(line, _)| line.clone()));
        let shown: Vec<&StopCounts> = by_place.iter().map(|(_, s)| s).collect();
        h.extend(stop_meanings(&p.summary, &shown));
    }
    if p.no_code_cuts > 0 {
        h.push(format!(
            "unwind stops (aggregator): {NO_CODE_STOP} {} ({:.1}% of the kept samples)",
            p.no_code_cuts,
            pct(p.no_code_cuts, p.kept)
        ));
        h.push(format!("  {NO_CODE_STOP}: {NO_CODE_MEANING}"));
    }
    h
}

fn origin_line(p: &CpuProfile, kernel: &str) -> String {
    let fmt = match p.format {
        CpuFormat::Raw => format!("kern-profile raw format v{}", p.version),
        CpuFormat::Legacy => {
            "legacy format of the original C plugin: no time, vCPU 0, kernel only".into()
        }
    };
    format!(
        "kern-profile CPU profile of {kernel}, from {} ({fmt})",
        p.path.display()
    )
}

fn samples_line(p: &CpuProfile, filter: &SampleFilter) -> String {
    let s = &p.summary;
    let mut line = format!("samples: {} read, {} kept", s.tally.samples, p.kept);
    let filters = filter_description(filter);
    if !filters.is_empty() {
        line.push_str(&format!(" ({filters})"));
    }
    if let Some(st) = &s.tally.stats {
        line.push_str(&format!("; {} dropped by the plugin", st.dropped));
    }
    line
}

fn sampling_line(hd: &Header) -> String {
    format!(
        "sampling: {}; {} vCPU{}; QEMU {}; unwind depth limit {}",
        sampling_description(hd),
        hd.vcpus,
        if hd.vcpus == 1 { "" } else { "s" },
        hd.qemu_version,
        hd.max_depth
    )
}

fn split_lines(p: &CpuProfile, per_cpu: bool) -> Vec<String> {
    let mut h = vec![format!(
        "kernel/user split: {}",
        split_text(p.kept, p.user_kept(None))
    )];
    if per_cpu {
        for &(c, n) in &p.per_vcpu {
            h.push(format!(
                "kernel/user split, cpu {c}: {}",
                split_text(n, p.user_kept(Some(c)))
            ));
        }
    }
    h
}

/// `host timer: 95210 ticks (every 10 µs on average; 12 skipped, …); halted, so not sampled:
/// cpu 1 0.52 s` (`delay=`, whose value in µs × 1000 is `asked_ns`).
fn host_timer_line(t: &HostTimerStats, asked_ns: Option<u64>) -> String {
    let mut line = format!(
        "host timer: {} ticks (every {} µs on average",
        t.ticks,
        t.interval_ns as f64 / 1000.0
    );
    if asked_ns.is_some_and(|asked| t.interval_ns > asked) {
        line.push_str(
            ", wider than delay= asked: the host's timer wake-ups were costly, and the timer kept under a tenth of a core",
        );
    }
    if t.late > 0 {
        line.push_str(&format!(
            "; {} skipped, the host woke the timer late",
            t.late
        ));
    }
    line.push(')');
    let throttled = t
        .vcpus
        .iter()
        .fold(0u64, |s, v| s.saturating_add(v.throttled_ticks));
    if throttled > 0 {
        line.push_str(&format!(
            "; {throttled} vCPU ticks skipped because stack walks were slow (sampling kept under a tenth of the run)"
        ));
    }
    let idle: Vec<String> = t
        .vcpus
        .iter()
        .enumerate()
        .filter(|(_, v)| v.idle_ns > 0)
        .map(|(c, v)| format!("cpu {c} {:.2} s", v.idle_ns as f64 / 1e9))
        .collect();
    if !idle.is_empty() {
        line.push_str(&format!("; halted, so not sampled: {}", idle.join(", ")));
    }
    if let Some(w) = &t.interrupts {
        line.push_str(&format!(
            "; trigger=interrupt: {} (the vCPU ran that long with interrupts masked, or took none: such code is sampled where it unmasks)",
            w.describe()
        ));
    }
    line
}

/// `stacks of 1000 kernel samples: 98.1% whole (…); cut 1.9%: …`, then the user samples'
/// line and the boot samples' count: the kept samples' stacks whole and cut, first, kernel
/// and user apart (a user program built without frame pointers cuts its own stacks, which
/// says nothing of the kernel's), boot code (a decompressor, paging off) counted alone.
fn stacks_lines(p: &CpuProfile) -> Vec<String> {
    let w = &p.walk_tally;
    let mut lines = Vec::new();
    for (ends, what) in [(&w.kernel_ends, "kernel"), (&w.user_ends, "user")] {
        let n = ends.total();
        if n > 0 {
            lines.push(format!(
                "stacks of {n} {what} samples: {}",
                StackSummary(ends)
            ));
        }
    }
    if w.boot > 0 && !lines.is_empty() {
        lines.push(format!(
            "stacks of {} boot and firmware samples (code outside the kernel: a \
             decompressor, early boot, firmware): not counted, they are not the kernel's",
            w.boot
        ));
    }
    lines
}

/// Why unwinds stopped: from the statistics record, else as counted from the samples.
fn stops_line(s: &ReadSummary) -> Option<String> {
    let (stops, from) = s.tally.run_stops();
    let from = match from {
        StopsFrom::Statistics => "statistics record",
        StopsFrom::Samples => "counted from the samples: no statistics record",
    };
    let parts = stop_parts(stops);
    (!parts.is_empty()).then(|| format!("unwind stops ({from}): {parts}"))
}

/// `null frame pointer 12 (60.0%), misaligned frame pointer 8 (40.0%)`; empty without stops.
fn stop_parts(stops: &StopCounts) -> String {
    let total = stops.total();
    let parts: Vec<String> = stops
        .nonzero()
        .map(|(b, n)| {
            let name = StopReason::name_of_byte(b);
            format!("{name} {n} ({:.1}%)", pct(n, total))
        })
        .collect();
    parts.join(", ")
}

/// The kept samples' stops by where each was taken (kernel with paging on, user, boot or
/// firmware), one line a place, with the stops it shows: only when they say something the
/// run's line does not (samples of several places, or fewer samples than the run's).
fn place_lines(
    s: &ReadSummary,
    by_place: &StopsByPlace,
    filter: &SampleFilter,
) -> Vec<(String, StopCounts)> {
    let places: Vec<_> = by_place.nonempty().collect();
    let (run, _) = s.tally.run_stops();
    if places.is_empty() || (places.len() == 1 && places[0].1 == run) {
        return Vec::new();
    }
    let names = if filter.names.is_active() {
        " (before --focus/--exclude)"
    } else {
        ""
    };
    places
        .into_iter()
        .map(|(place, stops)| {
            let line = format!(
                "unwind stops of {} {}{names}: {}",
                stops.total(),
                place.samples(),
                stop_parts(stops)
            );
            (line, stops.clone())
        })
        .collect()
}

/// The aggregator's own stop: a kernel stack's return address in the kernel ELF's loadable
/// segments but in no executable section.
pub const NO_CODE_STOP: &str = "return address that is no code";
const NO_CODE_MEANING: &str = "a frame's return address lay in the kernel's image but \
     outside its code (data, a stack: garbage read as a frame): the stack is cut there";

/// What each unwind stop that occurred (in the run's line or in `more`) means, one indented
/// line each, in words a user understands: which ends are normal and which cut stacks short.
fn stop_meanings(s: &ReadSummary, more: &[&StopCounts]) -> Vec<String> {
    let (stops, _) = s.tally.run_stops();
    let mut all = stops.clone();
    for m in more {
        all.merge(m);
    }
    let mut lines: Vec<String> = Vec::new();
    for (b, _) in all.nonzero() {
        let end = WalkEnd::of_byte(b);
        let Some(meaning) = end_meaning(end) else {
            continue;
        };
        let line = format!("  {}: {meaning}", end.name());
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// What a walk's end says about its stack: the reason's meaning as the walker that met it
/// reads it, and past an entry from user space, that the kernel's part is whole.
fn end_meaning(end: WalkEnd) -> Option<Cow<'static, str>> {
    let r = end.reason()?;
    let tables = matches!(end.walker(), Some(Walker::Orc | Walker::Cfi));
    let meaning: Cow<'static, str> = match r {
        StopReason::NullFramePointer | StopReason::NullReturnAddress if tables => Cow::Borrowed(
            "the unwind tables mark the end of the stack there: a thread's first frame \
             (normal: the stack is whole)",
        ),
        StopReason::NotIncreasing | StopReason::OffStack if tables => Cow::Borrowed(
            "the unwind tables' rule gave a caller's stack pointer below the last, or far \
             off the stack (a rule that does not fit the code, or a stack switch the tables \
             do not describe): the stack is cut there",
        ),
        r => Cow::Borrowed(stop_meaning(r)),
    };
    Some(match end.from_user() {
        true => Cow::Owned(format!(
            "the walk crossed the kernel's entry into the user program that entered it (the \
             kernel's part of the stack is whole), then in the program: {meaning}"
        )),
        false => meaning,
    })
}

/// What a stop reason says about the stacks it ended.
pub fn stop_meaning(r: StopReason) -> &'static str {
    match r {
        StopReason::NullFramePointer => {
            "the end of the chain, at a thread's first frame (normal: the stack is whole)"
        }
        StopReason::NullReturnAddress => {
            "the end of the chain, a frame with no caller (normal at entry points)"
        }
        StopReason::Misaligned => {
            "the frame-pointer register held no frame (code built without frame pointers, \
             or a stack the walker cannot cross): the stack is cut there"
        }
        StopReason::NotIncreasing => {
            "the next frame lay below the last (a loop, code without frame pointers, or a \
             stack switch beyond the two a walk may take): the stack is cut there"
        }
        StopReason::Unreadable => {
            "the next frame was in memory QEMU could not read (unmapped, or not a pointer): \
             the stack is cut there"
        }
        StopReason::DepthLimit => "the depth limit (`depth=`): deeper callers are left out",
        StopReason::OffStack => {
            "the next frame lay far beyond where the stack began (garbage in the frame-pointer \
             register, or a chain that left its stack): not read, as it might be device \
             memory; the stack is cut there"
        }
        StopReason::EntryNotCrossed => {
            "the walk reached a kernel entry stub without unwind information, and the words \
             where the stub's instructions say the CPU pushed its frame are no such frame \
             (a stub that moves the stack in a way the walker does not follow): the \
             interrupted context is not known, and the stack is cut there"
        }
        StopReason::ReadBudget => {
            "the sample read as much guest memory as one sample may (32 windows): a chain \
             spread over many pages is cut there"
        }
    }
}

/// `kernel 62.10% (621), user 37.90% (379)`: samples in kernel and in user mode.
fn split_text(total: u64, user: u64) -> String {
    let kernel = total.saturating_sub(user);
    format!(
        "kernel {:.2}% ({kernel}), user {:.2}% ({user})",
        pct(kernel, total),
        pct(user, total)
    )
}

/// `every 100000 guest instructions per vCPU`.
pub fn sampling_description(h: &Header) -> String {
    match h.sampling {
        SamplingMode::DelayMicros(us) if h.at_interrupts => format!(
            "every {us} µs of host time per vCPU, at its next interrupt (delay, trigger=interrupt)"
        ),
        SamplingMode::DelayMicros(us) => format!("every {us} µs of host time per vCPU (delay)"),
        SamplingMode::PeriodInstructions(n) => {
            format!("every {n} guest instructions per vCPU (period)")
        }
        SamplingMode::Off => "none: exact block counts only (exact=only)".to_string(),
    }
}

/// The filters in force, for headers and subtitles (empty when none).
pub fn filter_description(o: &SampleFilter) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &o.cpus {
        parts.push(format!("vCPUs {c}"));
    }
    match o.mode {
        ModeFilter::All => {}
        ModeFilter::KernelOnly => parts.push("kernel only".to_string()),
        ModeFilter::UserOnly => parts.push("user only".to_string()),
    }
    if o.time.is_set() {
        parts.push(o.time.describe());
    }
    if let Some(f) = &o.names.focus {
        parts.push(format!("focus on {f}"));
    }
    if !o.names.exclude.is_empty() {
        parts.push(format!("excluding {}", o.names.exclude.join(", ")));
    }
    parts.join(", ")
}

/// The flamegraph's subtitle: sampling, vCPUs, filters, orientation.
pub fn subtitle(p: &CpuProfile, filter: &SampleFilter, reverse: bool) -> String {
    let mut parts = Vec::new();
    if let Some(h) = &p.header {
        parts.push(sampling_description(h));
        parts.push(format!(
            "{} vCPU{}",
            h.vcpus,
            if h.vcpus == 1 { "" } else { "s" }
        ));
    } else {
        parts.push("legacy samples".to_string());
    }
    let f = filter_description(filter);
    if !f.is_empty() {
        parts.push(f);
    }
    if reverse {
        parts.push("reversed: leaves first".into());
    }
    parts.join(" · ")
}
