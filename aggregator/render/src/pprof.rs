//! A pprof profile (`profile.proto`, gzipped: what `go tool pprof`, pprof's web UI,
//! Speedscope, Pyroscope and others read), self-contained: every function named, no binary
//! needed to read it.
//!
//! Built from the same model as the folded output: the interned address stacks of
//! [`kern_profile_profile::profile::CpuProfile`] named by [`StackNamer`] (so the same names, `--focus`,
//! `--exclude`, `--user` and every filter), or, with `--exact`, the exact counts per address
//! as [`crate::exact`] names them. Then:
//!
//! - one sample per distinct named stack, its frames' source lines included (with
//!   `--per-cpu`, per vCPU: the `cpu N` root frame becomes a `vcpu` label; per task in
//!   recordings with task records: labels `pid`, `tid` (numbers), `comm`, `process`), value = its
//!   samples (sample type `samples/count`) or, with exact counts, its instructions
//!   (`instructions/count`);
//! - one location per frame of the real function with the functions inlined there (frames
//!   marked `_[i]` in the other outputs) as its further lines, innermost first as pprof
//!   expects; locations carry no address (a stack's names, not its addresses, make it);
//! - functions by name (the demangled one: the mangled name is not kept, so `system_name`
//!   is the same) and source file; each line its own line number (a function's line where
//!   code is inlined into it is that of the inlined call). Names never carry ` (file:line)`
//!   here, `--lines` or not: pprof has the lines;
//! - one mapping per image: the kernel, then each `--user` program, by file name, over the
//!   range of its loadable segments (no build id). Synthetic frames (`[unknown]`, `[user] NAME`, boundary
//!   markers, `--per-process` roots) belong to none;
//! - `time_nanos` from the header's start time, the period from the recording's `delay=`
//!   (`time/nanoseconds`) or `period=` (`instructions/count`).

use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::rc::Rc;

use flate2::write::GzEncoder;
use flate2::Compression;
use kern_profile_format::{Header, SamplingMode};
use prost::Message;
use rustc_hash::FxHashMap;

use crate::exact::exact_counts;
use crate::off_cpu;
use crate::pprof_proto::{self as pb, Profile};
use crate::{Collected, CpuRenderer, Drawn, Needs};
use kern_profile_profile::collect::Run;
use kern_profile_profile::profile::CpuProfile;
use kern_profile_profile::stacks::{
    key_task, meta_vcpu, synthetic_roots, NameStyle, StackNamer, INLINE_SUFFIX, UNKNOWN_FRAME,
};
use kern_profile_profile::tasks::Tasks;
use kern_profile_profile::ProfileError;
use kern_profile_symbols::Symbolizer;

/// A pprof profile of the samples, or of the exact counts.
pub struct PprofRenderer {
    /// Exact instruction counts (`--exact`, or an `exact=only` recording) instead of samples.
    pub exact: bool,
    /// Time off the CPU (`--off-cpu`), µs, instead of samples.
    pub off_cpu: bool,
}

impl CpuRenderer for PprofRenderer {
    fn needs(&self) -> Needs {
        match self.exact {
            true => Needs::EXACT,
            false => Needs::default(),
        }
    }

    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let (p, what) = match (self.exact, self.off_cpu) {
            (true, _) => exact_profile(run, &collected.profile)?,
            (false, true) => off_cpu_profile(run, &collected.profile)?,
            (false, false) => sampled_profile(run, &collected.profile),
        };
        write_profile(&p, out)?;
        Ok(what)
    }
}

/// Encodes and gzips `profile` to `out`.
pub fn write_profile(profile: &Profile, out: &mut dyn Write) -> Result<(), ProfileError> {
    let bytes = profile.encode_to_vec();
    // No name, no time in the gzip header: the same input gives the same bytes.
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&bytes)
        .and_then(|()| gz.try_finish())
        .map_err(|source| ProfileError::Write {
            what: "the pprof profile".into(),
            source,
        })
}

/// One named stack, root first: each frame's function, whether it is inlined into the one
/// before it, its source file and line (when known), and its mapping (0: none).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct NamedFrame {
    function: Rc<str>,
    inlined: bool,
    file: Option<Rc<str>>,
    line: i64,
    mapping: u64,
}

/// The labels of a sample's task (recordings with task records): `pid`, `tid`, `comm`,
/// `process`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct TaskLabels {
    pid: u32,
    tid: u32,
    comm: String,
    process: String,
}

/// The samples of the profile, merged by vCPU label, task labels and named stack (sorted, so
/// that ids and bytes do not depend on hashing).
type Stacks = BTreeMap<(Option<u32>, Option<TaskLabels>, Vec<NamedFrame>), u64>;

/// The naming styles: the run's, plain (no lines) and marking inlined frames (which is how
/// frames group into locations), and the same with ` (file:line)` to read the lines from.
fn styles(style: NameStyle) -> (NameStyle, NameStyle) {
    let plain = NameStyle {
        lines: false,
        inline_suffix: true,
        ..style
    };
    (
        plain,
        NameStyle {
            lines: true,
            ..plain
        },
    )
}

/// One distinct stack named: plain names, the user part's range in them, the vCPU label.
struct Named {
    key: Box<[u64]>,
    count: u64,
    frames: Vec<Rc<str>>,
    user: Range<usize>,
    /// How many frames `--focus` took off after the synthetic roots.
    removed: usize,
    vcpu: Option<u32>,
    task: Option<TaskLabels>,
}

fn sampled_profile(run: &mut Run<'_>, profile: &CpuProfile) -> (Profile, String) {
    let (plain, lined) = styles(run.style);
    let (rules, per_cpu) = (&run.filter.names, run.filter.per_cpu);
    let mut named = Vec::new();
    {
        let mut namer = StackNamer::new(run.sym, plain).of_profile(profile);
        let mut frames = Vec::new();
        profile.counts.for_each(|key, n| {
            let user = namer.name_key_spaces(key, &mut frames);
            let skip = synthetic_roots(key);
            let Some(removed) = rules.shape(&mut frames, skip) else {
                return;
            };
            let at = |i: usize| {
                if i < skip {
                    i
                } else {
                    i.saturating_sub(removed).max(skip)
                }
            };
            let meta = key.first().copied().unwrap_or(0);
            named.push(Named {
                key: key.into(),
                count: n,
                frames: std::mem::take(&mut frames),
                user: at(user.start)..at(user.end),
                removed,
                vcpu: if per_cpu { meta_vcpu(meta) } else { None },
                task: task_labels(key, &profile.summary.tasks),
            });
        });
        let overlap = namer.overlap_warning();
        run.warnings.extend(overlap);
    }
    let mut namer = StackNamer::new(run.sym, lined).of_profile(profile);
    let mut images = Images::new(namer.symbolizer(), &run.kernel);
    let mut stacks = Stacks::new();
    let mut decorated = Vec::new();
    for n in &named {
        namer.name_key_spaces(&n.key, &mut decorated);
        let skip = synthetic_roots(&n.key).min(decorated.len());
        decorated.drain(skip..(skip + n.removed).min(decorated.len()));
        let mut frames = n.frames.as_slice();
        let mut decorated = decorated.as_slice();
        let mut user = n.user.clone();
        // `cpu N` (`--per-cpu`) is the vCPU label here.
        if let Some(v) = n.vcpu {
            if frames.first().is_some_and(|f| **f == *format!("cpu {v}")) {
                frames = &frames[1..];
                decorated = decorated.get(1..).unwrap_or_default();
                user = user.start.saturating_sub(1)..user.end.saturating_sub(1);
            }
        }
        let stack = images.frames(frames, decorated, user);
        if stack.is_empty() {
            continue;
        }
        let c = stacks.entry((n.vcpu, n.task.clone(), stack)).or_insert(0);
        *c = c.saturating_add(n.count);
    }
    let header = profile.header.as_ref();
    let (period_type, period) = match header.map(|h| h.sampling) {
        Some(SamplingMode::DelayMicros(us)) => {
            (Some(("time", "nanoseconds")), us.saturating_mul(1000))
        }
        Some(SamplingMode::PeriodInstructions(n)) => (Some(("instructions", "count")), n),
        _ => (None, 0),
    };
    let meta = Meta {
        sample_type: ("samples", "count"),
        period_type,
        period,
        time_nanos: header.map_or(0, |h| h.start_unix_ns),
        comment: format!(
            "kern-profile: {} of {} samples of {}, from {}",
            profile.kept,
            profile.summary.tally.samples,
            run.kernel,
            crate::file_name(run.input)
        ),
    };
    let p = build(&stacks, &images, &meta);
    let what = format!(
        "{} of {} samples in a pprof profile: {} samples (distinct stacks{}), {} locations, {} \
         functions",
        profile.kept,
        profile.summary.tally.samples,
        p.sample.len(),
        if per_cpu { " per vCPU" } else { "" },
        p.location.len(),
        p.function.len()
    );
    (p, what)
}

/// A stack's plain names, shaped: the frames, how many are roots, how many `--focus` took off.
type ShapedStack = (Vec<Rc<str>>, usize, usize);

/// The waiting stacks of `--off-cpu` (see [`crate::off_cpu`]): one sample per distinct named
/// stack, value its time off the CPU (`off-cpu/microseconds`), with its task's labels.
fn off_cpu_profile(
    run: &mut Run<'_>,
    profile: &CpuProfile,
) -> Result<(Profile, String), ProfileError> {
    let off = off_cpu::switches_of(profile)?;
    let markers = profile.header.as_ref().is_some_and(|h| h.markers);
    let stacks = off_cpu::kept_stacks(run, off);
    let (plain, lined) = styles(run.style);
    let (rules, per_process) = (&run.filter.names, run.filter.per_process);
    // Plain names first, shaped by --focus/--exclude (`None`: dropped; else how many frames
    // went), then the same with lines.
    let mut named: Vec<Option<ShapedStack>> = Vec::with_capacity(stacks.len());
    {
        let mut namer = StackNamer::new(run.sym, plain);
        let mut frames = Vec::new();
        for s in &stacks {
            let roots = off_cpu::name_stack(&mut namer, off, s, per_process, markers, &mut frames);
            let removed = match rules.is_active() {
                true => rules.shape(&mut frames, roots),
                false => Some(0),
            };
            named.push(removed.map(|r| (std::mem::take(&mut frames), roots, r)));
        }
    }
    let mut namer = StackNamer::new(run.sym, lined);
    let mut images = Images::new(namer.symbolizer(), &run.kernel);
    let mut merged = Stacks::new();
    let mut decorated = Vec::new();
    let mut total = 0u64;
    for (s, n) in stacks.iter().zip(&named) {
        let Some((frames, roots, removed)) = n else {
            continue;
        };
        off_cpu::name_stack(&mut namer, off, s, per_process, markers, &mut decorated);
        let from = (*roots).min(decorated.len());
        decorated.drain(from..(from + removed).min(decorated.len()));
        let stack = images.frames(frames, &decorated, 0..0);
        if stack.is_empty() {
            continue;
        }
        let us = s.ns / 1000;
        total = total.saturating_add(us);
        let task = off.identity(s.task).map(|t| TaskLabels {
            pid: t.pid,
            tid: t.tid,
            comm: t.thread(),
            process: t.process(),
        });
        let c = merged.entry((None, task, stack)).or_insert(0);
        *c = c.saturating_add(us);
    }
    let meta = Meta {
        sample_type: ("off-cpu", "microseconds"),
        period_type: None,
        period: 0,
        time_nanos: profile.header.as_ref().map_or(0, |h| h.start_unix_ns),
        comment: format!(
            "kern-profile: time off the CPU ({}) of {}, from {}'s {} task switches{}",
            off_cpu::UNIT,
            run.kernel,
            crate::file_name(run.input),
            off.switches,
            off_cpu::still_off(off)
        ),
    };
    let p = build(&merged, &images, &meta);
    let what = format!(
        "{total} {} off the CPU in a pprof profile: {} samples (distinct stacks), {} locations, \
         {} functions",
        off_cpu::UNIT,
        p.sample.len(),
        p.location.len(),
        p.function.len()
    );
    Ok((p, what))
}

/// The labels of the task a key carries, when it is a known one.
fn task_labels(key: &[u64], tasks: &Tasks) -> Option<TaskLabels> {
    let t = tasks.get(key_task(key)?)?.as_ref().ok()?;
    Some(TaskLabels {
        pid: t.pid,
        tid: t.tid,
        comm: t.thread(),
        process: t.process(),
    })
}

fn exact_profile(
    run: &mut Run<'_>,
    profile: &CpuProfile,
) -> Result<(Profile, String), ProfileError> {
    let exact = exact_counts(run, profile)?;
    let (plain, lined) = styles(run.style);
    let rules = &run.filter.names;
    let mut addrs: Vec<(u64, u64)> = exact.iter().map(|(&a, &n)| (a, n)).collect();
    addrs.sort_unstable();
    // As `exact::exact_folded` names them: the function with its inline chain, or
    // `[user] NAME;function` for a user program's address, else `[unknown]` (or `0x…`).
    let name = |namer: &mut StackNamer<'_>, addr: u64, out: &mut Vec<Rc<str>>| {
        out.clear();
        let names = namer.probe_names(addr);
        if !names.is_empty() {
            out.extend(names.iter().cloned());
            return 0..0;
        }
        let unknown = || -> Rc<str> {
            if plain.addresses {
                Rc::from(format!("{addr:#x}"))
            } else {
                Rc::from(UNKNOWN_FRAME)
            }
        };
        match namer.user_names(addr) {
            Some((root, names)) => {
                out.push(root);
                if names.is_empty() {
                    out.push(unknown());
                } else {
                    out.extend(names.iter().cloned());
                }
                0..out.len()
            }
            None => {
                out.push(unknown());
                0..0
            }
        }
    };
    let mut named: Vec<(Vec<Rc<str>>, Range<usize>, usize)> = Vec::with_capacity(addrs.len());
    {
        let mut namer = StackNamer::new(run.sym, plain);
        let mut frames = Vec::new();
        for &(a, _) in &addrs {
            let user = name(&mut namer, a, &mut frames);
            let removed = rules.shape(&mut frames, 0);
            let user = match removed {
                Some(r) => user.start.saturating_sub(r)..user.end.saturating_sub(r),
                None => 0..0,
            };
            named.push((
                std::mem::take(&mut frames),
                user,
                removed.unwrap_or(usize::MAX),
            ));
        }
    }
    let mut namer = StackNamer::new(run.sym, lined);
    let mut images = Images::new(namer.symbolizer(), &run.kernel);
    let mut stacks = Stacks::new();
    let mut decorated = Vec::new();
    let mut total = 0u64;
    for (&(a, n), (frames, user, removed)) in addrs.iter().zip(&named) {
        if *removed == usize::MAX {
            continue;
        }
        name(&mut namer, a, &mut decorated);
        decorated.drain(..(*removed).min(decorated.len()));
        let stack = images.frames(frames, &decorated, user.clone());
        if stack.is_empty() {
            continue;
        }
        total = total.saturating_add(n);
        let c = stacks.entry((None, None, stack)).or_insert(0);
        *c = c.saturating_add(n);
    }
    let header: Option<&Header> = profile.header.as_ref();
    let meta = Meta {
        sample_type: ("instructions", "count"),
        period_type: Some(("instructions", "count")),
        period: 1,
        time_nanos: header.map_or(0, |h| h.start_unix_ns),
        comment: format!(
            "kern-profile: exact instruction counts (exact=on) of {}, from {}",
            run.kernel,
            crate::file_name(run.input)
        ),
    };
    let p = build(&stacks, &images, &meta);
    let what = format!(
        "{total} instructions executed, in a pprof profile of {} stacks, {} functions",
        p.sample.len(),
        p.function.len()
    );
    Ok((p, what))
}

/// The images frames belong to (pprof mappings): 1 the kernel, then each user program.
struct Images {
    /// (file name, memory range).
    list: Vec<(String, u64, u64)>,
    /// `[user] NAME` roots → mapping id.
    user_roots: Vec<(String, u64)>,
    /// Whether any frame got a source file, a line number, an inlined frame.
    files: bool,
    lines: bool,
    inline: bool,
}

/// The lowest start and highest end of `segments` (0, 0 without).
fn span(segments: &[(u64, u64)]) -> (u64, u64) {
    let lo = segments.iter().map(|s| s.0).min().unwrap_or(0);
    let hi = segments.iter().map(|s| s.1).max().unwrap_or(0);
    (lo, hi)
}

impl Images {
    fn new(sym: &mut Symbolizer, kernel: &str) -> Self {
        let (lo, hi) = sym.elf().map_or((0, 0), |e| span(e.segments()));
        let mut list = vec![(kernel.to_string(), lo, hi)];
        let mut user_roots = Vec::new();
        for i in 0..sym.user_binary_count() {
            let name = sym.user_binary_name(i);
            let (lo, hi) = sym.user_elf(i).map_or((0, 0), |e| span(e.segments()));
            list.push((name.to_string(), lo, hi));
            user_roots.push((
                format!("{} {name}", kern_profile_profile::stacks::USER_FRAME),
                list.len() as u64,
            ));
        }
        Images {
            list,
            user_roots,
            files: false,
            lines: false,
            inline: false,
        }
    }

    /// The mapping of the user program whose `[user] NAME` root (or `--per-process` root
    /// `[user] NAME (cr3 …)`) is `root`.
    fn user_mapping(&self, root: &str) -> u64 {
        self.user_roots
            .iter()
            .find(|(r, _)| {
                root.strip_prefix(r.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(" ("))
            })
            .map_or(0, |(_, id)| *id)
    }

    /// The frames of a stack from its plain names and the same with ` (file:line)`
    /// (`decorated`; when they do not pair up, the frames go without lines), `user` being
    /// the range of the user program's part (its root first).
    fn frames(
        &mut self,
        plain: &[Rc<str>],
        decorated: &[Rc<str>],
        user: Range<usize>,
    ) -> Vec<NamedFrame> {
        let paired = plain.len() == decorated.len();
        let user_mapping = plain
            .get(user.start)
            .filter(|_| !user.is_empty())
            .map_or(0, |r| self.user_mapping(r));
        let mut out = Vec::with_capacity(plain.len());
        for (i, p) in plain.iter().enumerate() {
            let (function, inlined) = match p.strip_suffix(INLINE_SUFFIX) {
                Some(f) => (f, true),
                None => (&**p, false),
            };
            let (file, line) = if paired {
                source(function, &decorated[i])
            } else {
                (None, 0)
            };
            // Synthetic frames (`[unknown]`, `[user] NAME`, markers, address-space roots) and
            // addresses shown as `0x…` belong to no image.
            let synthetic = function.starts_with('[') || function.starts_with("0x");
            let mapping = if synthetic {
                0
            } else if user.contains(&i) {
                user_mapping
            } else {
                1
            };
            self.files |= file.is_some();
            self.lines |= line > 0;
            self.inline |= inlined;
            out.push(NamedFrame {
                function: Rc::from(function),
                inlined,
                file,
                line,
                mapping,
            });
        }
        out
    }
}

/// The source file and line of a frame from its name with ` (file:line)` (or ` (file)`)
/// after `function`.
fn source(function: &str, decorated: &str) -> (Option<Rc<str>>, i64) {
    let d = decorated.strip_suffix(INLINE_SUFFIX).unwrap_or(decorated);
    let Some(inner) = d
        .strip_prefix(function)
        .and_then(|r| r.strip_prefix(" ("))
        .and_then(|r| r.strip_suffix(')'))
    else {
        return (None, 0);
    };
    match inner.rsplit_once(':') {
        Some((file, line)) if !file.is_empty() => match line.parse::<i64>() {
            Ok(n) => (Some(Rc::from(file)), n),
            Err(_) => (Some(Rc::from(inner)), 0),
        },
        _ if inner.is_empty() => (None, 0),
        _ => (Some(Rc::from(inner)), 0),
    }
}

/// What the profile says about itself.
struct Meta {
    sample_type: (&'static str, &'static str),
    period_type: Option<(&'static str, &'static str)>,
    period: u64,
    time_nanos: u64,
    comment: String,
}

/// The string table being built.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: FxHashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The profile of `stacks`: functions, locations and strings numbered in the order the
/// (sorted) stacks first use them.
fn build(stacks: &Stacks, images: &Images, meta: &Meta) -> Profile {
    let mut strings = Strings::new();
    let mut p = Profile::default();
    let vt = |strings: &mut Strings, (t, u): (&str, &str)| pb::ValueType {
        r#type: strings.get(t),
        unit: strings.get(u),
    };
    p.sample_type.push(vt(&mut strings, meta.sample_type));
    p.default_sample_type = strings.get(meta.sample_type.0);
    p.period_type = meta.period_type.map(|t| vt(&mut strings, t));
    p.period = clamp(meta.period);
    p.time_nanos = clamp(meta.time_nanos);
    p.comment.push(strings.get(&meta.comment));
    for (i, (name, lo, hi)) in images.list.iter().enumerate() {
        p.mapping.push(pb::Mapping {
            id: i as u64 + 1,
            memory_start: *lo,
            memory_limit: *hi,
            filename: strings.get(name),
            has_functions: true,
            has_filenames: images.files,
            has_line_numbers: images.lines,
            has_inline_frames: images.inline,
            ..Default::default()
        });
    }
    let vcpu_key = strings.get("vcpu");
    let mut functions: FxHashMap<(Rc<str>, Option<Rc<str>>), u64> = FxHashMap::default();
    let mut locations: FxHashMap<(u64, Vec<(u64, i64)>), u64> = FxHashMap::default();
    let mut lines: Vec<(u64, i64)> = Vec::new();
    for ((vcpu, task, frames), &count) in stacks {
        let mut ids = Vec::new();
        // Root first: a frame not inlined starts a location, the frames inlined into it
        // (after it) are its further lines.
        let mut start = 0;
        while start < frames.len() {
            let end = start + 1 + frames[start + 1..].iter().take_while(|f| f.inlined).count();
            lines.clear();
            for f in frames[start..end].iter().rev() {
                let next = functions.len() as u64 + 1;
                let id = *functions
                    .entry((f.function.clone(), f.file.clone()))
                    .or_insert_with(|| {
                        let name = strings.get(&f.function);
                        p.function.push(pb::Function {
                            id: next,
                            name,
                            system_name: name,
                            filename: f.file.as_deref().map_or(0, |f| strings.get(f)),
                            start_line: 0,
                        });
                        next
                    });
                lines.push((id, f.line));
            }
            let mapping = frames[start].mapping;
            let next = locations.len() as u64 + 1;
            let id = *locations
                .entry((mapping, lines.clone()))
                .or_insert_with(|| {
                    p.location.push(pb::Location {
                        id: next,
                        mapping_id: mapping,
                        address: 0,
                        line: lines
                            .iter()
                            .map(|&(function_id, line)| pb::Line {
                                function_id,
                                line,
                                column: 0,
                            })
                            .collect(),
                        is_folded: false,
                    });
                    next
                });
            ids.push(id);
            start = end;
        }
        ids.reverse();
        let mut label: Vec<pb::Label> = vcpu
            .map(|v| pb::Label {
                key: vcpu_key,
                str: strings.get(&v.to_string()),
                ..Default::default()
            })
            .into_iter()
            .collect();
        // Their keys go in the string table only when used: profiles without tasks keep
        // their bytes.
        if let Some(t) = task {
            for (k, n) in [("pid", t.pid), ("tid", t.tid)] {
                label.push(pb::Label {
                    key: strings.get(k),
                    num: i64::from(n),
                    ..Default::default()
                });
            }
            for (k, v) in [("comm", &t.comm), ("process", &t.process)] {
                label.push(pb::Label {
                    key: strings.get(k),
                    str: strings.get(v),
                    ..Default::default()
                });
            }
        }
        p.sample.push(pb::Sample {
            location_id: ids,
            value: vec![clamp(count)],
            label,
        });
    }
    p.string_table = strings.table;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_of_decorated_names() {
        assert_eq!(source("f", "f (a.c:12)"), (Some(Rc::from("a.c")), 12));
        assert_eq!(source("f", "f (a.c:12)_[i]"), (Some(Rc::from("a.c")), 12));
        assert_eq!(source("f", "f (a.c)"), (Some(Rc::from("a.c")), 0));
        assert_eq!(source("f", "f"), (None, 0));
        assert_eq!(source("f", "g (a.c:1)"), (None, 0));
    }

    #[test]
    fn inlined_frames_share_a_location_innermost_first() {
        let f = |name: &str, inlined: bool, line: i64| NamedFrame {
            function: Rc::from(name),
            inlined,
            file: Some(Rc::from("k.rs")),
            line,
            mapping: 1,
        };
        let mut stacks = Stacks::new();
        stacks.insert(
            (
                Some(1),
                None,
                vec![f("main", false, 3), f("outer", false, 7), f("inl", true, 9)],
            ),
            5,
        );
        stacks.insert((Some(0), None, vec![f("main", false, 3)]), 2);
        let images = Images {
            list: vec![("kernel.elf".into(), 0x1000, 0x2000)],
            user_roots: Vec::new(),
            files: true,
            lines: true,
            inline: true,
        };
        let meta = Meta {
            sample_type: ("samples", "count"),
            period_type: None,
            period: 0,
            time_nanos: 0,
            comment: "c".into(),
        };
        let p = build(&stacks, &images, &meta);
        let mut buf = Vec::new();
        write_profile(&p, &mut buf).unwrap();
        let back = pb::decode(&buf, 1 << 20).unwrap();
        assert_eq!(back, p);
        assert_eq!(
            pb::dump(&back),
            "sample types: samples/count\n\
             default sample type: samples\n\
             time_nanos: 0, duration_nanos: 0\n\
             comment: c\n\
             12 strings, 3 functions, 2 locations, 1 mappings, 2 samples\n\
             mapping 1: kernel.elf 0x1000-0x2000 functions=true filenames=true lines=true inline=true\n\
             sample 0: 2 vcpu=0\n    main k.rs:3 (mapping 1)\n\
             sample 1: 5 vcpu=1\n    inl k.rs:9 <- inlined into outer k.rs:7 (mapping 1)\n    main k.rs:3 (mapping 1)\n"
        );
    }
}
