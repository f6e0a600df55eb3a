//! Allocation events of a kern-profile raw file (the plugin's `alloc=` hooks) through the same
//! per-allocator model as memtrace, and the choice between the two inputs.
//!
//! The plugin writes each vCPU's events in batches, so the file is in time order per vCPU
//! only: the events are read whole, ordered by time (a stable sort keeps each vCPU's order),
//! then replayed. Memory is that of the events (their stacks interned) until the replay.

use std::io::{Cursor, Read};

use kern_profile_format::memtrace::Op;
use kern_profile_format::{AllocTable, RawReader, Record, MAGIC};
use rustc_hash::FxHashMap;

use crate::analyze::{Analysis, Source, TrackerSet};
use crate::error::AllocError;
use crate::tracker::HookedCall;
use crate::view::Options;

/// Analyses a memtrace or a raw file's allocation events, told apart by the raw format's
/// magic.
pub fn analyze_any<R: Read>(mut input: R, opts: &Options) -> Result<Analysis, AllocError> {
    let mut head = Vec::with_capacity(MAGIC.len());
    (&mut input)
        .take(MAGIC.len() as u64)
        .read_to_end(&mut head)?;
    let whole = Cursor::new(head.clone()).chain(input);
    if head == MAGIC || head.starts_with(&kern_profile_format::compressed::ZSTD_MAGIC) {
        analyze_raw(whole, opts)
    } else {
        crate::analyze(whole, opts)
    }
}

/// One event, its stack interned.
struct Event {
    time_ns: u64,
    allocator: u16,
    op: Op,
    ptr: u64,
    new_ptr: u64,
    size: u64,
    stack: u32,
    offset: u64,
    unreturned: bool,
}

/// Analyses the allocation events of a raw file (format version 3) per allocator. A file
/// without any (recorded without `alloc=`) is an error that says so; a torn last record is a
/// [`Analysis::truncation`] warning.
pub fn analyze_raw<R: Read>(input: R, opts: &Options) -> Result<Analysis, AllocError> {
    let mut reader = RawReader::open(input).map_err(AllocError::Raw)?;
    let mut table: Option<AllocTable> = None;
    let mut stacks: FxHashMap<Box<[u64]>, u32> = FxHashMap::default();
    let mut by_id: Vec<Box<[u64]>> = Vec::new();
    let mut events = Vec::new();
    let mut frames = Vec::new();
    loop {
        // The next record starts at the next unread byte.
        let offset = reader.offset();
        let Some(rec) = reader.next_record().map_err(AllocError::Raw)? else {
            break;
        };
        match rec {
            Record::AllocTable(t) => table = Some(t),
            Record::AllocEvent(e) => {
                let t = table
                    .as_ref()
                    .ok_or(AllocError::EventBeforeTable { offset })?;
                let f =
                    t.functions
                        .get(e.function as usize)
                        .ok_or(AllocError::UnknownFunction {
                            offset,
                            function: e.function,
                        })?;
                frames.clear();
                frames.push(f.entry);
                frames.extend(e.frames());
                let stack = match stacks.get(frames.as_slice()) {
                    Some(&id) => id,
                    None => {
                        let id = by_id.len() as u32;
                        stacks.insert(frames.as_slice().into(), id);
                        by_id.push(frames.as_slice().into());
                        id
                    }
                };
                events.push(Event {
                    time_ns: e.time_ns,
                    allocator: f.allocator,
                    op: e.op,
                    ptr: e.ptr,
                    new_ptr: e.new_ptr,
                    size: e.size,
                    stack,
                    offset,
                    unreturned: e.unreturned(),
                });
            }
            _ => {}
        }
    }
    let Some(table) = table else {
        return Err(AllocError::NoAllocationEvents);
    };
    events.sort_by_key(|e| e.time_ns);
    let mut set = TrackerSet::new(opts);
    // Every allocator of the table has a profile, even one that was never called.
    for a in &table.allocators {
        set.get(a.as_bytes());
    }
    for e in &events {
        let name = table
            .allocators
            .get(e.allocator as usize)
            .map_or("?", String::as_str);
        set.get(name.as_bytes()).apply_hooked(HookedCall {
            op: e.op,
            ptr: e.ptr,
            new_ptr: e.new_ptr,
            size: e.size,
            frames: &by_id[e.stack as usize],
            offset: e.offset,
            unreturned: e.unreturned,
        });
    }
    Ok(Analysis {
        allocators: set.finish(opts.view),
        truncation: reader.truncation(),
        skips: Vec::new(),
        records: events.len() as u64,
        view: opts.view,
        source: Source::Hooks,
    })
}
