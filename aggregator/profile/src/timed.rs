//! The kept samples of a pass in file order, for the outputs that place each sample at its
//! time: a sink of the one pass the other outputs share.
//!
//! They are held in memory (a row per sample) and written out one by one, so an hour of a
//! many-vCPU guest would take gigabytes of both, and a Firefox profile that no browser opens.
//! A [`TimelineCap`] bounds them: past it, every other kept sample of each vCPU is let go and
//! from then on one in twice as many is kept, again as often as needed. What stays is each
//! vCPU's every Nth sample (N a power of two, the [`TimedSamples::stride`]), as a sampler N
//! times slower would have taken, each standing for N.

use rustc_hash::FxHashMap;

use crate::input::Sample;
use crate::profile::SampleSink;
use crate::tasks::TaskId;
use crate::vcpu_counts::VcpuCounts;
use crate::warning::Warning;

/// How many samples the outputs over time hold at most (`--timeline-samples`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimelineCap {
    /// Every kept sample, however many.
    All,
    /// At most this many (at least 1): past it, each vCPU's every Nth sample.
    AtMost(u64),
}

impl TimelineCap {
    /// The default: 1 M samples, about 5 minutes of a two-vCPU Linux guest at `record`'s
    /// defaults; a Firefox profile of about 15 MB, drawn in about 250 MB.
    pub const DEFAULT: TimelineCap = TimelineCap::AtMost(1_000_000);

    /// `--timeline-samples N`: 0 is [`TimelineCap::All`].
    pub fn from_count(n: u64) -> Self {
        match n {
            0 => TimelineCap::All,
            n => TimelineCap::AtMost(n),
        }
    }

    /// The cap that serves both of two outputs: the larger.
    pub fn or(self, other: TimelineCap) -> TimelineCap {
        match (self, other) {
            (TimelineCap::AtMost(a), TimelineCap::AtMost(b)) => TimelineCap::AtMost(a.max(b)),
            _ => TimelineCap::All,
        }
    }
}

impl Default for TimelineCap {
    fn default() -> Self {
        TimelineCap::DEFAULT
    }
}

/// The kept samples of a pass, for the outputs over time (Firefox, trace events): each
/// one's vCPU, mode, time, distinct interning key and task, in file order.
#[derive(Debug)]
pub struct TimedSamples {
    ids: FxHashMap<Box<[u64]>, u32>,
    keys: Vec<Box<[u64]>>,
    samples: Vec<KeptSample>,
    cap: TimelineCap,
    /// One sample in `stride` of each vCPU's is held.
    stride: u64,
    /// Samples offered per vCPU, held or not.
    offered: VcpuCounts,
}

#[derive(Debug, Clone, Copy)]
struct KeptSample {
    vcpu: u32,
    user: bool,
    key: u32,
    ns: u64,
    /// Its task's id in the recording's [`crate::tasks::Tasks`] (`None`: no task).
    task: Option<TaskId>,
}

impl Default for TimedSamples {
    fn default() -> Self {
        TimedSamples::new(TimelineCap::All)
    }
}

impl SampleSink for TimedSamples {
    fn sample(&mut self, s: &Sample<'_>, key: &[u64], seq: u64) {
        let offered = self.offered.slot(s.vcpu);
        let n = *offered;
        *offered += 1;
        if !n.is_multiple_of(self.stride) {
            return;
        }
        let id = match self.ids.get(key) {
            Some(&id) => id,
            None => {
                let id = self.keys.len() as u32;
                self.keys.push(key.into());
                self.ids.insert(key.into(), id);
                id
            }
        };
        self.samples.push(KeptSample {
            vcpu: s.vcpu,
            user: s.user,
            key: id,
            // Legacy samples have no time: 1 ms apart, in file order.
            ns: s.time_ns.unwrap_or(seq.saturating_mul(1_000_000)),
            task: s.task.map(|t| t.id),
        });
        if let TimelineCap::AtMost(max) = self.cap {
            if self.samples.len() as u64 > max.max(1) {
                self.halve();
            }
        }
    }
}

impl TimedSamples {
    /// Holds at most what `cap` says.
    pub fn new(cap: TimelineCap) -> Self {
        TimedSamples {
            ids: FxHashMap::default(),
            keys: Vec::new(),
            samples: Vec::new(),
            cap,
            stride: 1,
            offered: VcpuCounts::default(),
        }
    }

    /// Lets every other held sample of each vCPU go: those held were each vCPU's samples
    /// 0, s, 2s, ...; those left are 0, 2s, 4s, ..., what the doubled stride keeps next.
    fn halve(&mut self) {
        let mut odd: FxHashMap<u32, bool> = FxHashMap::default();
        self.samples.retain(|s| {
            let o = odd.entry(s.vcpu).or_insert(false);
            let keep = !*o;
            *o = !*o;
            keep
        });
        self.stride = self.stride.saturating_mul(2);
    }

    /// Each held sample: vCPU, user mode, interning key, time (ns), in file order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, bool, &[u64], u64)> + '_ {
        self.samples
            .iter()
            .map(|s| (s.vcpu, s.user, &*self.keys[s.key as usize], s.ns))
    }

    /// Each held sample's task id (`None`: no task), in the order of [`TimedSamples::iter`].
    pub fn tasks(&self) -> impl Iterator<Item = Option<TaskId>> + '_ {
        self.samples.iter().map(|s| s.task)
    }

    /// One in how many of each vCPU's kept samples is held (1: all; a power of two), which
    /// is also what each held one stands for.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// The kept samples offered, held or not.
    pub fn total(&self) -> u64 {
        self.offered.total()
    }

    /// The samples held.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The warning of `output` drawn from these when they hold fewer than were kept.
    pub fn thinned(&self, output: &'static str) -> Option<Warning> {
        match (self.stride, self.cap) {
            (1, _) | (_, TimelineCap::All) => None,
            (stride, TimelineCap::AtMost(cap)) => Some(Warning::TimelineThinned {
                output,
                held: self.samples.len() as u64,
                total: self.total(),
                stride,
                cap,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(t: &mut TimedSamples, vcpu: u32, ns: u64) {
        let s = Sample {
            time_ns: Some(ns),
            ..Sample::of_addresses(vcpu, &[])
        };
        t.sample(&s, &[vcpu as u64, ns % 3], ns);
    }

    #[test]
    fn uncapped_holds_every_sample() {
        let mut t = TimedSamples::new(TimelineCap::All);
        for i in 0..10_000 {
            offer(&mut t, (i % 3) as u32, i);
        }
        assert_eq!((t.len(), t.stride(), t.total()), (10_000, 1, 10_000));
    }

    #[test]
    fn a_cap_keeps_each_vcpus_every_nth_sample() {
        let mut t = TimedSamples::new(TimelineCap::AtMost(1000));
        // Two vCPUs in batches of 64, as the plugin writes them: a stride that followed the
        // file's order instead of each vCPU's would keep one vCPU's batches only.
        let mut ns = [0u64; 2];
        for batch in 0..200 {
            let v = batch % 2;
            for _ in 0..64 {
                offer(&mut t, v as u32, ns[v]);
                ns[v] += 1;
            }
        }
        assert_eq!(t.total(), 12_800);
        assert!(t.len() <= 1000, "{} held", t.len());
        assert_eq!(t.stride(), 16);
        for v in 0..2u32 {
            let times: Vec<u64> = t.iter().filter(|s| s.0 == v).map(|s| s.3).collect();
            assert_eq!(times.len(), 6400 / 16, "vCPU {v}");
            assert!(
                times.iter().enumerate().all(|(i, &n)| n == 16 * i as u64),
                "vCPU {v}: {times:?}"
            );
        }
    }

    #[test]
    fn caps_combine_to_the_larger() {
        use TimelineCap::*;
        assert_eq!(AtMost(5).or(AtMost(9)), AtMost(9));
        assert_eq!(AtMost(5).or(All), All);
        assert_eq!(TimelineCap::from_count(0), All);
    }
}
