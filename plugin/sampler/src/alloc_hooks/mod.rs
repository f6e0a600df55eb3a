//! Allocation profiles from hooks on the guest's allocator functions (`alloc=SPEC` with
//! `elf=` or `symbols=`), without QEMU so that it can be tested:
//!
//! - [`spec`]: the SPEC, a preset or a file of `ALLOCATOR KIND FUNCTION [ARG=WHERE]...` lines;
//! - [`symbols`]: function addresses by demangled name (ELF symbol table, or a text map);
//! - [`dwarf`]: parameter locations at a function's entry;
//! - [`args`]: calling conventions, and reading a location's value at the entry;
//! - [`resolve`]: the SPEC against the symbols: [`HookSet`], every error naming its line;
//! - [`matcher`]: a call's return matched to its entry per vCPU (nesting, recursion,
//!   interrupts, calls that never return);
//! - [`calls`]: one vCPU's calls from entry to encoded allocation events.
//!
//! The plugin registers an instruction callback at each hooked function's entry and
//! conditional callbacks at blocks that fire when the block starts at one of the vCPU's
//! watched return addresses ([`calls::VcpuHooks::watch`], [`matcher::WATCH_SLOTS`] slots).

pub mod args;
pub mod calls;
pub mod dwarf;
mod error;
pub mod matcher;
pub mod resolve;
pub mod spec;
pub use kern_profile_symbols::by_name as symbols;

pub use calls::{CallCounts, Moment, VcpuHooks};
pub use error::HookError;
pub use resolve::{Hook, HookSet, SymbolSource};
pub use spec::Spec;
