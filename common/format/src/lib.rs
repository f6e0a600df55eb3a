//! kern-profile's record formats, defined once and shared by the recorder (the QEMU plugin)
//! and the consumer (the aggregator). See `FORMAT.md` beside this crate for the byte layouts.
//!
//! Every reader streams: it holds one buffer, hands out records that borrow it, tells the
//! byte offset of each, and reports a torn last record as a [`Truncation`] rather than an
//! error, so that everything before the cut is used.
//!
//! Each concept has one type here: [`StopReason`] and its tally [`StopCounts`], the sampling
//! setting [`SamplingMode`], the exit [`Stats`], and [`RawSummary`], the count of a raw
//! file's records that every consumer shares. Version 3 adds the allocation-hook records
//! ([`AllocTable`], [`AllocEvent`], [`AllocHookStats`]).

mod alloc_record;
mod code_bytes;
pub mod compressed;
mod error;
mod header;
mod input_file;
mod legacy;
pub mod limits;
mod machine;
pub mod memtrace;
pub mod qemu;
mod raw_reader;
mod raw_writer;
mod source;
mod stack_summary;
pub mod stack_table;
mod stats;
mod stop_reason;
mod summary;
mod switch_record;
mod task_record;
mod timer_record;
mod walk_end;

pub use alloc_record::{
    alloc_flags, AllocEvent, AllocEventRef, AllocHookStats, AllocTable, HookedFunction,
};
pub use code_bytes::{CodeBytes, MAX_CODE_BYTES};
pub use error::FormatError;
pub use header::{
    Arch, Header, SamplingMode, HEADER_FIXED_LEN, MAGIC, MAX_VERSION, VERSION, VERSION_2,
    VERSION_3, VERSION_4,
};
pub use input_file::{open_input, read_elf_input, ElfInput, ELF_MAGIC, ELF_PROBE};
pub use legacy::{LegacyReader, LegacySample, LEGACY_MAX_EMPTY_RUN};
pub use machine::{CpuMode, Privilege};
pub use raw_reader::{ExactBlock, ExactBlocks, RawReader, Record, SampleRef};
pub use raw_writer::{
    encode_exact_blocks, encode_sample, encode_sample_v2, encode_stats, SampleExtras, SampleRecord,
};
pub use source::Truncation;
pub use stack_summary::StackSummary;
pub use stack_table::Reference;
pub use stats::Stats;
pub use stop_reason::{StopCounts, StopReason};
pub use summary::{RawSummary, StopsFrom, VcpuCounts};
pub use switch_record::{LeftAs, SwitchRecord, SWITCH_FIXED_LEN};
pub use task_record::{
    name_bytes, name_of, TaskIdentity, TaskRecord, TaskUnknown, TASK_NAME_LEN, TASK_RECORD_LEN,
};
pub use timer_record::{HostTimerStats, InterruptWaits, VcpuTime, LONG_WAIT_NS};
pub use walk_end::{Outcome, WalkEnd, Walker};

/// Record kinds of the raw format.
pub mod kind {
    pub const SAMPLE: u8 = 1;
    pub const EXACT_BLOCKS: u8 = 2;
    pub const STATS: u8 = 3;
    /// `delay=`: the host timer's ticks and each vCPU's idle time (written at exit).
    pub const HOST_TIMER: u8 = 4;
    /// Format version 3: one allocator call the recorder hooked (`alloc=`). Reserved in
    /// version 2, whose readers skip it as an unknown kind.
    pub const ALLOC_EVENT: u8 = 5;
    /// A few code bytes at a sampled user address, with its address space, to tell
    /// programs linked at the same addresses apart ([`crate::CodeBytes`]).
    pub const CODE_BYTES: u8 = 6;
    /// Format version 3: the allocators and hooked functions that allocation events name,
    /// written once, right after the header.
    pub const ALLOC_TABLE: u8 = 7;
    /// Format version 3: the allocation hooks' event counts (written at exit).
    pub const ALLOC_STATS: u8 = 8;
    /// The guest task a vCPU runs from this record on ([`crate::TaskRecord`]); written in
    /// versions 2 and 3, skipped as an unknown kind by readers that predate it.
    pub const TASK: u8 = 9;
    /// A vCPU switched tasks, with the stack of the task that left ([`crate::SwitchRecord`]);
    /// written in versions 2 and 3 (`switches=`), skipped by readers that predate it.
    pub const SWITCH: u8 = 10;
    /// Format version 4: a distinct stack, defined once ([`crate::stack_table`]).
    pub const STACK: u8 = 11;
    /// Format version 4: a run of one vCPU's samples as references to stacks.
    pub const SAMPLE_RUN: u8 = 12;
}

/// Frame values below [`frame_marker::LIMIT`] are not return addresses but markers of where
/// a walk crossed a boundary (no code lives in the first page of an address space), in files
/// whose header flag bit 1 says so.
pub mod frame_marker {
    /// A kernel entry (interrupt, exception, system call): the next frame is the
    /// interrupted instruction's own address, then the interrupted context's return
    /// addresses follow.
    pub const KERNEL_ENTRY: u64 = 1;
    /// The frame pointer jumped down to another stack (an IRQ stack, or from a kernel stack
    /// into a user stack); what follows may be garbage if the jump was not a switch.
    pub const STACK_SWITCH: u64 = 2;
    /// Values below this are markers.
    pub const LIMIT: u64 = 16;
}

/// Sample flag bits.
pub mod sample_flags {
    /// The vCPU was in user mode (CPL 3; version 2: privilege user).
    pub const USER: u8 = 1;
    /// The word at `[SP]` could be read.
    pub const SP_WORD_VALID: u8 = 2;
    /// The block was entered without a frame record of its own (at `push ebp`,
    /// `mov ebp, esp` or `ret`) and the recorder put the caller's return address, read from
    /// the stack, first in the frames: readers must not apply an `[SP]` fix of their own.
    pub const ENTRY_RESOLVED: u8 = 4;
    /// Version 2: the return-address register field holds a value.
    pub const RETURN_REGISTER_VALID: u8 = 8;
    /// Version 2: the page-table base field holds a value.
    pub const PAGE_TABLE_VALID: u8 = 16;
}

/// Which of the two CPU sample formats a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuFormat {
    /// kern-profile's own format (starts with [`MAGIC`]).
    Raw,
    /// The original C plugin's headerless format.
    Legacy,
}

/// Tells the format of a CPU sample file from its first bytes.
pub fn detect(first_bytes: &[u8]) -> CpuFormat {
    if first_bytes.starts_with(MAGIC) || first_bytes.starts_with(&compressed::ZSTD_MAGIC) {
        CpuFormat::Raw
    } else {
        CpuFormat::Legacy
    }
}
