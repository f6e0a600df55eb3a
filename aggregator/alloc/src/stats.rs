/// Counters of one allocator. Sizes are in the trace's units, never converted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Records of this allocator (allocations + reallocations + frees).
    pub operations: u64,
    pub allocations: u64,
    pub reallocations: u64,
    pub frees: u64,
    /// Sizes of all allocations plus the new sizes of all reallocations.
    pub bytes_allocated: u64,
    /// Highest live total.
    pub peak_live: u64,
    /// Index, among this allocator's operations (from 0), of the operation after which the
    /// live total first reached `peak_live`. 0 when `peak_live` is 0.
    pub peak_at_op: u64,
    /// Byte offset in the trace of that operation's record. 0 when `peak_live` is 0.
    pub peak_at_offset: u64,
    /// Units live at the end of the trace.
    pub live_at_end: u64,
    /// Blocks live at the end of the trace.
    pub live_blocks_at_end: u64,
    /// Of `live_at_end`, units in blocks a realloc moved (their old pointer was handed out
    /// again), so whose pointer is unknown.
    pub live_moved_at_end: u64,
    /// Of `live_at_end`, units in blocks whose last operation was a realloc: they are kept at
    /// the old pointer, but may have moved.
    pub live_unconfirmed_at_end: u64,
    /// Frees of a pointer that was neither live nor freed before.
    pub unknown_frees: u64,
    /// Frees of a pointer already freed and not allocated again since.
    pub double_frees: u64,
    /// Reallocations of a pointer that was not live (its new size is accounted as a new block).
    pub unknown_reallocs: u64,
    /// Reallocated blocks proven moved: an allocation returned their old pointer.
    pub moves_detected: u64,
    /// Unknown frees, double frees and unknown reallocations taken to act on a block a realloc
    /// may have moved there; that block was retired (see the crate docs).
    pub matched_to_moved: u64,
    /// Allocations that returned a pointer still live (and not reallocated): a free was not in
    /// the trace; the earlier block is taken as freed.
    pub reused_live: u64,
    /// Hooked calls only: allocations and reallocations that returned a null pointer (for a
    /// non-zero size); nothing was allocated, a reallocated block stays as it was.
    pub failed: u64,
    /// Hooked calls only: allocations and reallocations that never returned (the plugin gave
    /// them up: a `longjmp`, a reset, or still running at exit); a reallocated block is kept.
    pub unreturned: u64,
}
