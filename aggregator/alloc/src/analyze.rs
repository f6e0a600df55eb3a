//! One streaming pass over a memtrace file, dispatching each record to its allocator.

use std::collections::HashMap;
use std::io::Read;

use kern_profile_format::memtrace::{MemtraceReader, Op, Skip, MAX_FRAMES};
use kern_profile_format::Truncation;
use rustc_hash::FxHashMap;

use crate::error::AllocError;
use crate::stats::AllocatorStats;
use crate::tracker::Tracker;
use crate::view::{Options, View};

/// What one allocator did over the trace.
#[derive(Debug, Clone)]
pub struct AllocatorProfile {
    /// The allocator's name as recorded (invalid UTF-8 replaced).
    pub name: String,
    pub stats: AllocatorStats,
    /// Weight of each allocating stack (return addresses, innermost first, exactly as
    /// recorded) in the view asked for ([`Analysis::view`]); stacks of weight 0 are left out.
    pub stacks: HashMap<Vec<u64>, u64>,
    /// Units live at the end of the trace by stack, whatever the view (for the report).
    pub live_stacks: HashMap<Vec<u64>, u64>,
    /// (operation index, live units after it), downsampled to about
    /// [`Options::timeline_points`] points; the peak is always one of them.
    pub timeline: Vec<(u64, u64)>,
}

/// The analysis of a whole trace.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// One per allocator name found, sorted by name.
    pub allocators: Vec<AllocatorProfile>,
    /// The trace ended inside a record; every record before it was used.
    pub truncation: Option<Truncation>,
    /// Regions skipped in lenient mode to get past records with a bad op byte.
    pub skips: Vec<Skip>,
    /// Complete records (memtrace) or allocation events (raw files) used.
    pub records: u64,
    /// The view `stacks` weighs.
    pub view: View,
    /// What the analysis was read from, which says what a stack's first address is.
    pub source: Source,
}

/// What an [`Analysis`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A Maestro memtrace: every stack address is a return address (look it up at
    /// `addr - 1`), the first one inside the allocator function.
    Memtrace,
    /// The allocation events of a kern-profile raw file (`alloc=`): a stack's first address
    /// is the hooked function's entry (look it up as is), then return addresses.
    Hooks,
}

impl Source {
    /// Whether a stack's first address is a function's entry rather than a return address.
    pub fn first_is_entry(self) -> bool {
        self == Source::Hooks
    }
}

/// Reads a whole memtrace trace in one pass and analyses it per allocator.
///
/// Memory is bounded by the live blocks and distinct stacks (plus a bounded set of freed
/// pointers and the downsampled timeline), not by the trace's length. Strict mode
/// (`opts.lenient == false`) fails on a record with a bad op byte, naming its byte offset; a
/// torn last record is never an error (see [`Analysis::truncation`]).
pub fn analyze<R: Read>(input: R, opts: &Options) -> Result<Analysis, AllocError> {
    let mut reader = MemtraceReader::new(input, opts.lenient);
    let mut set = TrackerSet::new(opts);
    let mut frames: Vec<u64> = Vec::with_capacity(MAX_FRAMES);
    let mut records = 0u64;

    while let Some(rec) = reader.next_record()? {
        records += 1;
        frames.clear();
        if rec.op != Op::Free {
            frames.extend(rec.frames());
        }
        set.get(rec.allocator)
            .apply(rec.op, rec.ptr, rec.size, &frames, rec.offset);
    }

    Ok(Analysis {
        allocators: set.finish(opts.view),
        truncation: reader.truncation(),
        skips: reader.skips().to_vec(),
        records,
        view: opts.view,
        source: Source::Memtrace,
    })
}

/// One [`Tracker`] per allocator name, in order of first appearance.
pub(crate) struct TrackerSet {
    trackers: Vec<(Vec<u8>, Tracker)>,
    by_name: FxHashMap<Vec<u8>, usize>,
    last: usize,
    timeline_points: usize,
}

impl TrackerSet {
    pub fn new(opts: &Options) -> Self {
        TrackerSet {
            trackers: Vec::new(),
            by_name: FxHashMap::default(),
            last: 0,
            timeline_points: opts.timeline_points,
        }
    }

    /// The tracker of allocator `name`, made on first use.
    pub fn get(&mut self, name: &[u8]) -> &mut Tracker {
        // Traces interleave few allocators, usually in runs: check the last one first.
        let i = match self.trackers.get(self.last) {
            Some((n, _)) if n.as_slice() == name => self.last,
            _ => match self.by_name.get(name) {
                Some(&i) => i,
                None => {
                    let t = Tracker::new(self.timeline_points);
                    self.trackers.push((name.to_vec(), t));
                    self.by_name.insert(name.to_vec(), self.trackers.len() - 1);
                    self.trackers.len() - 1
                }
            },
        };
        self.last = i;
        &mut self.trackers[i].1
    }

    /// The profiles, sorted by name.
    pub fn finish(self, view: View) -> Vec<AllocatorProfile> {
        let mut allocators: Vec<(Vec<u8>, AllocatorProfile)> = self
            .trackers
            .into_iter()
            .map(|(raw, mut t)| {
                t.finish_stats();
                let timeline = t.timeline.points();
                let (stacks, live_stacks) = t.stacks.into_maps(view);
                let profile = AllocatorProfile {
                    name: String::from_utf8_lossy(&raw).into_owned(),
                    stats: t.stats,
                    stacks,
                    live_stacks,
                    timeline,
                };
                (raw, profile)
            })
            .collect();
        allocators.sort_by(|a, b| a.1.name.cmp(&b.1.name).then_with(|| a.0.cmp(&b.0)));
        allocators.into_iter().map(|(_, p)| p).collect()
    }
}
