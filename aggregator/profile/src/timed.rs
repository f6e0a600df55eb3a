//! The kept samples of a pass in file order, for the outputs that place each sample at its
//! time: a sink of the one pass the other outputs share.

use rustc_hash::FxHashMap;

use crate::input::Sample;
use crate::profile::SampleSink;
use crate::tasks::TaskId;

/// The kept samples of a pass, for the outputs over time (Firefox, trace events): each
/// one's vCPU, mode, time, distinct interning key and task, in file order.
#[derive(Debug, Default)]
pub struct TimedSamples {
    ids: FxHashMap<Box<[u64]>, u32>,
    keys: Vec<Box<[u64]>>,
    samples: Vec<KeptSample>,
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

impl SampleSink for TimedSamples {
    fn sample(&mut self, s: &Sample<'_>, key: &[u64], seq: u64) {
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
    }
}

impl TimedSamples {
    /// Each kept sample: vCPU, user mode, interning key, time (ns), in file order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, bool, &[u64], u64)> + '_ {
        self.samples
            .iter()
            .map(|s| (s.vcpu, s.user, &*self.keys[s.key as usize], s.ns))
    }

    /// Each kept sample's task id (`None`: no task), in the order of [`TimedSamples::iter`].
    pub fn tasks(&self) -> impl Iterator<Item = Option<TaskId>> + '_ {
        self.samples.iter().map(|s| s.task)
    }
}
