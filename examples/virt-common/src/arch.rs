//! What differs between the boards: boot, UART, exit, semihosting, CPU start-up, user-mode
//! entry and system-call trap (arch/riscv64.rs, arch/aarch64.rs), one of them compiled for
//! the target. Both give the same names (`putc`, `exit`, `start_cpu`, `RAM_BASE`, ...) to the
//! rest of the kernel; what is the same on both is here, over the symbols their assembly
//! defines alike (`semihost_call`, `enter_user`, `user_exit`).

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
pub use aarch64::*;
#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::*;

use core::arch::asm;

/// The user program's area: linked at RAM + 64 MiB (user/linker.ld), stack top RAM + 80 MiB.
pub const USER_BASE: usize = RAM_BASE + 0x0400_0000;
pub const USER_STACK_TOP: usize = RAM_BASE + 0x0500_0000;

extern "C" {
    /// The semihosting trap: operation, parameter block; returns the host's result.
    fn semihost_call(op: usize, param: usize) -> isize;
    static semihost_call_end: u8;
    /// enter_user(entry, user sp, arg) -> exit code: to user mode, back by user_exit.
    pub fn enter_user(entry: usize, sp: usize, arg: usize) -> usize;
    pub fn user_exit(code: usize) -> !;
}

/// Whether `pc` lies in the semihosting trap (a trap there: QEMU runs without semihosting).
pub fn in_semihosting(pc: usize) -> bool {
    let start = semihost_call as usize;
    (start..unsafe { &semihost_call_end as *const u8 as usize }).contains(&pc)
}

/// Sleeps for good.
pub fn park() -> ! {
    loop {
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}
