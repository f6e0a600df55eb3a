//! Allocation analysis of Maestro `memtrace` traces and of the allocation events the
//! kern-profile plugin records by hooking allocator functions (`alloc=`; [`analyze_raw`],
//! [`analyze_any`] tells the two apart), both through one model (see `common/format/FORMAT.md`): per
//! allocator, counters, a weight per allocating stack in one of four [`View`]s, the stacks still holding
//! memory, and a downsampled timeline of live units. The model only: the aggregator names the
//! stacks and writes reports, flamegraphs and timeline charts.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kern_profile_alloc::{analyze, Options};
//! let file = std::fs::File::open("memtrace.bin")?;
//! let a = analyze(file, &Options::default())?;
//! for p in &a.allocators {
//!     println!("{}: peak {} units, {} points", p.name, p.stats.peak_live, p.timeline.len());
//! }
//! # Ok(()) }
//! ```
//!
//! # Units
//! Sizes are reported as the trace gives them ("units"): bytes for a heap, pages for a page
//! allocator. Nothing is converted.
//!
//! # What is counted
//! Each allocator (records are grouped by allocator name) is analysed on its own, in trace
//! order. Operation indices count that allocator's records from 0.
//! - An **alloc** adds a block of `size` units at `ptr`, owned by its stack.
//! - A **free** of a live pointer retires its block (a free's `size`, often 0, is not needed).
//!   A free of a pointer that is not live is a **double free** if the pointer was freed before
//!   and not handed out again since, else a **free of an unknown pointer**. Neither is fatal.
//!   (Double frees are recognised among at least the last 2^20 distinct freed pointers, to
//!   keep memory bounded.)
//! - An alloc returning a pointer that is still live (and not reallocated, see below) means a
//!   free is missing from the trace (e.g. skipped bytes): the earlier block is taken as freed
//!   ([`AllocatorStats::reused_live`]).
//!
//! # Reallocations
//! A realloc record carries the *old* pointer and the *new* size; where a moving realloc put
//! the block is not recorded, and the record alone does not say whether it moved. The policy:
//! - A realloc is accounted as the free of the old block plus the allocation of a new one of
//!   the new size, owned by the **realloc's** stack: the old block's units leave its stack,
//!   and the realloc counts as an allocation of its new size in the `allocated` and `count`
//!   views and in `bytes_allocated`.
//! - The new block is kept at the **old pointer**, flagged as possibly moved. A later realloc
//!   or free of that pointer confirms it stayed (as for Maestro's non-moving reallocs).
//! - A later **alloc returning the old pointer** proves the realloc moved the block (the old
//!   pointer was free again): the block stays live, at an unknown pointer
//!   ([`AllocatorStats::moves_detected`], [`AllocatorStats::live_moved_at_end`]).
//! - A realloc or free of a pointer that is **not live** most likely acts on a block a realloc
//!   moved there (the only way a pointer escapes the trace). It is still counted as an
//!   unknown realloc, unknown free or double free, and it is also **matched** to the most
//!   recently reallocated block that may have moved (possibly moved or proven moved, newest
//!   first), which is retired ([`AllocatorStats::matched_to_moved`]). A free with a non-zero
//!   size only matches a block of exactly that size (among the 256 newest candidates); a free
//!   of size 0 takes the newest. A realloc of a pointer not live then tracks its new block at
//!   that pointer. Without any candidate, nothing is retired; an unknown realloc still adds
//!   its new size.
//!
//! So the live total stays right when moved blocks are later freed or reallocated through
//! their new pointers, at the price of possibly attributing a freed block to the wrong stack
//! when several moved blocks are pending at once. The report gives every count involved, and
//! the units still live in blocks that were last reallocated or proven moved, so a reader can
//! judge how much of a leak view rests on this matching.
//!
//! # Hooked calls
//! A raw file's allocation events go through the same [`AllocatorStats`] and views, with what
//! a hook knows and a memtrace does not: a realloc's new pointer (its block is tracked
//! exactly: the old block retired, the new one live where it went, so nothing "may have
//! moved"), allocations that returned null ([`AllocatorStats::failed`]) and calls that never
//! returned ([`AllocatorStats::unreturned`]). A stack's first address is the hooked
//! function's entry ([`Source::Hooks`]).
//!
//! # Robustness
//! No input makes the analysis panic; sums saturate. A bad op byte is an error naming its
//! byte offset, or in lenient mode a skip to the next plausible record
//! ([`Analysis::skips`]); a torn last record is a [`Analysis::truncation`] warning and every
//! complete record is used. Memory is bounded by the live blocks and the distinct stacks, plus
//! fixed-size bounds for the freed pointers and the timeline.

mod analyze;
mod error;
mod freed;
mod hooked;
mod stacks;
mod stats;
mod timeline;
mod tracker;
mod view;

pub use analyze::{analyze, AllocatorProfile, Analysis, Source};
pub use error::AllocError;
pub use hooked::{analyze_any, analyze_raw};
pub use stats::AllocatorStats;
pub use view::{Options, View};

/// The memtrace types an [`Analysis`] refers to, re-exported for convenience.
pub use kern_profile_format::memtrace::Skip;
pub use kern_profile_format::Truncation;
