//! The example kernel's user program (`user=on`): a ring-3 process of its own ELF
//! (target/examples/user.elf, linked at 64 MiB) that computes in `user_hot` and `user_cold`
//! and asks the kernel for work through a system call, `rounds` times:
//!
//! ```text
//! _start                      (assembly; its frame record holds the kernel's EBP and the
//!                             fake return address 0xffffffff: the classic start)
//! └─ user_main
//!    └─ user::run             loop over `rounds` (EAX at entry)
//!       └─ user::round        once per round
//!          ├─ user::user_hot  HOT_ITERS iterations of the leaf loop       (user time)
//!          ├─ user::user_cold COLD_ITERS iterations                       (user time)
//!          └─ user::syscall   int 0x80, work(seed, KERNEL_ITERS):
//!                             the kernel's sys_work runs KERNEL_ITERS iterations (kernel time)
//! ```
//!
//! then writes its checksum to COM1 (`write`) and calls `exit(0)`. The loop body is the
//! kernel's (6 instructions an iteration), so the split is known by construction:
//! 6,000 iterations of user code to 4,000 of kernel code a round, plus the few instructions
//! of each call (measured exactly: examples/kernel/expected.toml, `[user]`).
//!
//! Built by scripts/guests/build-kernel.sh with the kernel's flags (frame pointers, DWARF).
//!
//! Built again with `--cfg variant_b` into target/examples/user-b.elf (`procs=on`: two
//! programs linked at the same addresses, each in its own address space): that variant's
//! `round` first calls `b_only`, a function only it has (B_ITERS iterations), which also
//! moves every function after it to other addresses.
//! Without the cfg this file builds user.elf exactly as before.

#![no_std]
#![no_main]

use core::arch::{asm, global_asm};

pub const HOT_ITERS: u32 = 5_000;
pub const COLD_ITERS: u32 = 1_000;
pub const KERNEL_ITERS: u32 = 4_000;
/// Iterations of `b_only` a round (variant B only).
#[cfg(variant_b)]
pub const B_ITERS: u32 = 3_000;

const SYS_EXIT: u32 = 0;
const SYS_WORK: u32 = 1;
const SYS_WRITE: u32 = 2;

global_asm!(
    r#"
    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    push ebp                        /* a frame record, as a C main makes: the kernel's EBP */
    mov ebp, esp                    /* and the fake return address 0xffffffff */
    and esp, -16
    sub esp, 12
    push eax                        /* user_main(rounds) */
    call user_main
    ud2
    .size _start, . - _start
    "#
);

/// An optimisation barrier on a register value: examples/kernel-common's opaque!, copied here
/// with leaf_loop! (linking kernel_common would put unwind tables into the embedded image).
macro_rules! opaque {
    ($x:expr) => {{
        let mut v: u32 = $x;
        unsafe { asm!("/* {0} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}

/// The kernel's leaf loop: 6 instructions an iteration.
macro_rules! leaf_loop {
    ($seed:expr, $iters:expr) => {{
        let n = opaque!($iters);
        let mut acc: u32 = $seed;
        let mut i: u32 = 0;
        while i < n {
            acc = opaque!(((acc << 5) | (acc >> 27)) ^ i) * 0x9E37_79B9;
            i += 1;
        }
        acc
    }};
}

#[no_mangle]
pub extern "C" fn user_main(rounds: u32) -> ! {
    let sum = run(rounds);
    let mut line = *b"user: done, checksum 0x00000000\n";
    let n = line.len();
    for k in 0..8 {
        let d = ((sum >> (4 * k)) & 0xF) as u8;
        line[n - 2 - k] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
    }
    syscall(SYS_WRITE, line.as_ptr() as u32, n as u32);
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
    #[cfg(variant_b)]
    let seed = b_only(seed);
    let a = user_hot(seed);
    let b = user_cold(a);
    opaque!(syscall(SYS_WORK, b, KERNEL_ITERS))
}

/// Variant B's own function: nothing in user.elf has this name.
#[cfg(variant_b)]
#[inline(never)]
pub fn b_only(seed: u32) -> u32 {
    leaf_loop!(seed, B_ITERS)
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

/// `int 0x80` with EAX = number, ECX and EDX = arguments; the result comes back in EAX.
#[inline(never)]
pub fn syscall(nr: u32, a: u32, b: u32) -> u32 {
    let r: u32;
    unsafe { asm!("int 0x80", inlateout("eax") nr => r, in("ecx") a, in("edx") b, options(nostack)) };
    r
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    syscall(SYS_EXIT, 101, 0);
    loop {}
}
