//! Code shared by the example kernels (examples/kernel for i386, examples/kernel64 for
//! x86_64): the multiboot command line's parsing, `memcmp`/`bcmp`, the 16550 UARTs, and the
//! allocation phase (the `kmalloc` and `pages` allocators, their Maestro memtrace records on
//! COM2 and the allocation pattern) on x86 targets (port I/O).
//!
//! `no_std`, `core` only. Built as an rlib by scripts/build-kernel.sh and
//! scripts/build-kernel64.sh with the kernel's own flags and given to the kernel's rustc call
//! with `--extern kernel_common`. The kernels' instruction counts (expected.toml) were
//! measured with this code compiled into each kernel crate: the functions LLVM inlined there
//! are `#[inline]` (or `#[inline(always)]`) so that they still are, the others (`on_off`,
//! `memcmp`, `bcmp`) are called out of line as before.

#![no_std]

pub mod cmdline;
pub mod mem;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod alloc_phase;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod kalloc;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod memtrace;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod serial;
