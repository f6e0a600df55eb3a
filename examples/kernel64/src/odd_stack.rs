//! `odd_stack=on`: the CPU workload in a thread whose stack starts at an odd address, as a
//! FreePascal unikernel starts every thread's (`top - 1`). x86 asks no alignment of a stack:
//! the thread's code runs as well there, and every frame pointer of its chain is odd, 8n+7
//! (`push rbp` at `top - 1 - 8 - 8`). A profiler must walk that chain to the thread's root,
//! `odd_thread_main` (called by `odd_thread_start` with RBP = 0), and see no kernel entry in
//! it: on x86_64 Linux an odd frame pointer is an encoded `pt_regs` pointer, which this
//! kernel is not (e2e/tests/odd_stack_top.rs).
//!
//! The thread's stack is 64 KiB of free RAM, identity-mapped by the boot page tables (the
//! first GiB), above the allocation phase's heaps (4 to 12 MiB, kernel_common::kalloc): no
//! new `.bss`, so the default run's instruction counts stay as measured. The workload is
//! integer code: nothing in it needs the 16-byte alignment the ABI promises at a call.

use core::arch::global_asm;

use kernel_common::console::Console;
use kernel_common::serial::Com1;

use crate::workload;

/// The thread's stack: `[STACK_BASE, STACK_TOP)`, its first push just below `STACK_TOP - 1`.
const STACK_BASE: u64 = 0x0100_0000;
const STACK_TOP: u64 = STACK_BASE + 0x1_0000;

global_asm!(
    r#"
    /* u64 odd_thread_start(u64 rounds, u64 top): runs odd_thread_main(rounds) on the stack
       whose first byte above is `top` (its stack pointer `top - 1`, odd), RBP = 0 there so
       that its frame chain ends at odd_thread_main; returns its result on the caller's
       stack. */
    .section .text.odd_thread_start, "ax"
    .global odd_thread_start
    .type odd_thread_start, @function
odd_thread_start:
    push rbp
    mov rbp, rsp
    push rbx
    push r12
    mov rbx, rsp                    /* the caller's stack, callee-saved across the thread */
    lea rsp, [rsi - 1]              /* the thread's stack: top - 1, as FreePascal's */
    xor ebp, ebp                    /* the thread's chain ends here */
    call odd_thread_main
    mov rsp, rbx
    pop r12
    pop rbx
    pop rbp
    ret
    .size odd_thread_start, . - odd_thread_start
    "#
);

extern "C" {
    fn odd_thread_start(rounds: u64, top: u64) -> u64;
}

/// The thread's root: the CPU workload, whose frames all lie on the odd stack (its result
/// through a barrier, so that the call is no tail call and this frame stays in the chain).
#[no_mangle]
#[inline(never)]
pub extern "C" fn odd_thread_main(rounds: u64) -> u64 {
    core::hint::black_box(workload::run_workload(rounds as u32))
}

/// Runs the CPU workload of `rounds` rounds in the odd-stack thread, after a line on COM1
/// (`odd_stack: stack pointer 0x…`, the thread's first); returns its checksum (the default
/// run's).
#[inline(never)]
pub fn run(rounds: u32, out: &mut Com1) -> u64 {
    out.str("odd_stack: stack pointer ");
    out.hex(STACK_TOP - 1);
    out.str("\n");
    unsafe { odd_thread_start(rounds as u64, STACK_TOP) }
}
