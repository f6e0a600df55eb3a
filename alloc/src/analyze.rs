//! One streaming pass over a memtrace file, dispatching each record to its allocator.

use std::collections::HashMap;
use std::io::Read;

use kern_profile_format::memtrace::{MemtraceReader, Op, Skip, MAX_FRAMES};
use kern_profile_format::Truncation;

use crate::error::AllocError;
use crate::hash::FxHashMap;
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
    /// Complete records used.
    pub records: u64,
    /// The view `stacks` weighs.
    pub view: View,
}

/// Reads a whole memtrace trace in one pass and analyses it per allocator.
///
/// Memory is bounded by the live blocks and distinct stacks (plus a bounded set of freed
/// pointers and the downsampled timeline), not by the trace's length. Strict mode
/// (`opts.lenient == false`) fails on a record with a bad op byte, naming its byte offset; a
/// torn last record is never an error (see [`Analysis::truncation`]).
pub fn analyze<R: Read>(input: R, opts: &Options) -> Result<Analysis, AllocError> {
    let mut reader = MemtraceReader::new(input, opts.lenient);
    let mut trackers: Vec<(Vec<u8>, Tracker)> = Vec::new();
    let mut by_name: FxHashMap<Vec<u8>, usize> = FxHashMap::default();
    let mut last = 0usize;
    let mut frames: Vec<u64> = Vec::with_capacity(MAX_FRAMES);
    let mut records = 0u64;

    while let Some(rec) = reader.next_record()? {
        records += 1;
        // Traces interleave few allocators, usually in runs: check the last one first.
        let i = match trackers.get(last) {
            Some((name, _)) if name.as_slice() == rec.allocator => last,
            _ => {
                let i = match by_name.get(rec.allocator) {
                    Some(&i) => i,
                    None => {
                        trackers.push((rec.allocator.to_vec(), Tracker::new(opts.timeline_points)));
                        by_name.insert(rec.allocator.to_vec(), trackers.len() - 1);
                        trackers.len() - 1
                    }
                };
                last = i;
                i
            }
        };
        frames.clear();
        if rec.op != Op::Free {
            frames.extend(rec.frames());
        }
        trackers[i]
            .1
            .apply(rec.op, rec.ptr, rec.size, &frames, rec.offset);
    }

    let mut allocators: Vec<(Vec<u8>, AllocatorProfile)> = trackers
        .into_iter()
        .map(|(raw, mut t)| {
            t.finish_stats();
            let timeline = t.timeline.points();
            let (stacks, live_stacks) = t.stacks.into_maps(opts.view);
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

    Ok(Analysis {
        allocators: allocators.into_iter().map(|(_, p)| p).collect(),
        truncation: reader.truncation(),
        skips: reader.skips().to_vec(),
        records,
        view: opts.view,
    })
}
