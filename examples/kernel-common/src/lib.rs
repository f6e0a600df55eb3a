//! Code shared by the example kernels: the measured workloads (src/workload.rs: the CPU
//! phase and the `smp=on` rounds, macros each kernel expands in its own modules, with the
//! `opaque!` and `leaf_loop!` macros they are made of), the multiboot-style command line's
//! parsing and `memcmp`/`bcmp` (all four), the allocation phase (the `kmalloc` and `pages`
//! allocators, their Maestro memtrace records and the allocation pattern; all four, the heaps
//! placed from `kalloc::RAM_BASE`, the records on COM2 on x86 and through semihosting on
//! riscv64 and aarch64), and the 16550 UARTs of the PCs (x86 only: port I/O).
//!
//! `no_std`, `core` only. Built as an rlib by scripts/guests/build-kernel*.sh with the
//! kernel's own flags and given to the kernel's rustc call with `--extern kernel_common`. The
//! kernels' instruction counts (expected.toml) were measured with this code compiled into
//! each kernel crate: the functions LLVM inlined there are `#[inline]` (or
//! `#[inline(always)]`) so that they still are, the others (`on_off`, `memcmp`, `bcmp`) are
//! called out of line as before.

#![no_std]

mod macros;
mod workload;

pub mod alloc_phase;
pub mod cmdline;
pub mod kalloc;
pub mod mem;
pub mod memtrace;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod serial;
