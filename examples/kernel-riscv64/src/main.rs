//! kern-profile's example guest kernel for riscv64 (`qemu-system-riscv64 -M virt -bios none`):
//! the i386 kernel's workloads (CPU phase, `smp=on`, `user=on`, the allocation phase traced in
//! Maestro's `memtrace` format) over the board's machine mode. See README.md.
//!
//! Built by scripts/build-kernel-virt.sh with plain rustc (no Cargo; `core` and
//! examples/kernel-common only). Everything
//! but src/arch.rs is shared with the aarch64 kernel (../virt-common, `#[path]`-included until
//! it moves into kernel-common).

#![no_std]
#![no_main]

#[macro_use]
#[path = "../../virt-common/macros.rs"]
mod macros;

#[path = "../../virt-common/alloc_phase.rs"]
mod alloc_phase;
mod arch;
#[path = "../../virt-common/config.rs"]
mod config;
#[path = "../../virt-common/console.rs"]
mod console;
#[path = "../../virt-common/elf.rs"]
mod elf;
#[path = "../../virt-common/fdt.rs"]
mod fdt;
#[path = "../../virt-common/kalloc.rs"]
mod kalloc;
#[path = "../../virt-common/kmain.rs"]
mod kmain;
#[path = "../../virt-common/mem.rs"]
mod mem;
#[path = "../../virt-common/memtrace.rs"]
mod memtrace;
#[path = "../../virt-common/smp.rs"]
mod smp;
#[path = "../../virt-common/user.rs"]
mod user;
#[path = "../../virt-common/workload.rs"]
mod workload;
