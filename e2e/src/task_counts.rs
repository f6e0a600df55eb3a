//! Exact instructions per guest process, from a recording's own task-switch records (kind 10,
//! `switches=` with `period=`): between two switches of a vCPU, the instructions it ran are
//! the task's that the first switch named next (the task record written right after it). The
//! harness's own count, independent of the samples, that sampled shares are checked against.

use std::collections::HashMap;
use std::path::Path;

use kern_profile_format::{RawReader, Record};

/// Exact instructions by process id (with `period=`), how many switches there were, and how
/// many of those left a task other than the one their vCPU's previous switch ran next.
#[derive(Debug, Default)]
pub struct ExactByProcess {
    pub instructions: HashMap<u32, u64>,
    pub switches: u64,
    pub mismatched: u64,
}

impl ExactByProcess {
    /// The share, in percent, of `pid` among `pids`.
    pub fn share(&self, pid: u32, pids: &[u32]) -> f64 {
        let of = |p: &u32| self.instructions.get(p).copied().unwrap_or(0) as f64;
        let total: f64 = pids.iter().map(of).sum();
        100.0 * of(&pid) / total.max(1.0)
    }
}

/// Reads `raw`'s switches; panics on a corrupt record (the plugin wrote it).
pub fn exact_by_process(raw: &Path) -> ExactByProcess {
    let file = std::fs::File::open(raw).unwrap_or_else(|e| panic!("{}: {e}", raw.display()));
    let mut r = RawReader::open(file).expect("a raw header");
    let mut out = ExactByProcess::default();
    // Per vCPU: the count at its last switch, and the process that switch named next.
    let mut since: HashMap<u32, (u64, Option<u32>)> = HashMap::new();
    let mut next_of: HashMap<u32, u64> = HashMap::new();
    let mut awaiting: HashMap<u32, u64> = HashMap::new();
    while let Some(rec) = r.next_record().expect("no corrupt record") {
        match rec {
            Record::Switch(s) => {
                out.switches += 1;
                if next_of
                    .insert(s.vcpu, s.next)
                    .is_some_and(|next| next != s.prev)
                {
                    out.mismatched += 1;
                }
                // Without `period=` a switch has no count: switches, no instructions.
                let Some(icount) = s.icount else { continue };
                if let Some((from, Some(pid))) = since.get(&s.vcpu) {
                    *out.instructions.entry(*pid).or_default() += icount.saturating_sub(*from);
                }
                since.insert(s.vcpu, (icount, None));
                awaiting.insert(s.vcpu, icount);
            }
            Record::Task(t) => {
                if let Some(icount) = awaiting.remove(&t.vcpu) {
                    since.insert(t.vcpu, (icount, t.task.ok().map(|t| t.pid)));
                }
            }
            _ => {}
        }
    }
    out
}
