//! A client of QEMU's gdbstub (GDB's remote serial protocol), for any QEMU and any
//! accelerator: connect over `unix:PATH` or `HOST:PORT`, stop the guest, read every vCPU's
//! registers (`Hg` + `g`, `p` for the few outside `g`) and its stack with the plugin's
//! unwinders (`kern_profile_unwind`) over `m` reads, resume: once ([`stacks()`]) or at a steady
//! rate ([`sample()`]).
//!
//! Any peer is bounded: each reply within a deadline, each packet within a size, the first
//! reply must be a packet (else [`GdbError::NotGdbstub`]), every read within a count.

pub mod client;
mod error;
pub mod packet;
pub mod sampling;
pub mod stacks;
pub mod stream;
pub mod target;

pub use client::{Client, Limits, ThreadId};
pub use error::GdbError;
pub use sampling::{sample, End, SampleOptions, Sampled};
pub use stacks::{stacks, Snapshot, StackOptions, Target, VcpuStack};

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_tasks;
