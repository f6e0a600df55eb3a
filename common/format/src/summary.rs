//! What a raw file holds besides its stacks, counted record by record: the one tally that
//! kp-dump, the aggregator and the tests share.

use std::collections::BTreeMap;
use std::io::Read;

use crate::alloc_record::AllocHookStats;
use crate::error::FormatError;
use crate::raw_reader::{RawReader, Record, SampleRef};
use crate::source::Truncation;
use crate::stats::Stats;
use crate::stop_reason::StopCounts;
use crate::timer_record::HostTimerStats;

/// vCPU indexes below this are counted in a plain array; higher ones (only in a damaged or
/// hand-made file: QEMU has at most 4096 vCPUs) in a map.
const DENSE_VCPUS: usize = 4096;

/// Samples per vCPU index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VcpuCounts {
    dense: Vec<u64>,
    sparse: BTreeMap<u32, u64>,
}

impl VcpuCounts {
    #[inline]
    pub fn add(&mut self, vcpu: u32) {
        self.add_n(vcpu, 1);
    }

    /// Counts `n` samples of `vcpu`.
    #[inline]
    pub fn add_n(&mut self, vcpu: u32, n: u64) {
        let i = vcpu as usize;
        if i < DENSE_VCPUS {
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            self.dense[i] += n;
        } else {
            *self.sparse.entry(vcpu).or_insert(0) += n;
        }
    }

    /// Samples of vCPU `vcpu`.
    pub fn get(&self, vcpu: u32) -> u64 {
        match self.dense.get(vcpu as usize) {
            Some(&n) => n,
            None => self.sparse.get(&vcpu).copied().unwrap_or(0),
        }
    }

    /// `(vCPU, samples)` of every vCPU with samples, by index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let dense = self.dense.iter().enumerate().map(|(i, &n)| (i as u32, n));
        dense
            .chain(self.sparse.iter().map(|(&v, &n)| (v, n)))
            .filter(|&(_, n)| n > 0)
    }

    /// The highest vCPU index with a sample.
    pub fn max(&self) -> Option<u32> {
        self.iter().last().map(|(v, _)| v)
    }
}

/// Counts of a raw file's records. Feed it every record ([`RawSummary::add`]) or let it read
/// a whole file ([`RawSummary::read`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawSummary {
    pub samples: u64,
    /// Samples taken in user mode.
    pub user_samples: u64,
    /// Samples whose word at `[SP]` was read.
    pub sp_words: u64,
    /// Samples in which the recorder resolved a frameless entry itself.
    pub entry_resolved: u64,
    /// Unwind stops counted from the samples in the file.
    pub stops: StopCounts,
    pub per_vcpu: VcpuCounts,
    /// Exact-count records, the blocks they hold, and the instructions those blocks executed.
    pub exact_records: u64,
    pub exact_blocks: u64,
    pub exact_instructions: u64,
    /// Code-bytes records (user code at sampled addresses, per address space).
    pub code_bytes: u64,
    /// Task records (a vCPU's task changed), and those of a task that could not be read.
    pub task_records: u64,
    pub unknown_tasks: u64,
    /// Task switches (`switches=`).
    pub switches: u64,
    /// Records of kinds this version does not know (skipped).
    pub unknown_records: u64,
    /// Version 3: allocation events (hooked allocator calls), and the hooks' counts at exit.
    pub alloc_events: u64,
    pub alloc_stats: Option<AllocHookStats>,
    /// The statistics record, when the run ended cleanly.
    pub stats: Option<Stats>,
    /// The host-timer record (`delay=`), when the run ended cleanly.
    pub host_timer: Option<HostTimerStats>,
    /// Where the file was cut, when it was.
    pub truncation: Option<Truncation>,
}

impl RawSummary {
    /// Reads the rest of `reader`'s records.
    pub fn read<R: Read>(reader: &mut RawReader<R>) -> Result<RawSummary, FormatError> {
        let mut sum = RawSummary::default();
        while let Some(rec) = reader.next_record()? {
            sum.add(&rec);
        }
        sum.truncation = reader.truncation();
        Ok(sum)
    }

    /// Counts one record.
    pub fn add(&mut self, rec: &Record<'_>) {
        match rec {
            Record::Sample(s) => self.add_sample(s),
            Record::ExactBlocks(b) => {
                self.exact_records += 1;
                for blk in b.iter() {
                    self.exact_blocks += 1;
                    let insns = blk.instructions().len() as u64;
                    self.exact_instructions = self
                        .exact_instructions
                        .saturating_add(blk.executions.saturating_mul(insns));
                }
            }
            Record::Stats(s) => self.stats = Some(s.clone()),
            Record::HostTimer(t) => self.host_timer = Some(t.clone()),
            Record::CodeBytes(_) => self.code_bytes += 1,
            Record::Task(t) => {
                self.task_records += 1;
                self.unknown_tasks += t.task.is_err() as u64;
            }
            Record::Switch(_) => self.switches += 1,
            Record::AllocTable(_) => {}
            Record::AllocEvent(_) => self.alloc_events += 1,
            Record::AllocStats(s) => self.alloc_stats = Some(*s),
            Record::Unknown { .. } => self.unknown_records += 1,
        }
    }

    #[inline]
    pub fn add_sample(&mut self, s: &SampleRef<'_>) {
        self.add_samples(s, 1);
    }

    /// Counts `n` samples like `s` (a reader counting a run's samples by stack).
    #[inline]
    pub fn add_samples(&mut self, s: &SampleRef<'_>, n: u64) {
        self.samples += n;
        self.user_samples += s.user() as u64 * n;
        self.sp_words += s.sp_word().is_some() as u64 * n;
        self.entry_resolved += s.entry_resolved() as u64 * n;
        self.stops.add_n(s.stop, n);
        self.per_vcpu.add_n(s.vcpu, n);
    }

    /// The run's unwind stops and where they come from: the statistics record's (which also
    /// counts samples the writer dropped) when there is one, else those counted here.
    pub fn run_stops(&self) -> (&StopCounts, StopsFrom) {
        match &self.stats {
            Some(st) => (&st.stops, StopsFrom::Statistics),
            None => (&self.stops, StopsFrom::Samples),
        }
    }
}

/// Where [`RawSummary::run_stops`] took its counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopsFrom {
    Statistics,
    Samples,
}
