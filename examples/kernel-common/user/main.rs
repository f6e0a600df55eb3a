//! The example kernels' user program (`user=on`), one source for i386 and x86_64 (ring 3,
//! `int 0x80`), riscv64 (U-mode, `ecall`) and aarch64 (EL0, `svc #0`): an ELF of its own,
//! linked by the kernel's user/linker.ld (i386: examples/kernel/user/linker.ld, x86_64:
//! examples/kernel64/user/linker.ld, both at 64 MiB; virt: examples/kernel-ARCH/user/linker.ld,
//! at RAM + 64 MiB), that computes in `user_hot` and
//! `user_cold` and asks the kernel for work through a system call, `rounds` times:
//!
//! ```text
//! _start                      (assembly; its frame record holds the kernel's frame
//!                             pointer and the fake return address of all ones: the
//!                             classic start)
//! └─ user_main
//!    └─ user::run             loop over `rounds` (EAX / RDI / a0 / x0 at entry)
//!       └─ user::round        once per round
//!          ├─ user::user_hot  HOT_ITERS iterations of the leaf loop       (user time)
//!          ├─ user::user_cold COLD_ITERS iterations                       (user time)
//!          └─ user::syscall   work(seed, KERNEL_ITERS): the kernel's sys_work runs
//!                             KERNEL_ITERS iterations (kernel time)
//! ```
//!
//! then writes its checksum (`write`) and calls `exit(0)`. The loop body is the kernels'
//! (`leaf_loop!`, examples/kernel-common/src/macros.rs), so the split is known by
//! construction: 6,000 iterations of user code to 4,000 of kernel code a round, plus the few
//! instructions of each call (measured exactly: each kernel's expected.toml, `[user]`).
//!
//! Built by scripts/guests/build-kernel*.sh with the kernel's flags (frame pointers, DWARF).
//!
//! i386 builds it again with `--cfg variant_b` into target/examples/user-b.elf (`procs=on`:
//! two programs linked at the same addresses, each in its own address space): that
//! variant's `round` first calls `b_only`, a function only it has (B_ITERS iterations), which
//! also moves every function after it to other addresses.

#![no_std]
#![no_main]
// leaf_loop!'s barriers name a u32 register `{0}`, only in an assembler comment: on x86_64 its
// 64-bit name is as good.
#![cfg_attr(target_arch = "x86_64", allow(asm_sub_register))]

use core::arch::{asm, global_asm};

// opaque! and leaf_loop!: kernel_common's, compiled into this crate (linking kernel_common
// would put its unwind tables into the i386 program's image).
#[macro_use]
#[path = "../src/macros.rs"]
mod macros;

pub const HOT_ITERS: u32 = 5_000;
pub const COLD_ITERS: u32 = 1_000;
pub const KERNEL_ITERS: u32 = 4_000;
/// Iterations of `b_only` a round (variant B only).
#[cfg(variant_b)]
pub const B_ITERS: u32 = 3_000;

const SYS_EXIT: usize = 0;
const SYS_WORK: usize = 1;
const SYS_WRITE: usize = 2;

#[cfg(target_arch = "x86")]
macro_rules! START {
    () => {
        r#"
    push ebp                        /* the kernel's EBP */
    mov ebp, esp                    /* and the fake return address 0xffffffff */
    and esp, -16
    sub esp, 12
    push eax                        /* rounds */
    call user_main
    ud2
"#
    };
}
#[cfg(target_arch = "x86_64")]
macro_rules! START {
    () => {
        r#"
    push rbp                        /* the kernel's RBP */
    mov rbp, rsp                    /* and the fake return address of all ones */
    and rsp, -16
    /* rounds = RDI; RSI = 1: system calls by SYSCALL */
    call user_main
    ud2
"#
    };
}
#[cfg(target_arch = "riscv64")]
macro_rules! START {
    () => {
        r#"
    addi sp, sp, -16
    sd ra, 8(sp)
    sd s0, 0(sp)
    addi s0, sp, 16
    /* rounds = a0 */
    call user_main
    unimp
"#
    };
}
#[cfg(target_arch = "aarch64")]
macro_rules! START {
    () => {
        r#"
    stp x29, x30, [sp, #-16]!
    mov x29, sp
    /* rounds = x0 */
    bl user_main
    udf #0
"#
    };
}
// `_start` makes a frame record, as a C main does, of the kernel's frame pointer and the fake
// return address, then calls user_main(rounds).
global_asm!(
    ".section .text._start, \"ax\"",
    ".global _start",
    ".type _start, @function",
    "_start:",
    START!(),
    ".size _start, . - _start",
);

/// x86_64: the system calls by the `SYSCALL` instruction rather than `int 0x80` (the
/// kernel's `syscall=on`).
#[cfg(target_arch = "x86_64")]
static SYSCALL_INSTR: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

#[no_mangle]
pub extern "C" fn user_main(rounds: u32, #[cfg(target_arch = "x86_64")] instr: usize) -> ! {
    #[cfg(target_arch = "x86_64")]
    SYSCALL_INSTR.store(instr == 1, core::sync::atomic::Ordering::Relaxed);
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
    #[cfg(variant_b)]
    let seed = b_only(seed);
    let a = user_hot(seed);
    let b = user_cold(a);
    opaque!(syscall(SYS_WORK, b as usize, KERNEL_ITERS as usize) as u32)
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

/// The system call: number and two arguments in registers (i386: EAX, ECX, EDX; x86_64:
/// RAX, RDI, RSI, by `int 0x80` or `SYSCALL`; riscv64: a0-a2; aarch64: x0-x2), the result
/// in the first. The x86 kernels
/// preserve every other general register; on the virt boards the kernel may clobber what
/// the C ABI lets a call clobber.
#[inline(never)]
pub fn syscall(nr: usize, a: usize, b: usize) -> usize {
    let r: usize;
    #[cfg(target_arch = "x86")]
    unsafe {
        asm!("int 0x80", inlateout("eax") nr => r, in("ecx") a, in("edx") b, options(nostack))
    };
    #[cfg(target_arch = "x86_64")]
    unsafe {
        if SYSCALL_INSTR.load(core::sync::atomic::Ordering::Relaxed) {
            asm!("syscall", inlateout("rax") nr => r, in("rdi") a, in("rsi") b, out("rcx") _, out("r11") _, options(nostack))
        } else {
            asm!("int 0x80", inlateout("rax") nr => r, in("rdi") a, in("rsi") b, options(nostack))
        }
    };
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
