//! The virt kernels' user program (`user=on`), the i386 kernel's (examples/kernel/user/main.rs)
//! for riscv64 (U-mode, `ecall`) and aarch64 (EL0, `svc #0`): computes in `user_hot` and
//! `user_cold` and asks the kernel for work through a system call, `rounds` times:
//!
//! ```text
//! _start                      (assembly; its frame record holds the kernel's frame
//!                             pointer and the fake return address of all ones: the
//!                             classic start)
//! └─ user_main
//!    └─ user::run             loop over `rounds` (a0 / x0 at entry)
//!       └─ user::round        once per round
//!          ├─ user::user_hot  HOT_ITERS iterations of the leaf loop       (user time)
//!          ├─ user::user_cold COLD_ITERS iterations                       (user time)
//!          └─ user::syscall   work(seed, KERNEL_ITERS): the kernel's sys_work (kernel time)
//! ```
//!
//! then writes its checksum (`write`) and calls `exit(0)`. Linked by the arch's
//! user/linker.ld; built with the kernel's flags by scripts/guests/build-kernel-virt.sh.

#![no_std]
#![no_main]

use core::arch::{asm, global_asm};

// opaque! and leaf_loop! (examples/kernel-common/src/macros.rs); nothing else of it is linked.
#[macro_use]
extern crate kernel_common;

pub const HOT_ITERS: u32 = 5_000;
pub const COLD_ITERS: u32 = 1_000;
pub const KERNEL_ITERS: u32 = 4_000;

const SYS_EXIT: usize = 0;
const SYS_WORK: usize = 1;
const SYS_WRITE: usize = 2;

#[cfg(target_arch = "riscv64")]
global_asm!(
    r#"
    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    /* a frame record, as a C main makes: the kernel's s0 and the fake return address */
    addi sp, sp, -16
    sd ra, 8(sp)
    sd s0, 0(sp)
    addi s0, sp, 16
    /* user_main(rounds = a0) */
    call user_main
    unimp
    .size _start, . - _start
    "#
);

#[cfg(target_arch = "aarch64")]
global_asm!(
    r#"
    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    /* a frame record, as a C main makes: the kernel's x29 and the fake return address */
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    /* user_main(rounds = x0) */
    bl user_main
    udf #0
    .size _start, . - _start
    "#
);

#[no_mangle]
pub extern "C" fn user_main(rounds: u32) -> ! {
    let sum = run(rounds);
    let mut line = *b"user: done, checksum 0x00000000\n";
    let n = line.len();
    for k in 0..8 {
        let d = ((sum >> (4 * k)) & 0xF) as u8;
        line[n - 2 - k] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
    }
    syscall(SYS_WRITE, line.as_ptr() as usize, n);
    syscall(SYS_EXIT, 0, 0);
    loop {}
}

#[inline(never)]
pub fn run(rounds: u32) -> u32 {
    let mut acc: u32 = 0x0BAD_5EED;
    let mut r: u32 = 0;
    while r < rounds {
        acc = round(acc ^ r);
        r += 1;
    }
    acc
}

#[inline(never)]
pub fn round(seed: u32) -> u32 {
    let a = user_hot(seed);
    let b = user_cold(a);
    opaque!(syscall(SYS_WORK, b as usize, KERNEL_ITERS as usize) as u32)
}

/// The user program's hottest function.
#[inline(never)]
pub fn user_hot(seed: u32) -> u32 {
    leaf_loop!(seed, HOT_ITERS)
}

/// A fifth of `user_hot`'s iterations.
#[inline(never)]
pub fn user_cold(seed: u32) -> u32 {
    leaf_loop!(seed, COLD_ITERS)
}

/// The system call: number and arguments in a0-a2 / x0-x2, the result in a0 / x0. The
/// kernel may clobber what the C ABI lets a call clobber.
#[inline(never)]
pub fn syscall(nr: usize, a: usize, b: usize) -> usize {
    let r: usize;
    #[cfg(target_arch = "riscv64")]
    unsafe {
        asm!("ecall", inlateout("a0") nr => r, in("a1") a, in("a2") b, clobber_abi("C"))
    };
    #[cfg(target_arch = "aarch64")]
    unsafe {
        asm!("svc #0", inlateout("x0") nr => r, in("x1") a, in("x2") b, clobber_abi("C"))
    };
    r
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    syscall(SYS_EXIT, 101, 0);
    loop {}
}
