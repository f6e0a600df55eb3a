//! `user=on`: the user program (examples/kernel-common/user/main.rs, its own ELF, embedded without
//! debug info) runs in user mode (riscv64 U-mode / aarch64 EL0) and asks for work through
//! system calls (riscv64 `ecall`, aarch64 `svc #0`; number in a0/x0, arguments in a1-a2 /
//! x1-x2, result in a0/x0), as the i386 kernel's `int 0x80` (examples/kernel/src/user.rs):
//!
//! | nr | call | kernel side |
//! | 0 | `exit(code)` | back in `run`, which returns `code` |
//! | 1 | `work(seed, iters)` | `sys_work`: `iters` iterations of the leaf loop |
//! | 2 | `write(ptr, len)` | the user's bytes to the UART (checked to lie in the user area) |
//!
//! The arch's trap entry pushes a frame record of the user's frame pointer and PC before
//! calling `syscall_dispatch`, so a frame-pointer walk from `sys_work` goes on into the program.

use crate::arch::{USER_BASE, USER_STACK_TOP};
use crate::console::Console;
use kernel_common::console::Console as _;

const SYS_EXIT: usize = 0;
const SYS_WORK: usize = 1;
const SYS_WRITE: usize = 2;

static USER_ELF: &[u8] = include_bytes!(env!("KP_USER_ELF"));

#[inline(never)]
pub fn run(rounds: u32, out: &mut Console) -> u32 {
    let entry = crate::elf::load(USER_ELF, crate::arch::ELF_MACHINE, USER_BASE, USER_STACK_TOP - 0x1_0000);
    out.str("user: entering user mode at ");
    out.hex(entry as u64);
    out.str("\n");
    unsafe { crate::arch::enter_user(entry, USER_STACK_TOP, rounds as usize) as u32 }
}

/// Called by the arch's trap entry with the user's a0-a2 / x0-x2.
pub extern "C" fn syscall_dispatch(nr: usize, a: usize, b: usize) -> usize {
    let r = match nr {
        SYS_EXIT => unsafe { crate::arch::user_exit(a) },
        SYS_WORK => sys_work(b as u32, a as u32) as usize,
        SYS_WRITE => sys_write(a, b),
        _ => usize::MAX,
    };
    // A barrier after the calls: without it they become tail jumps, and the handlers'
    // stacks would lose this frame.
    opaque!(r as u32) as usize | (r & !0xFFFF_FFFF)
}

/// The kernel's share of a round: `iters` iterations of the leaf loop. Its arguments come
/// in the other order than smp::smp_shared's, whose body is the same: LLVM would otherwise
/// merge the two into one symbol.
#[inline(never)]
pub fn sys_work(iters: u32, seed: u32) -> u32 {
    leaf_loop!(seed, iters)
}

/// Writes the user's bytes `[ptr, ptr + len)` to the UART (the range must lie in the user area).
#[inline(never)]
fn sys_write(ptr: usize, len: usize) -> usize {
    if ptr < USER_BASE || ptr > USER_STACK_TOP || len > USER_STACK_TOP - ptr {
        return usize::MAX;
    }
    Console.bytes(unsafe { core::slice::from_raw_parts(ptr as *const u8, len) });
    len
}
