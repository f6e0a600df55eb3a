//! kern-profile's source-neutral sampling: what any source of samples (the TCG plugin,
//! kern-profile-plugin; a gdbstub or another source) does once a sample is due, without QEMU
//! so that it can be unit tested:
//!
//! - [`capture`]: what a sample reads (registers, the word at `[SP]`, a frameless entry's
//!   caller, the frame-pointer chain), over a register reader and a memory reader;
//! - [`window`]: a small read-ahead cache over guest memory reads for the stack walk;
//! - [`code_sampler`]: code bytes at the first sampled user PC of each page of each address
//!   space (record kind 6);
//! - [`task`]: `tasks=`: the guest task each sample ran in, and when to record it;
//! - [`switch`]: `switches=`: each task switch, with the leaving task's stack;
//! - [`batch`]: a vCPU's buffer of encoded samples and when to hand it to the writer;
//! - [`writer`]: the writer thread behind a bounded channel, which drops rather than blocks;
//! - [`flight`]: `flight=`: the writer's ring of the last seconds' batches;
//! - [`flight_trigger`]: `flight_trigger=`: the functions that write that ring;
//! - [`alloc_hooks`]: `alloc=`: the allocator functions to hook, their arguments at entry,
//!   and each call's entry matched to its return, into allocation events.

pub mod alloc_hooks;
pub mod batch;
pub mod capture;
pub mod code_sampler;
pub mod flight;
pub mod flight_trigger;
pub mod switch;
pub mod task;
pub mod window;
pub mod writer;
