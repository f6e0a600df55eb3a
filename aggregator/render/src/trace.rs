//! Chrome trace-event JSON (the Trace Event Format: what Perfetto's UI and trace processor and
//! chrome://tracing read): the samples' stacks over time, a track per vCPU.
//!
//! - One process (the kernel), one thread per vCPU, `tid` = the vCPU index, named `vCPU N`
//!   and sorted by index (metadata events `M`): every vCPU QEMU ran (that `--cpu` keeps) has
//!   its track, an idle one too.
//! - Stacks are nested complete events (`X`), root outermost: what Perfetto and
//!   chrome://tracing draw as a stack chart. (The format's `stackFrames`/`sf` samples are not
//!   used: Perfetto's JSON importer takes slices, instants, counters, flows and metadata only.)
//!   A sample stands for the time from its `time_ns` to the next sample of its vCPU, at most
//!   twice that vCPU's median spacing (longer gaps, a halted or unsampled vCPU, stay empty;
//!   the last sample gets one median spacing). A frame's slice spans the consecutive samples
//!   that have it with the same callers, its `args.samples` how many: so the root slices of a
//!   track add up to its samples.
//! - The names are the other outputs' (the same [`StackNamer`], `--focus`, `--exclude`,
//!   `--user`, `--per-process` roots; `--per-cpu` adds nothing: each vCPU is a track). The
//!   category (`cat`) is `kernel` or `user` (the frames of a user program), and for a boundary
//!   marker's frame what it is: `interrupt`, `syscall`, `exception`, `kernel entry` or
//!   `stack switch`, so the slice of an interrupt or a system call covers the samples taken
//!   inside it.
//! - Times are microseconds (with ns decimals) since the plugin started. Legacy files have no
//!   time: their samples are placed 1 ms apart, in file order, on vCPU 0.
//! - A recording with task records also has a process per guest process (`pid` = the
//!   guest's, named by `process_name`) and a thread per guest thread (`tid` = the guest's,
//!   named by `thread_name`): each sample is on its vCPU's track and on its task's
//!   ([`TaskTracks`]: samples without a known task on a `[no task]` or `[task unknown]`
//!   process), so that either set of tracks adds up to the kept samples. A task's samples
//!   are spaced as a vCPU's are: the time it did not run stays empty. The vCPU tracks'
//!   process then has a pid no guest process has (from 4194304).
//! - The host-timer record (`delay=`) gives only each vCPU's total halted time, no intervals:
//!   it is a note in `otherData.halted_ns` (`"vCPU N": ns`), not a counter track.
//!
//! Like Firefox's output, it streams the samples once and keeps one row per kept sample
//! (vCPU, time, interned stack), as the spacing and the merge need each vCPU's samples in
//! time order.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::task_tracks::TaskTracks;
use crate::{file_name, write_err, Collected, CpuRenderer, Drawn, Needs};
use kern_profile_profile::boundary;
use kern_profile_profile::collect::Run;
use kern_profile_profile::filter::NameRules;
use kern_profile_profile::stacks::{meta_user, StackNamer};
use kern_profile_profile::timed::TimelineCap;

/// The sampled stacks as a Chrome trace, of at most as many samples as its cap holds.
pub struct TraceRenderer(pub TimelineCap);

/// A frame of an interned stack: its name and category, both interned.
type Token = (u32, u8);

const CATEGORIES: [&str; 7] = [
    "kernel",
    "user",
    "interrupt",
    "syscall",
    "exception",
    "kernel entry",
    "stack switch",
];

/// The category of frame `name` (`user`: in a user program's part of the stack).
fn category(name: &str, user: bool) -> u8 {
    match name {
        boundary::INTERRUPT_FRAME => 2,
        boundary::SYSCALL_FRAME => 3,
        boundary::EXCEPTION_FRAME => 4,
        boundary::KERNEL_ENTRY_FRAME => 5,
        boundary::STACK_SWITCH_FRAME => 6,
        _ => u8::from(user),
    }
}

/// Kept samples, their stacks interned.
#[derive(Default)]
struct Samples {
    names: Vec<Rc<str>>,
    name_ids: FxHashMap<Rc<str>, u32>,
    stacks: Vec<Vec<Token>>,
    /// Address key → stack index; `None` when `--focus`/`--exclude` drop it.
    by_key: FxHashMap<Box<[u64]>, Option<u32>>,
    /// (vCPU, ns, stack), in file order.
    rows: Vec<(u32, u64, u32)>,
    /// (task track, ns, stack), in file order: the same samples, when there are task tracks.
    task_rows: Vec<(u32, u64, u32)>,
}

impl Samples {
    fn intern(
        &mut self,
        key: &[u64],
        namer: &mut StackNamer<'_>,
        rules: &NameRules,
    ) -> Option<u32> {
        if let Some(&s) = self.by_key.get(key) {
            return s;
        }
        let mut frames = Vec::new();
        let id = namer
            .name_key_shaped(key, rules, &mut frames)
            .map(|user_part| {
                let user_mode = key.first().is_some_and(|&m| meta_user(m));
                let stack = frames
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let cat = category(n, user_mode || user_part.contains(&i));
                        (self.name(n), cat)
                    })
                    .collect();
                self.stacks.push(stack);
                self.stacks.len() as u32 - 1
            });
        self.by_key.insert(key.into(), id);
        id
    }

    fn name(&mut self, n: &Rc<str>) -> u32 {
        if let Some(&i) = self.name_ids.get(n) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(n.clone());
        self.name_ids.insert(n.clone(), i);
        i
    }
}

impl CpuRenderer for TraceRenderer {
    fn needs(&self) -> Needs {
        Needs::samples(self.0)
    }

    /// Names and writes the samples the pass kept.
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let (profile, timed) = (&collected.profile, &collected.samples);
        let (header, summary) = (&profile.header, &profile.summary);
        let filter = run.filter;
        let rules = filter.names.clone();
        let mut namer = StackNamer::new(run.sym, run.style).of_profile(profile);
        let mut samples = Samples::default();
        let mut tasks = Vec::new();
        for ((vcpu, _, key, ns), task) in timed.iter().zip(timed.tasks()) {
            if let Some(stack) = samples.intern(key, &mut namer, &rules) {
                samples.rows.push((vcpu, ns, stack));
                tasks.push(task);
            }
        }
        let tracks = TaskTracks::new(&profile.summary.tasks, tasks.iter().copied());
        if tracks.any() {
            samples.task_rows = samples
                .rows
                .iter()
                .zip(&tasks)
                .filter_map(|(&(_, ns, stack), &t)| Some((tracks.of(t)? as u32, ns, stack)))
                .collect();
            samples.task_rows.sort_by_key(|&(t, ns, _)| (t, ns));
        }
        run.warnings.extend(namer.overlap_warning());
        run.warnings.extend(timed.thinned("trace"));
        let mut vcpus: Vec<u32> = header.as_ref().map_or(Vec::new(), |h| {
            (0..h.vcpus.min(4096))
                .filter(|&v| filter.cpus.as_ref().is_none_or(|c| c.contains(v)))
                .collect()
        });
        let halted: Vec<(u32, u64)> = summary.tally.host_timer.as_ref().map_or(Vec::new(), |t| {
            (0u32..)
                .zip(&t.vcpus)
                .filter(|(v, _)| vcpus.contains(v))
                .map(|(v, t)| (v, t.idle_ns))
                .collect()
        });
        let kept = samples.rows.len();
        samples.rows.sort_by_key(|&(v, ns, _)| (v, ns));
        vcpus.extend(samples.rows.iter().map(|r| r.0));
        vcpus.sort_unstable();
        vcpus.dedup();
        let meta = Meta {
            kernel: &run.kernel,
            input: file_name(run.input),
            start_unix_ns: header.as_ref().map(|h| h.start_unix_ns),
            halted,
            tracks: &tracks,
            weight: timed.stride(),
        };
        let mut out = std::io::BufWriter::new(out);
        let slices = write_trace(&samples, &vcpus, &meta, &mut out)
            .and_then(|n| out.flush().map(|()| n))
            .map_err(write_err)?;
        let per_task = match tracks.tracks.len() {
            0 => String::new(),
            n => format!(", {n} task tracks"),
        };
        Ok(format!(
            "{kept} of {} samples in a trace: {} vCPU tracks{per_task}, {slices} slices",
            summary.tally.samples,
            vcpus.len()
        ))
    }
}

/// What the trace says about itself (`otherData`).
struct Meta<'a> {
    kernel: &'a str,
    input: String,
    start_unix_ns: Option<u64>,
    /// Host ns each vCPU spent halted (host-timer record).
    halted: Vec<(u32, u64)>,
    /// The guest tasks' tracks, and the vCPU tracks' pid.
    tracks: &'a TaskTracks,
    /// What each sample stands for: the timeline's stride
    /// ([`kern_profile_profile::timed::TimedSamples::stride`]).
    weight: u64,
}

/// One slice: start, duration, depth, frame, samples it spans.
struct Slice {
    start: u64,
    dur: u64,
    depth: usize,
    token: Token,
    samples: u64,
}

/// The median spacing of consecutive times (sorted), `None` with fewer than two.
fn median_gap(times: impl Iterator<Item = u64>) -> Option<u64> {
    let t: Vec<u64> = times.collect();
    let mut gaps: Vec<u64> = t.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_unstable();
    Some(gaps[gaps.len() / 2].max(1))
}

/// The slices of one vCPU's rows (sorted by time), sorted by start then depth.
fn slices(rows: &[(u32, u64, u32)], stacks: &[Vec<Token>], spacing: u64) -> Vec<Slice> {
    let mut done = Vec::new();
    // Open frames, root first: (token, start, samples).
    let mut open: Vec<(Token, u64, u64)> = Vec::new();
    let close =
        |open: &mut Vec<(Token, u64, u64)>, from: usize, end: u64, done: &mut Vec<Slice>| {
            for (depth, (token, start, samples)) in open.drain(from..).enumerate() {
                done.push(Slice {
                    start,
                    dur: end.saturating_sub(start),
                    depth: from + depth,
                    token,
                    samples,
                });
            }
        };
    // Where the last sample's time ends: a sample that starts there continues its frames.
    let mut end = 0u64;
    for (i, &(_, ns, stack)) in rows.iter().enumerate() {
        let frames = &stacks[stack as usize];
        let common = if i > 0 && end == ns {
            open.iter()
                .zip(frames)
                .take_while(|(o, f)| o.0 == **f)
                .count()
        } else {
            0
        };
        close(&mut open, common, end, &mut done);
        open.extend(frames[common..].iter().map(|&t| (t, ns, 0)));
        for o in &mut open {
            o.2 += 1;
        }
        // Saturating: a hostile file's times and spacing can be anything.
        end = match rows.get(i + 1) {
            Some(next) => {
                ns.saturating_add(next.1.saturating_sub(ns).min(spacing.saturating_mul(2)))
            }
            None => ns.saturating_add(spacing),
        };
    }
    close(&mut open, 0, end, &mut done);
    done.sort_by_key(|s| (s.start, s.depth));
    done
}

/// `ns` as microseconds with three decimals.
fn micros(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Writes the trace; returns the number of slices.
fn write_trace(
    samples: &Samples,
    vcpus: &[u32],
    meta: &Meta<'_>,
    out: &mut dyn Write,
) -> std::io::Result<usize> {
    let names: Vec<String> = samples.names.iter().map(|n| json_str(n)).collect();
    let pid = meta.tracks.vcpu_pid;
    let mut events: Vec<String> = vec![format!(
        r#"{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":{}}}}}"#,
        json_str(meta.kernel)
    )];
    for v in vcpus {
        events.push(format!(
            r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{v},"args":{{"name":"vCPU {v}"}}}}"#
        ));
        events.push(format!(
            r#"{{"ph":"M","name":"thread_sort_index","pid":{pid},"tid":{v},"args":{{"sort_index":{v}}}}}"#
        ));
    }
    let mut named = None;
    for t in &meta.tracks.tracks {
        if named != Some(t.pid) {
            named = Some(t.pid);
            events.push(format!(
                r#"{{"ph":"M","name":"process_name","pid":{},"tid":{},"args":{{"name":{}}}}}"#,
                t.pid,
                t.pid,
                json_str(&t.process)
            ));
        }
        events.push(format!(
            r#"{{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}}"#,
            t.pid,
            t.tid,
            json_str(&t.thread)
        ));
    }
    // All vCPUs' spacing, for one with a single sample.
    let overall = median_gap({
        let mut t: Vec<u64> = samples.rows.iter().map(|r| r.1).collect();
        t.sort_unstable();
        t.into_iter()
    })
    .unwrap_or(1_000_000);
    let mut count = 0;
    let vcpu_rows = samples
        .rows
        .chunk_by(|a, b| a.0 == b.0)
        .map(|r| (pid, r[0].0, r));
    let task_rows = samples.task_rows.chunk_by(|a, b| a.0 == b.0).map(|r| {
        let t = &meta.tracks.tracks[r[0].0 as usize];
        (t.pid, t.tid, r)
    });
    for (pid, tid, rows) in vcpu_rows.chain(task_rows) {
        let spacing = median_gap(rows.iter().map(|r| r.1)).unwrap_or(overall);
        for s in slices(rows, &samples.stacks, spacing) {
            let (name, cat) = s.token;
            events.push(format!(
                r#"{{"ph":"X","name":{},"cat":"{}","pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{"samples":{}}}}}"#,
                names[name as usize],
                CATEGORIES[cat as usize],
                micros(s.start),
                micros(s.dur),
                s.samples.saturating_mul(meta.weight)
            ));
            count += 1;
        }
    }
    writeln!(out, "{{\"traceEvents\":[")?;
    for (i, e) in events.iter().enumerate() {
        let sep = if i + 1 < events.len() { "," } else { "" };
        writeln!(out, "{e}{sep}")?;
    }
    let mut other = format!(
        r#""source":"kern-profile","kernel":{},"input":{},"samples":{}"#,
        json_str(meta.kernel),
        json_str(&meta.input),
        (samples.rows.len() as u64).saturating_mul(meta.weight)
    );
    if meta.weight > 1 {
        let _ = write!(other, r#","each_sample_weighs":{}"#, meta.weight);
    }
    if let Some(t) = meta.start_unix_ns {
        let _ = write!(other, r#","start_unix_ns":{t}"#);
    }
    if !meta.halted.is_empty() {
        let h: BTreeMap<u32, u64> = meta.halted.iter().copied().collect();
        let parts: Vec<String> = h
            .iter()
            .map(|(v, ns)| format!(r#""vCPU {v}":{ns}"#))
            .collect();
        let _ = write!(other, r#","halted_ns":{{{}}}"#, parts.join(","));
    }
    writeln!(
        out,
        "],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{{other}}}}}"
    )?;
    Ok(count)
}
