//! A Firefox Profiler profile (the processed format, through `fxprof-processed-profile`, as
//! samply writes it): one process for the kernel, one thread per vCPU, each sample at its
//! time so that the timeline and the per-vCPU tracks work.
//!
//! The pass over the recording keeps each kept sample's vCPU, mode, time and distinct address
//! stack ([`TimedSamples`], a sink of the pass the other outputs share); then each distinct
//! address stack of a thread is named and interned once, in the order the samples came, later
//! samples with it only adding a sample row. Legacy files have no time; their samples are
//! placed 1 ms apart, in file order, on one thread.
//!
//! A recording with task records also has a process per guest process (pid = the guest's)
//! and a thread per guest thread (tid = the guest's, named by its thread name), each sample
//! on its vCPU's thread and on its task's ([`TaskTracks`]: samples without a known task on a
//! `[no task]` or `[task unknown]` one), so that either set of threads adds up to the kept
//! samples.
//!
//! The profile is written with its tables shared by its threads ([`crate::firefox_shared`]),
//! a stack on a vCPU's thread and on a task's stored once.
//!
//! Names are embedded (a symbolicated profile: it opens offline, no symbol server). Kernel
//! entries are markers too: each run of a vCPU's consecutive samples inside a `[syscall]`,
//! `[interrupt]` or `[exception]` frame is an interval marker of that name, as `-f trace`
//! makes them slices, nested where an entry came inside another.

use std::io::Write;
use std::rc::Rc;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags,
    MarkerFieldFormat, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp, SamplingInterval,
    StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle, ThreadHandle,
    Timestamp,
};
use kern_profile_format::{Header, SamplingMode};
use rustc_hash::FxHashMap;

use crate::{Collected, CpuRenderer, Drawn, Needs};
use kern_profile_profile::boundary::{EXCEPTION_FRAME, INTERRUPT_FRAME, SYSCALL_FRAME};
use kern_profile_profile::collect::Run;
use kern_profile_profile::filter::{NameRules, SampleFilter};
use kern_profile_profile::stacks::{StackNamer, UNKNOWN_FRAME};
use kern_profile_profile::tasks::{TaskId, Tasks};
use kern_profile_profile::timed::{TimedSamples, TimelineCap};
use kern_profile_profile::ProfileError;

use crate::firefox_shared::write_shared;
use crate::task_tracks::TaskTracks;

/// A distinct address stack of a thread: its interned stack (`None`: empty) and the kernel
/// entries it is inside (a bit per [`ENTRIES`]), or dropped by `--focus`/`--exclude`.
#[derive(Clone, Copy)]
enum Interned {
    Kept(Option<StackHandle>, u8),
    Dropped,
}

/// A thread of the profile: a vCPU's, or a task track's (its index in [`TaskTracks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Track {
    Vcpu(u32),
    Task(usize),
}

/// A distinct address stack's frames, named once for every thread it is on (`None`:
/// dropped by `--focus`/`--exclude`), with its kernel-entry bits.
type Named = Option<(Rc<[FrameInfo]>, u8)>;

/// Most vCPUs given a track before any sample of theirs: more than TCG runs (i386's limit is
/// 255), and a header that claims more (a damaged one) does not make an empty thread each,
/// which the shared tables' pass would hold in memory. A vCPU with samples has its track.
const IDLE_TRACKS: u32 = 256;

/// The boundary frames that become markers.
const ENTRIES: [&str; 3] = [SYSCALL_FRAME, INTERRUPT_FRAME, EXCEPTION_FRAME];

/// A run of a vCPU's samples inside one kind of kernel entry.
#[derive(Clone, Copy)]
struct EntryRun {
    start: u64,
    last: u64,
    samples: u64,
    /// The time of the first sample after it, when one came.
    next: Option<u64>,
}

/// The marker of an [`EntryRun`]: its frame's name and how many samples it spans.
struct EntryMarker {
    name: StringHandle,
    category: CategoryHandle,
    samples: u64,
}

impl StaticSchemaMarker for EntryMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "KernelEntry";
    const DESCRIPTION: Option<&'static str> = Some(
        "Consecutive samples of a vCPU inside a kernel entry (system call, interrupt, exception)",
    );
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.samples} samples");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "samples",
        label: "Samples",
        format: MarkerFieldFormat::Integer,
        flags: MarkerFieldFlags::empty(),
    }];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        unreachable!("no string field")
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.samples as f64
    }
}

struct ThreadState {
    handle: ThreadHandle,
    stacks: FxHashMap<Box<[u64]>, Interned>,
    last_ns: Option<u64>,
    first_ns: Option<u64>,
    samples: u64,
    /// The open run per [`ENTRIES`] kind, and the closed ones.
    open: [Option<EntryRun>; 3],
    runs: Vec<(usize, EntryRun)>,
}

impl ThreadState {
    fn new(handle: ThreadHandle) -> Self {
        ThreadState {
            handle,
            stacks: FxHashMap::default(),
            last_ns: None,
            first_ns: None,
            samples: 0,
            open: [None; 3],
            runs: Vec::new(),
        }
    }

    /// Extends or closes the kernel-entry runs with a sample at `ns` inside `entries`.
    fn entry_runs(&mut self, entries: u8, ns: u64) {
        for (k, open) in self.open.iter_mut().enumerate() {
            let inside = entries & (1 << k) != 0;
            match open {
                Some(r) if inside && ns >= r.last => {
                    r.last = ns;
                    r.samples += 1;
                }
                _ => {
                    if let Some(mut r) = open.take() {
                        r.next = Some(ns);
                        self.runs.push((k, r));
                    }
                    if inside {
                        *open = Some(EntryRun {
                            start: ns,
                            last: ns,
                            samples: 1,
                            next: None,
                        });
                    }
                }
            }
        }
    }
}

/// The sampled profile as a Firefox Profiler profile, one thread per vCPU (and per guest
/// thread, with task records), of at most as many samples as its cap holds.
pub struct FirefoxRenderer(pub TimelineCap);

impl CpuRenderer for FirefoxRenderer {
    fn needs(&self) -> Needs {
        Needs::samples(self.0)
    }

    fn draw(&self, run: &mut Run<'_>, collected: &Collected, out: &mut dyn Write) -> Drawn {
        let profile = &collected.profile;
        let mut namer = StackNamer::new(run.sym, run.style).of_profile(profile);
        let (kept, tasks) = write_firefox(
            profile.header.as_ref(),
            &collected.samples,
            &profile.summary.tasks,
            &mut namer,
            run.filter,
            &run.kernel,
            out,
        )?;
        run.warnings.extend(namer.overlap_warning());
        run.warnings
            .extend(collected.samples.thinned("Firefox profile"));
        let per_task = match tasks {
            0 => String::new(),
            n => format!(" and one per guest task ({n})"),
        };
        let stride = match collected.samples.stride() {
            1 => String::new(),
            n => format!(" (each vCPU's every {n}th, each weighing {n})"),
        };
        Ok(format!(
            "{kept} of {} samples{stride} in a Firefox profile, one thread per vCPU{per_task}",
            profile.summary.tally.samples
        ))
    }
}

/// Writes the profile of `samples` as JSON to `out`, naming stacks with `namer`, with task
/// tracks when `tasks` (the recording's) has any. Returns the number of samples kept and of
/// task tracks.
pub fn write_firefox(
    header: Option<&Header>,
    samples: &TimedSamples,
    tasks: &Tasks,
    namer: &mut StackNamer<'_>,
    filter: &SampleFilter,
    product: &str,
    out: impl Write,
) -> Result<(u64, usize), ProfileError> {
    let rules = filter.names.clone();
    // The tracks of the samples `--focus`/`--exclude` keep: no empty task track.
    let tracks = if tasks.any() {
        let mut keeps: FxHashMap<&[u64], bool> = FxHashMap::default();
        let mut names = Vec::new();
        let kept: Vec<_> = samples
            .iter()
            .zip(samples.tasks())
            .filter(|((_, _, key, _), _)| {
                *keeps
                    .entry(key)
                    .or_insert_with(|| namer.name_key_shaped(key, &rules, &mut names).is_some())
            })
            .map(|(_, t)| t)
            .collect();
        TaskTracks::new(tasks, kept.into_iter())
    } else {
        TaskTracks::new(tasks, std::iter::empty())
    };
    let task_tracks = tracks.tracks.len();
    let mut b = Builder::new(header, product, filter, tracks);
    b.rules = rules;
    b.weight = i32::try_from(samples.stride()).unwrap_or(i32::MAX);
    for ((vcpu, user, key, ns), task) in samples.iter().zip(samples.tasks()) {
        b.add(vcpu, user, key, ns, task, namer);
    }
    let kept = b.kept;
    b.finish(out)?;
    Ok((kept, task_tracks))
}

/// The profile being built, with one thread per vCPU.
struct Builder {
    profile: Profile,
    process: ProcessHandle,
    kernel_cat: CategoryHandle,
    user_cat: CategoryHandle,
    threads: FxHashMap<Track, ThreadState>,
    tasks: TaskTracks,
    /// Each distinct address stack's frames, named once ([`Builder::named`]).
    named: FxHashMap<Box<[u64]>, Named>,
    /// Whether the header declared the sampling interval (`delay` sampling).
    declared: bool,
    /// The sampling interval declared, in ns.
    interval_ns: u64,
    kept: u64,
    names: Vec<Rc<str>>,
    rules: NameRules,
    /// What each sample stands for: the timeline's stride ([`TimedSamples::stride`]).
    weight: i32,
}

fn start() -> Timestamp {
    Timestamp::from_nanos_since_reference(0)
}

impl Builder {
    fn new(
        header: Option<&Header>,
        product: &str,
        filter: &SampleFilter,
        tasks: TaskTracks,
    ) -> Self {
        let reference = header.map_or(ReferenceTimestamp::from_millis_since_unix_epoch(0.0), |h| {
            ReferenceTimestamp::from_millis_since_unix_epoch(h.start_unix_ns as f64 / 1e6)
        });
        let declared = match header.map(|h| h.sampling) {
            Some(SamplingMode::DelayMicros(us)) => {
                Some(SamplingInterval::from_nanos(us.saturating_mul(1000)))
            }
            _ => None,
        };
        let mut profile = Profile::new(
            product,
            reference,
            declared.unwrap_or(SamplingInterval::from_millis(1)),
        );
        profile.set_symbolicated(true);
        profile.set_os_name("guest kernel under QEMU (kern-profile)");
        let process = profile.add_process(product, tasks.vcpu_pid, start());
        let kernel_cat = profile.add_category("Kernel", CategoryColor::Orange);
        let user_cat = profile.add_category("User", CategoryColor::Blue);
        let mut b = Builder {
            profile,
            process,
            kernel_cat,
            user_cat,
            threads: FxHashMap::default(),
            tasks,
            named: FxHashMap::default(),
            declared: declared.is_some(),
            interval_ns: match header.map(|h| h.sampling) {
                Some(SamplingMode::DelayMicros(us)) => us.saturating_mul(1000),
                _ => 1_000_000,
            },
            kept: 0,
            names: Vec::with_capacity(256),
            rules: NameRules::default(),
            weight: 1,
        };
        // Task threads first: the profile gives a tid used twice a suffix, and a guest tid
        // is worth keeping as the guest says it.
        b.add_task_threads();
        // One track per vCPU QEMU ran, even an idle one.
        if let Some(h) = header {
            for v in 0..h.vcpus.min(IDLE_TRACKS) {
                if filter.cpus.as_ref().is_none_or(|c| c.contains(v)) {
                    b.thread(v);
                }
            }
        }
        b
    }

    fn thread(&mut self, vcpu: u32) -> &mut ThreadState {
        let (profile, process) = (&mut self.profile, self.process);
        self.threads.entry(Track::Vcpu(vcpu)).or_insert_with(|| {
            // No "main" thread: the profiler would name it after the process.
            let handle = profile.add_thread(process, vcpu, start(), false);
            profile.set_thread_name(handle, &format!("vCPU {vcpu}"));
            ThreadState::new(handle)
        })
    }

    /// A process per guest pid and a thread per task track, in the tracks' order.
    fn add_task_threads(&mut self) {
        let mut processes: FxHashMap<u32, ProcessHandle> = FxHashMap::default();
        for (i, t) in self.tasks.tracks.iter().enumerate() {
            let profile = &mut self.profile;
            let process = *processes
                .entry(t.pid)
                .or_insert_with(|| profile.add_process(&t.process, t.pid, start()));
            let handle = profile.add_thread(process, t.tid, start(), t.main);
            profile.set_thread_name(handle, &t.thread);
            self.threads
                .insert(Track::Task(i), ThreadState::new(handle));
        }
    }

    /// A kept sample with interning key `key`, at `ns`, of task `task` (`None`: no task).
    fn add(
        &mut self,
        vcpu: u32,
        user: bool,
        key: &[u64],
        ns: u64,
        task: Option<TaskId>,
        namer: &mut StackNamer<'_>,
    ) {
        self.thread(vcpu);
        let Some(delta) = self.add_on(Track::Vcpu(vcpu), user, key, ns, None, namer) else {
            return;
        };
        self.kept += 1;
        if let Some(i) = self.tasks.of(task) {
            // The task ran on the vCPU since its last sample: the vCPU's time is its.
            self.add_on(Track::Task(i), user, key, ns, Some(delta), namer);
        }
    }

    /// Adds a sample on `track`, with `delta` or the time since the track's last sample;
    /// returns that delta, `None` when `--focus`/`--exclude` drop the sample.
    fn add_on(
        &mut self,
        track: Track,
        user: bool,
        key: &[u64],
        ns: u64,
        delta: Option<CpuDelta>,
        namer: &mut StackNamer<'_>,
    ) -> Option<CpuDelta> {
        let t = self.threads.get(&track)?;
        let interned = match t.stacks.get(key) {
            Some(h) => *h,
            None => self.intern(track, user, key, namer),
        };
        let Interned::Kept(stack, entries) = interned else {
            return None;
        };
        let t = self.threads.get_mut(&track)?;
        t.entry_runs(entries, ns);
        let delta = delta.unwrap_or_else(|| {
            t.last_ns.map_or(CpuDelta::ZERO, |l| {
                CpuDelta::from_nanos(ns.saturating_sub(l))
            })
        });
        t.last_ns = Some(ns);
        t.first_ns.get_or_insert(ns);
        t.samples += 1;
        let at = Timestamp::from_nanos_since_reference(ns);
        self.profile
            .add_sample(t.handle, at, stack, delta, self.weight);
        Some(delta)
    }

    /// Interns `key` on `track`'s thread, named once for all threads ([`Builder::named`]).
    fn intern(
        &mut self,
        track: Track,
        user: bool,
        key: &[u64],
        namer: &mut StackNamer<'_>,
    ) -> Interned {
        let h = match self.named(user, key, namer) {
            None => Interned::Dropped,
            Some((infos, entries)) => {
                let handle = self.threads[&track].handle;
                let stack = self
                    .profile
                    .intern_stack_frames(handle, infos.iter().cloned());
                Interned::Kept(stack, entries)
            }
        };
        if let Some(t) = self.threads.get_mut(&track) {
            t.stacks.insert(key.into(), h);
        }
        h
    }

    /// The frames of `key` (`None`: dropped by `--focus`/`--exclude`), named on first use.
    /// User frames (of a user-mode sample, or the user part of a system call's stack sampled
    /// in the kernel) go in the User category.
    fn named(&mut self, user: bool, key: &[u64], namer: &mut StackNamer<'_>) -> Named {
        if let Some(n) = self.named.get(key) {
            return n.clone();
        }
        let n = self.name(user, key, namer);
        self.named.insert(key.into(), n.clone());
        n
    }

    fn name(&mut self, user: bool, key: &[u64], namer: &mut StackNamer<'_>) -> Named {
        let user_part = namer.name_key_shaped(key, &self.rules, &mut self.names)?;
        let entries = ENTRIES.iter().enumerate().fold(0u8, |bits, (k, e)| {
            if self.names.iter().any(|n| &**n == *e) {
                bits | 1 << k
            } else {
                bits
            }
        });
        let mut infos = Vec::with_capacity(self.names.len());
        for (i, n) in self.names.iter().enumerate() {
            let category = if &**n == UNKNOWN_FRAME {
                CategoryHandle::OTHER
            } else if user || user_part.contains(&i) {
                self.user_cat
            } else {
                self.kernel_cat
            };
            infos.push(FrameInfo {
                frame: Frame::Label(self.profile.intern_string(n)),
                category_pair: category.into(),
                flags: FrameFlags::empty(),
            });
        }
        Some((infos.into(), entries))
    }

    /// `period` sampling declares no interval: declare the mean host-time spacing of samples
    /// (of the vCPUs': a task's spacing has the time it did not run in it).
    fn declare_interval(&mut self) {
        let (span, gaps) = self
            .threads
            .iter()
            .filter(|(k, _)| matches!(k, Track::Vcpu(_)))
            .map(|(_, t)| t)
            .fold((0u64, 0u64), |(s, g), t| match (t.first_ns, t.last_ns) {
                (Some(a), Some(b)) if t.samples > 1 => (
                    s.saturating_add(b.saturating_sub(a)),
                    g.saturating_add(t.samples - 1),
                ),
                _ => (s, g),
            });
        if gaps > 0 && span > 0 {
            self.interval_ns = (span / gaps).max(1);
            self.profile
                .set_interval(SamplingInterval::from_nanos(self.interval_ns));
        }
    }

    /// The kernel entries' runs as interval markers. A run ends at the next sample, or one
    /// sampling interval after its last when the next came later than two (a halted vCPU).
    fn add_entry_markers(&mut self, interval_ns: u64) {
        let names = ENTRIES.map(|e| self.profile.intern_string(e));
        let mut tracks: Vec<Track> = self.threads.keys().copied().collect();
        tracks.sort_unstable();
        for v in tracks {
            let t = self.threads.get_mut(&v).expect("listed");
            let open = std::mem::take(&mut t.open);
            let mut runs = std::mem::take(&mut t.runs);
            runs.extend(
                open.iter()
                    .enumerate()
                    .filter_map(|(k, r)| Some((k, (*r)?))),
            );
            runs.sort_by_key(|&(k, r)| (r.start, k));
            let handle = t.handle;
            for (k, r) in runs {
                let late = r.last.saturating_add(interval_ns);
                let end = match r.next {
                    Some(n) if n <= r.last.saturating_add(interval_ns.saturating_mul(2)) => n,
                    _ => late,
                };
                let timing = MarkerTiming::Interval(
                    Timestamp::from_nanos_since_reference(r.start),
                    Timestamp::from_nanos_since_reference(end),
                );
                let marker = EntryMarker {
                    name: names[k],
                    category: self.kernel_cat,
                    samples: r.samples,
                };
                self.profile.add_marker(handle, timing, marker);
            }
        }
    }

    fn finish(mut self, out: impl Write) -> Result<(), ProfileError> {
        if !self.declared {
            self.declare_interval();
        }
        self.add_entry_markers(self.interval_ns.max(1));
        write_shared(&self.profile, out)
    }
}
