//! What differs between the boards: boot, UART, exit, semihosting, CPU start-up, user-mode
//! entry and system-call trap (arch/riscv64.rs, arch/aarch64.rs), one of them compiled for
//! the target. Both give the same names (`putc`, `exit`, `start_cpu`, `enter_user`,
//! `USER_BASE`, ...) to the rest of the kernel.

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
pub use aarch64::*;
#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::*;
