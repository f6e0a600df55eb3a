//! kern-profile's example guest kernel for riscv64 (`qemu-system-riscv64 -M virt -bios none`):
//! the binary. All its code is the crate `kernel` (examples/virt-common, shared with the
//! aarch64 kernel; its `arch` module for riscv64 is examples/virt-common/src/arch/riscv64.rs),
//! linked in with `--extern kernel` by scripts/guests/build-kernel-virt.sh. See README.md.

#![no_std]
#![no_main]

// `_start` (the linker script's entry), `kmain` and the panic handler are in there.
extern crate kernel;
