//! kern-profile's example guest kernel for aarch64 (`qemu-system-aarch64 -M virt -cpu cortex-a57`):
//! the binary. All its code is the crate `kernel` (examples/virt-common, shared with the
//! riscv64 kernel; its `arch` module for aarch64 is examples/virt-common/src/arch/aarch64.rs),
//! linked in with `--extern kernel` by scripts/guests/build-kernel-virt.sh. See README.md.

#![no_std]
#![no_main]

// `_start` (the linker script's entry), `kmain` and the panic handler are in there.
extern crate kernel;
