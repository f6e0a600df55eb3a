//! `--off-cpu`: stacks weighed by time off the CPU (µs) instead of samples, from the
//! recording's task switches ([`kern_profile_profile::off_cpu`]): each task's waiting stacks,
//! `[process NAME PID]` (with `--per-process`), `[task NAME TID]`, then `[blocked]` or
//! `[runnable]`, then the stack it left on, outermost first, named as samples' kernel stacks
//! are (inlined frames, lines).
//!
//! The state sits right under the task, not at the leaf: a task's blocked and runnable time
//! are then two boxes side by side at its root, readable at a glance, while at the leaf they
//! would be slivers above every waiting stack.

use std::io::Write;
use std::rc::Rc;

use kern_profile_format::{frame_marker, LeftAs};
use kern_profile_profile::boundary;
use kern_profile_profile::collect::Run;
use kern_profile_profile::folded::{Folded, FoldedBuilder};
use kern_profile_profile::off_cpu::{is_idle, OffCpu, OffStack};
use kern_profile_profile::options::{Options, OutputFormat, ReportBy};
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::stacks::StackNamer;
use kern_profile_profile::ProfileError;
use kern_profile_symbols::Symbolizer;

use crate::by_task::TaskTableRenderer;
use crate::folded::write_folded;
use crate::pprof::PprofRenderer;
use crate::svg::{write_svg, SvgParams};
use crate::{write_err, Collected, CpuRenderer, Drawn};

/// The unit of the weights, as outputs name it.
pub const UNIT: &str = "µs";
/// The frame under a task that left runnable (preempted: it waits for a CPU).
pub const RUNNABLE_FRAME: &str = "[runnable]";
/// The frame under a task that left blocked (it sleeps until woken).
pub const BLOCKED_FRAME: &str = "[blocked]";
/// The frame under a task whose state the recorder did not read.
pub const OFF_FRAME: &str = "[off-cpu]";

const OFF_CPU_OPTIONS: &str = "--off-cpu weighs stacks by time off the CPU from the task \
     switches: it takes no --exact or --diff";
const OFF_CPU_WHOLE: &str = "--off-cpu covers the whole recording on every vCPU (a waiting \
     task is on none): drop --cpu, --per-cpu, --from-time and --to-time";
const OFF_CPU_FORMATS: &str = "--off-cpu writes svg, folded, pprof or text (-f text: the \
     table by task or --by process, with its on-CPU, runnable and blocked columns)";

/// The renderer of `opts` with `--off-cpu`, or why it makes no sense.
pub fn renderer(opts: &Options) -> Result<Box<dyn CpuRenderer>, &'static str> {
    if opts.exact || opts.diff_base.is_some() {
        return Err(OFF_CPU_OPTIONS);
    }
    if opts.cpus.is_some() || opts.per_cpu || opts.from_time.is_some() || opts.to_time.is_some() {
        return Err(OFF_CPU_WHOLE);
    }
    match opts.format {
        OutputFormat::Svg | OutputFormat::Folded => Ok(Box::new(OffCpuRenderer {
            svg: opts.format == OutputFormat::Svg,
            title: opts.title.clone(),
            reverse: opts.reverse,
        })),
        OutputFormat::Pprof => Ok(Box::new(PprofRenderer {
            exact: false,
            off_cpu: true,
        })),
        OutputFormat::Text => Ok(Box::new(TaskTableRenderer {
            by: match opts.by {
                ReportBy::Function => ReportBy::Task,
                by => by,
            },
            top: opts.top,
        })),
        _ => Err(OFF_CPU_FORMATS),
    }
}

/// The switches of `profile`, or the error of a recording without any.
pub fn switches_of(profile: &CpuProfile) -> Result<&OffCpu, ProfileError> {
    let off = &profile.summary.off_cpu;
    match off.any() {
        true => Ok(off),
        false => Err(ProfileError::NoSwitches {
            path: profile.path.clone(),
        }),
    }
}

/// The waiting stacks as a flamegraph or folded lines.
pub struct OffCpuRenderer {
    pub svg: bool,
    pub title: Option<String>,
    pub reverse: bool,
}

impl CpuRenderer for OffCpuRenderer {
    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let off = switches_of(profile)?;
        let markers = profile.header.as_ref().is_some_and(|h| h.markers);
        let folded = off_cpu_folded(run, off, markers);
        let us = folded.total;
        if self.svg {
            let params = SvgParams {
                title: self
                    .title
                    .clone()
                    .unwrap_or_else(|| format!("{}: time off the CPU, {} {UNIT}", run.kernel, us)),
                subtitle: Some(subtitle(off)),
                reverse: self.reverse,
                count_name: UNIT.into(),
            };
            write_svg(&folded, &params, out).map_err(write_err)?;
        } else {
            write_folded(&folded, out).map_err(write_err)?;
        }
        Ok(format!(
            "{us} {UNIT} off the CPU in {} named stacks, from {} task switches{}",
            folded.lines.len(),
            off.switches,
            still_off(off)
        ))
    }
}

/// `; N tasks still off at the end, counted to its last time (T s)`, or nothing; and `; N tasks exited (their last switch out is no wait, left out)`, or nothing.
pub fn still_off(off: &OffCpu) -> String {
    let mut s = match off.still_off {
        0 => String::new(),
        n => format!(
            "; {n} tasks still off at the end, counted to its last time ({:.3} s)",
            off.last_ns as f64 / 1e9
        ),
    };
    if off.exited > 0 {
        s.push_str(&format!(
            "; {} tasks exited (their last switch out is no wait: left out)",
            off.exited
        ));
    }
    s
}

fn subtitle(off: &OffCpu) -> String {
    format!(
        "{UNIT} off the CPU, from each task's switch out to its next switch in, under the \
         task then [blocked] or [runnable]; idle tasks left out{}",
        still_off(off)
    )
}

/// The waiting stacks the run keeps, in a fixed order: idle tasks left out, `--task` and
/// `--process` applied.
pub fn kept_stacks<'a>(run: &Run<'_>, off: &'a OffCpu) -> Vec<OffStack<'a>> {
    let rules = &run.filter.task_rules;
    let mut v: Vec<OffStack<'a>> = off
        .stacks()
        .filter(|s| {
            let who = off.identity(s.task);
            !who.is_some_and(is_idle)
                && (!rules.is_active() || who.is_some_and(|t| rules.keeps_identity(t)))
        })
        .collect();
    v.sort_unstable_by(|a, b| {
        (a.task, a.addrs, a.left_as as u8).cmp(&(b.task, b.addrs, b.left_as as u8))
    });
    v
}

/// Names waiting stack `s` into `out`, root first: `[process NAME PID]` (with
/// `per_process`), `[task NAME TID]`, the state, then the stack; returns how many of those
/// frames are roots that stand for no code.
pub fn name_stack(
    namer: &mut StackNamer<'_>,
    off: &OffCpu,
    s: &OffStack<'_>,
    per_process: bool,
    markers: bool,
    out: &mut Vec<Rc<str>>,
) -> usize {
    out.clear();
    match off.identity(s.task) {
        Some(t) => {
            if per_process {
                out.push(format!("[process {} {}]", t.process(), t.pid).into());
            }
            out.push(format!("[task {} {}]", t.thread(), t.tid).into());
        }
        None => out.push(format!("[task {:#x}]", s.task.0).into()),
    }
    out.push(Rc::from(match s.left_as {
        LeftAs::Runnable => RUNNABLE_FRAME,
        LeftAs::Blocked => BLOCKED_FRAME,
        LeftAs::Unknown => OFF_FRAME,
    }));
    let roots = out.len();
    let mut addrs = Vec::with_capacity(s.addrs.len());
    kernel_stack(s.addrs, markers, namer.symbolizer(), &mut addrs);
    let mut named = Vec::new();
    namer.name_addrs(&addrs, true, &mut named);
    out.extend(named);
    roots
}

/// The waiting stacks of `off`, µs (see [`kept_stacks`]), `--per-process`, `--focus` and
/// `--exclude` applied.
pub fn off_cpu_folded(run: &mut Run<'_>, off: &OffCpu, markers: bool) -> Folded {
    let stacks = kept_stacks(run, off);
    let filter = run.filter;
    let mut namer = StackNamer::new(run.sym, run.style);
    let mut b = FoldedBuilder::default();
    let mut frames: Vec<Rc<str>> = Vec::new();
    for s in &stacks {
        let roots = name_stack(&mut namer, off, s, filter.per_process, markers, &mut frames);
        if filter.names.is_active() && filter.names.shape(&mut frames, roots).is_none() {
            continue;
        }
        b.add(&frames, s.ns / 1000);
    }
    b.finish()
}

/// A switch's stack as samples' kernel stacks are keyed: markers only where the recording
/// has them, cut at a return address that is no code (what lies beyond was read from
/// garbage).
fn kernel_stack(stack: &[u64], markers: bool, sym: &mut Symbolizer, out: &mut Vec<u64>) {
    out.clear();
    let Some((&pc, rets)) = stack.split_first() else {
        return;
    };
    out.push(pc);
    for (i, &a) in rets.iter().enumerate() {
        let marker = boundary::is_marker(a);
        if marker && !markers {
            out.push(0);
            continue;
        }
        let after_entry = markers && i > 0 && rets[i - 1] == frame_marker::KERNEL_ENTRY;
        let probe = if after_entry { a } else { a.wrapping_sub(1) };
        if !marker && sym.no_code(probe) {
            break;
        }
        out.push(a);
    }
}
