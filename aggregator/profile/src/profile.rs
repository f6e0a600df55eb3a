//! A CPU profile collected from one sample file: interned address stacks with their counts,
//! plus what the file said about its run (header, statistics, host timer, truncation).

use std::path::PathBuf;
use std::rc::Rc;

use kern_profile_format::{CpuFormat, CpuMode, Header};
use rustc_hash::FxHashMap;

use crate::address_space::AddressSpaces;
use crate::boundary::is_marker;
use crate::counts::{IdRuns, StackCounts};
use crate::error::ProfileError;
use crate::filter::SampleFilter;
use crate::input::{CpuInput, ReadSummary, Sample};
use crate::key_memo::KeyMemo;
use crate::place::{Place, StopsByPlace};
use crate::run_groups::WordUse;
use crate::stacks::{meta_unhidden, meta_user, meta_vcpu, KeyBuilder};
use crate::stuck::{Stuck, StuckDetector};
use crate::symbolize::Symbolizer;
use crate::vcpu_counts::VcpuCounts;
use crate::walk_tally::WalkTally;
use crate::warning::Warning;

/// What a pass feeds besides the counts: each kept sample with its interning key (see
/// [`KeyBuilder`]), in file order; `seq` is its index among all the file's samples.
pub trait SampleSink {
    fn sample(&mut self, s: &Sample<'_>, key: &[u64], seq: u64);
}

/// Where a sample was taken, as its recorded stack tells (so once per distinct one).
#[derive(Debug, Clone, Copy)]
struct Where {
    /// For the unwind stops by place.
    place: Place,
    /// The PC is no kernel code ([`WalkTally::add`]).
    outside: bool,
}

impl Where {
    fn of(s: &Sample<'_>, sym: &Symbolizer, markers: bool) -> Where {
        let crossed = markers && s.addrs.iter().skip(1).copied().any(is_marker);
        // Where the recording says the CPU's mode (version 2): a recorder that did not is
        // counted as it was.
        let outside = s.addrs.first().is_some_and(|&pc| match s.cpu.mode {
            CpuMode::Paging | CpuMode::Long => sym.below_kernel(pc),
            CpuMode::PagingOff => !sym.kernel_holds(pc),
            _ => false,
        });
        Where {
            place: Place::of(s.user, s.cpu, crossed),
            outside,
        }
    }
}

/// Samples of one file, interned by address stack.
#[derive(Debug)]
pub struct CpuProfile {
    pub path: PathBuf,
    pub format: CpuFormat,
    pub header: Option<Header>,
    /// The raw format's version (0 for legacy files).
    pub version: u16,
    pub summary: ReadSummary,
    pub counts: StackCounts,
    /// Samples kept by the filters.
    pub kept: u64,
    /// Kept samples per vCPU, sorted by vCPU.
    pub per_vcpu: Vec<(u32, u64)>,
    /// Kept user-mode samples per vCPU, sorted by vCPU (vCPUs with none left out).
    pub per_vcpu_user: Vec<(u32, u64)>,
    /// vCPUs that never left one stack.
    pub stuck: Vec<Stuck>,
    /// Which user program ran in which address space (from the recorded code bytes).
    pub spaces: AddressSpaces,
    /// Kept kernel stacks the aggregator cut at a return address that is no code.
    pub no_code_cuts: u64,
    /// The unwind stops of the kept samples (raw format), by where each was taken. Counted
    /// as samples are read: `--focus`/`--exclude`, which keep stacks by name, are not
    /// applied to them.
    pub stops_by_place: StopsByPlace,
    /// How the kept samples were walked, kernel, user and boot apart (raw format).
    pub walk_tally: WalkTally,
}

impl CpuProfile {
    /// Reads all of `input`, keeping the samples `filter` keeps (and the exact counts with
    /// `want_exact`).
    pub fn collect(
        input: CpuInput,
        sym: &mut Symbolizer,
        filter: &SampleFilter,
        want_exact: bool,
    ) -> Result<Self, ProfileError> {
        Self::collect_into(input, sym, filter, want_exact, &mut [])
    }

    /// [`CpuProfile::collect`], feeding every kept sample to `sinks` on the way: one pass
    /// for the counts and for the outputs that need each sample (e.g. at its time).
    pub fn collect_into(
        input: CpuInput,
        sym: &mut Symbolizer,
        filter: &SampleFilter,
        want_exact: bool,
        sinks: &mut [&mut dyn SampleSink],
    ) -> Result<Self, ProfileError> {
        let (path, format, header) = (input.path.clone(), input.format, input.header.clone());
        let version = input.version;
        let markers = header.as_ref().is_some_and(|h| h.markers);
        let keys = KeyBuilder::new(filter).with_markers(markers);
        // Keys by recorded stack, with what a sample's stack says of where it was taken.
        let mut memo: KeyMemo<Where> = KeyMemo::default();
        // Kept samples per vCPU, and those in user mode.
        let mut per_vcpu = VcpuCounts::default();
        let mut per_vcpu_user = VcpuCounts::default();
        let mut kept = 0u64;
        let mut runs = IdRuns::default();
        let mut stuck = StuckDetector::default();
        let cuts_before = sym.no_code_cuts();
        let mut stops_by_place = StopsByPlace::default();
        let mut walk_tally = WalkTally::default();
        let mut seq = 0u64;
        // Counts alone can be taken per distinct stack of a run; sinks and a time window
        // want every sample at its time.
        let words = WordUse::default();
        let by_stack = (sinks.is_empty() && !filter.time.is_set()).then_some(&words);
        let summary = input.for_each(want_exact, by_stack, |s| {
            let index = seq;
            let n = s.weight;
            seq += n;
            if !keys.keeps(s) {
                return;
            }
            let found = memo.key_of(s, &keys, sym, |s, sym| Where::of(s, sym, markers));
            if let (Some(id), Some(_), true) = (s.stack, s.sp_word, by_stack.is_some()) {
                words.set(id, KeyBuilder::word_may_matter(s, sym));
            }
            for sink in sinks.iter_mut() {
                sink.sample(s, found.key, index);
            }
            runs.add_n(s.vcpu, found.id, n);
            stuck.add_chain_n(s.vcpu, found.key, found.chain, n);
            kept += n;
            if let Some(stop) = s.stop {
                stops_by_place.add(found.extra.place, stop, n);
            }
            walk_tally.add(s, found.extra.outside);
            per_vcpu.add(s.vcpu, n);
            if s.user {
                per_vcpu_user.add(s.vcpu, n);
            }
        })?;
        let no_code_cuts = sym.no_code_cuts() - cuts_before;
        let counts = runs.into_counts(|id| memo.key(id));
        let per_vcpu = per_vcpu.into_sorted();
        let per_vcpu_user = per_vcpu_user.into_sorted();
        let spaces = AddressSpaces::decide(&summary.code, header.as_ref().map(|h| h.arch), sym);
        Ok(CpuProfile {
            path,
            format,
            header,
            version,
            summary,
            counts,
            kept,
            per_vcpu,
            per_vcpu_user,
            stuck: stuck.stuck(),
            spaces,
            no_code_cuts,
            stops_by_place,
            walk_tally,
        })
    }

    /// Keeps the distinct stacks `keep` accepts (given each key and a buffer for names), and
    /// recounts the kept samples from them. Keys carry their vCPU here (a hidden tag when
    /// not `--per-cpu`, see [`KeyBuilder`]), which the recount needs and then drops.
    pub fn retain_stacks(&mut self, mut keep: impl FnMut(&[u64], &mut Vec<Rc<str>>) -> bool) {
        let mut counts = StackCounts::default();
        let mut frames = Vec::new();
        let mut per_vcpu: FxHashMap<u32, u64> = FxHashMap::default();
        let mut per_vcpu_user: FxHashMap<u32, u64> = FxHashMap::default();
        let mut kept = 0u64;
        let mut key_out = Vec::new();
        self.counts.for_each(|key, n| {
            if !keep(key, &mut frames) {
                return;
            }
            kept += n;
            let meta = key.first().copied().unwrap_or(0);
            if let Some(v) = meta_vcpu(meta) {
                *per_vcpu.entry(v).or_insert(0) += n;
                if meta_user(meta) {
                    *per_vcpu_user.entry(v).or_insert(0) += n;
                }
            }
            key_out.clear();
            key_out.extend_from_slice(key);
            if let Some(m) = key_out.first_mut() {
                *m = meta_unhidden(*m);
            }
            counts.add(&key_out, n);
        });
        counts.flush();
        let sorted = |m: FxHashMap<u32, u64>| {
            let mut v: Vec<(u32, u64)> = m.into_iter().collect();
            v.sort_unstable();
            v
        };
        self.counts = counts;
        self.kept = kept;
        self.per_vcpu = sorted(per_vcpu);
        self.per_vcpu_user = sorted(per_vcpu_user);
    }

    /// Kept user-mode samples: on vCPU `cpu`, or on all of them.
    pub fn user_kept(&self, cpu: Option<u32>) -> u64 {
        self.per_vcpu_user
            .iter()
            .filter(|(c, _)| cpu.is_none_or(|x| x == *c))
            .map(|(_, n)| n)
            .sum()
    }

    /// Problems worth telling the user: a cut file, dropped samples, unknown records.
    pub fn warnings(&self) -> Vec<Warning> {
        Warning::of_input(&self.path, self.format, &self.summary)
    }
}
