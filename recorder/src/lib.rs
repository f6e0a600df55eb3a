//! The parts of kern-profile's QEMU plugin that do not touch QEMU, so that they can be unit
//! tested (a crate that links QEMU's plugin API cannot be linked into a test executable):
//!
//! - [`config`]: the `-plugin` arguments (`out=`, `delay=`, `period=`, `depth=`, `exact=`);
//! - [`version`]: which QEMU and plugin API the plugin needs (from `qemu-version.txt`);
//! - [`trigger`]: when a vCPU takes its next sample, as an instruction budget for QEMU's
//!   conditional callback;
//! - [`blocks`]: what a sample needs of each translated block, made once per block;
//! - [`capture`]: what the sampling callback reads once a sample is due (registers, the
//!   word at `[SP]`, a frameless entry's caller, the frame-pointer chain);
//! - [`code_sampler`]: code bytes at the first sampled user PC of each page of each address
//!   space (record kind 6);
//! - [`batch`]: a vCPU's buffer of encoded samples and when to hand it to the writer;
//! - [`writer`]: the writer thread behind a bounded channel, which drops rather than blocks;
//! - [`window`]: a small read-ahead cache over guest memory reads for the stack walk;
//! - [`window_fn`]: `window=`, sampling only while a function is on the vCPU's stack;
//! - [`exact`]: counter slots for exact per-block instruction counts;
//! - [`qemu_args`]: QEMU command-line settings the plugin cannot work under;
//! - [`target`]: the QEMUs the plugin refuses (user mode, other guests, one thread for
//!   several vCPUs);
//! - [`summary`]: the lines printed at exit;
//! - [`arm_slots`], [`host_timer`]: host-timer sampling for `delay=` (one timer thread arms
//!   per-vCPU slots that a conditional callback tests at block entry, or that the next
//!   interrupt takes with `trigger=interrupt`);
//! - [`interrupted`]: `trigger=interrupt`'s view of the interrupted context from inside QEMU's
//!   discontinuity callback;
//! - [`alloc_hooks`]: `alloc=`: the allocator functions to hook, their arguments at entry,
//!   and each call's entry matched to its return, into allocation events.

pub mod alloc_hooks;
pub mod arm_slots;
pub mod batch;
pub mod blocks;
pub mod capture;
pub mod code_sampler;
pub mod config;
pub mod exact;
pub mod host_timer;
pub mod interrupted;
pub mod qemu_args;
pub mod summary;
pub mod target;
pub mod trigger;
pub mod window;
pub mod window_fn;
pub mod writer;

pub use kern_profile_format::qemu as version;
pub use kern_profile_symbols::budget as elf_sections;
