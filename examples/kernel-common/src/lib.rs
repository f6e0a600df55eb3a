//! Code shared by the example kernels: the measured workloads (src/workload.rs: the CPU
//! phase and the `smp=on` rounds, macros each kernel expands in its own modules, with the
//! `opaque!` and `leaf_loop!` macros they are made of), the command line (`cmdline`,
//! `config`), the console's printers and `kmain`'s progress lines (`console`, `phases`),
//! `irq=on`'s handler (`tick`), the C memory functions (`mem`), the allocation phase (the
//! `kmalloc` and `pages` allocators, their Maestro memtrace records and the allocation
//! pattern; the heaps placed from `kalloc::RAM_BASE`, the records on COM2 on x86 and through
//! semihosting on riscv64 and aarch64), and on x86 only the 16550 UARTs (`serial`) and the
//! PC's plumbing (`x86`: exit, IDT and exception stubs, PIC and PIT, multiboot).
//!
//! `no_std`, `core` only. Built as an rlib by scripts/guests/build-kernel*.sh with the
//! kernel's own flags and given to the kernel's rustc call with `--extern kernel_common`. The
//! kernels' instruction counts (expected.toml) were measured with this code compiled into
//! each kernel crate: the functions LLVM inlined there are `#[inline]` (or
//! `#[inline(always)]`) so that they still are, the others (`on_off`, `memcmp`, `bcmp`) are
//! called out of line as before. Nothing a test names by its Rust path lives here but the
//! allocation phase's functions (`kernel_common::kalloc::kmalloc`, ...): the workloads are
//! expanded in each kernel's crate.

#![no_std]

mod macros;
mod workload;

pub mod alloc_phase;
pub mod cmdline;
pub mod config;
pub mod console;
pub mod kalloc;
pub mod mem;
pub mod memtrace;
pub mod phases;
pub mod sched;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod serial;
pub mod tick;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub mod x86;
