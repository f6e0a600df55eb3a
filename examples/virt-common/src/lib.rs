//! The riscv64 and aarch64 example kernels (examples/kernel-riscv64, examples/kernel-aarch64):
//! the i386 kernel's workloads (CPU phase, `smp=on`, `user=on`, the allocation phase traced
//! in Maestro's `memtrace` format) on QEMU's `virt` boards. See ../README.md.
//!
//! One crate for both boards: what differs is in `arch` (`arch/riscv64.rs` or
//! `arch/aarch64.rs`, chosen by `target_arch`); the allocators, the allocation pattern and
//! the memtrace records are examples/kernel-common's, as for the x86 kernels. Built as an
//! rlib by scripts/guests/build-kernel-virt.sh with plain rustc (no Cargo) and linked into each
//! board's binary (examples/kernel-ARCH/src/main.rs) with `--extern kernel`.
//!
//! The crate is named `kernel`, as the i386 kernel's: its functions keep the names the
//! kernels share (`kernel::workload::hot_leaf`, `kernel::smp::smp_run`, ...), which the
//! expectations, the measuring script and the linker scripts (`.text._ZN6kernel8workload*`)
//! name. Every function is compiled here, in one codegen unit, as when the modules were part
//! of each binary: the instruction counts of expected.toml still hold.

#![no_std]

// opaque! and leaf_loop!
#[macro_use]
extern crate kernel_common;

mod arch;
mod console;
mod elf;
mod fdt;
mod irq;
mod kmain;
mod smp;
mod user;
mod workload;

// The allocators' heaps are placed from kernel_common's idea of where RAM starts.
const _: () = assert!(arch::RAM_BASE == kernel_common::kalloc::RAM_BASE);
