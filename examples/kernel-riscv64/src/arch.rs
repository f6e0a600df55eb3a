//! What is riscv64 about this kernel (QEMU `virt`, `-bios none`): boot in M-mode, the
//! ns16550a UART, the SiFive test device (exit), semihosting, harts woken through the CLINT's
//! software interrupts, U-mode for `user=on` and its `ecall` entry.
//!
//! Every hart starts at `_start` with a0 = its hart ID and a1 = the device tree. Hart 0 runs
//! `kmain`; the others wait in `wfi` (M-mode software interrupt enabled, delivered to none)
//! until `start_cpu` sets their bit in AP_GO and raises their CLINT MSIP.
//!
//! Frame records (LLVM, `-C force-frame-pointers=non-leaf`): s0 points just above the saved
//! pair, [s0 - 8] = return address, [s0 - 16] = the caller's s0. Leaves have none.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};

pub const NAME: &str = "riscv64";
pub const CAUSE_NAME: &str = "mcause";
pub const ELF_MACHINE: u16 = 243; // EM_RISCV
pub const RAM_BASE: usize = 0x8000_0000;
/// The user program's area: linked at RAM + 64 MiB (user/linker.ld), stack top RAM + 80 MiB.
pub const USER_BASE: usize = RAM_BASE + 0x0400_0000;
pub const USER_STACK_TOP: usize = RAM_BASE + 0x0500_0000;
/// memtrace's walk: the record is at fp - 16, [0] the caller's fp, [1] the return address.
pub const FP_RECORD_OFFSET: isize = -16;
pub const FP_NEXT_SLOT: usize = 0;
pub const FP_RET_SLOT: usize = 1;
pub const SYS_OPEN: usize = 0x01;
pub const SYS_WRITE: usize = 0x05;

const UART: usize = 0x1000_0000;
const TEST_DEVICE: usize = 0x10_0000;
const CLINT_MSIP: usize = 0x0200_0000;

/// Bit n set: hart n may leave its boot wait and run `ap_main(n)`. In .data: _start clears .bss
/// on hart 0 while the others already poll it.
#[link_section = ".data"]
static AP_GO: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data"]
static mut SAVED_KSP: usize = 0;

global_asm!(
    r#"
    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    csrw mie, zero
    la t0, trap_vector
    csrw mtvec, t0
    /* mstatus.FS = initial: LLVM may use FP registers */
    li t0, 0x2000
    csrs mstatus, t0
    /* fp = 0 and ra = 0 end every frame-pointer walk */
    li s0, 0
    li ra, 0
    bnez a0, 2f
    la sp, __stack_top
    la t0, __bss_start
    la t1, __bss_end
1:  bgeu t0, t1, 3f
    sd zero, 0(t0)
    addi t0, t0, 8
    j 1b
3:  mv a0, a1
    call kmain
    j park

    /* Harts 1..3: their own 16 KiB stack, then wait for AP_GO. */
2:  li t0, 4
    bgeu a0, t0, park
    la sp, __ap_stacks_bottom
    slli t0, a0, 14
    add sp, sp, t0
    /* mie.MSIE: wfi wakes on this hart's MSIP */
    li t0, 8
    csrw mie, t0
4:  wfi
    la t0, {ap_go}
    lw t1, 0(t0)
    srl t1, t1, a0
    andi t1, t1, 1
    beqz t1, 4b
    /* clear this hart's MSIP */
    li t0, 0x2000000
    slli t1, a0, 2
    add t0, t0, t1
    sw zero, 0(t0)
    .global ap_start
ap_start:
    call {ap_main}
park:
    csrw mie, zero
5:  wfi
    j 5b
    .size _start, . - _start

    /* Semihosting: the magic sequence, uncompressed and within one page. */
    .section .text.semihost_call, "ax"
    .balign 16
    .global semihost_call
semihost_call:
    .option push
    .option norvc
    slli zero, zero, 0x1f
    ebreak
    srai zero, zero, 7
    .option pop
    ret
    .global semihost_call_end
semihost_call_end:

    /* Traps. mscratch is 0 in the kernel and the system-call stack's top in U-mode. */
    .section .text.trap_vector, "ax"
    .balign 4
    .global trap_vector
trap_vector:
    csrrw sp, mscratch, sp
    beqz sp, 6f
    /* From U-mode: a frame record (user s0, user pc) (plus the user's sp and ra), so that
       a walk from the handlers goes on into the program. */
    addi sp, sp, -32
    sd ra, 0(sp)
    csrr t0, mscratch
    sd t0, 8(sp)
    sd s0, 16(sp)
    csrr t0, mepc
    sd t0, 24(sp)
    addi s0, sp, 32
    csrr t0, mcause
    /* environment call from U-mode */
    li t1, 8
    bne t0, t1, 7f
    call {dispatch}
    ld t0, 24(sp)
    addi t0, t0, 4
    csrw mepc, t0
    ld ra, 0(sp)
    ld s0, 16(sp)
    addi t0, sp, 32
    csrw mscratch, t0
    ld sp, 8(sp)
    mret
    /* from M-mode: back to the kernel's sp */
6:  csrrw sp, mscratch, sp
7:  csrr a0, mcause
    csrr a1, mepc
    csrr a2, mtval
    call {report}
    .size trap_vector, . - trap_vector

    /* enter_user(entry, user sp, arg) -> exit code: saves the kernel's callee-saved
       registers, opens all memory to U-mode (PMP entry 0, NAPOT over everything) and mrets. */
    .section .text.enter_user, "ax"
    .global enter_user
enter_user:
    addi sp, sp, -112
    sd ra, 0(sp)
    sd s0, 8(sp)
    sd s1, 16(sp)
    sd s2, 24(sp)
    sd s3, 32(sp)
    sd s4, 40(sp)
    sd s5, 48(sp)
    sd s6, 56(sp)
    sd s7, 64(sp)
    sd s8, 72(sp)
    sd s9, 80(sp)
    sd s10, 88(sp)
    sd s11, 96(sp)
    la t0, {saved_ksp}
    sd sp, 0(t0)
    li t0, -1
    csrw pmpaddr0, t0
    li t0, 0x1f
    csrw pmpcfg0, t0
    la t0, __syscall_stack_top
    csrw mscratch, t0
    csrw mepc, a0
    /* mstatus.MPP = U */
    li t0, 0x1800
    csrc mstatus, t0
    mv sp, a1
    mv a0, a2
    li s0, 0
    li ra, 0
    mret

    /* user_exit(code): back to enter_user's caller, returning code. */
    .global user_exit
user_exit:
    csrw mscratch, zero
    la t0, {saved_ksp}
    ld sp, 0(t0)
    ld ra, 0(sp)
    ld s0, 8(sp)
    ld s1, 16(sp)
    ld s2, 24(sp)
    ld s3, 32(sp)
    ld s4, 40(sp)
    ld s5, 48(sp)
    ld s6, 56(sp)
    ld s7, 64(sp)
    ld s8, 72(sp)
    ld s9, 80(sp)
    ld s10, 88(sp)
    ld s11, 96(sp)
    addi sp, sp, 112
    ret
    "#,
    ap_go = sym AP_GO,
    ap_main = sym crate::smp::ap_main,
    dispatch = sym crate::user::syscall_dispatch,
    report = sym crate::kmain::trap_report,
    saved_ksp = sym SAVED_KSP,
);

extern "C" {
    fn semihost_call(op: usize, param: usize) -> isize;
    static semihost_call_end: u8;
    pub fn enter_user(entry: usize, sp: usize, arg: usize) -> usize;
    pub fn user_exit(code: usize) -> !;
}

pub fn init() {}

pub fn putc(b: u8) {
    unsafe {
        while (UART as *const u8).add(5).read_volatile() & 0x20 == 0 {}
        (UART as *mut u8).write_volatile(b);
    }
}

/// Ends QEMU through the SiFive test device: 0x5555 is a pass (status 0), anything else
/// `(code << 16) | 0x3333` (status `code`).
pub fn exit(code: u32) -> ! {
    let v = if code == 0 { 0x5555 } else { (code << 16) | 0x3333 };
    unsafe { (TEST_DEVICE as *mut u32).write_volatile(v) };
    loop {
        unsafe { asm!("wfi") };
    }
}

/// The test device needs no semihosting.
pub fn exit_without_semihosting(code: u32) -> ! {
    exit(code)
}

pub fn fault() -> ! {
    unsafe { asm!("unimp", options(noreturn)) }
}

pub fn semihost(op: usize, param: usize) -> isize {
    unsafe { semihost_call(op, param) }
}

pub fn in_semihosting(pc: usize) -> bool {
    let start = semihost_call as usize;
    (start..unsafe { &semihost_call_end as *const u8 as usize }).contains(&pc)
}

#[inline(always)]
pub fn frame_pointer() -> usize {
    let fp: usize;
    unsafe { asm!("mv {}, s0", out(reg) fp, options(nomem, nostack, preserves_flags)) };
    fp
}

fn msip(hart: u32) -> *mut u32 {
    (CLINT_MSIP + 4 * hart as usize) as *mut u32
}

/// Lets hart `id` leave its boot wait (it then runs `smp::ap_main(id)`).
pub fn start_cpu(id: u32) -> bool {
    AP_GO.fetch_or(1 << id, Ordering::Release);
    unsafe { msip(id).write_volatile(1) };
    true
}

/// The boot hart's sleep until a secondary signals (smp::run checks its condition between
/// calls): a signal raised since the check is still pending, so wfi returns at once.
pub fn wait_event() {
    unsafe {
        asm!("csrs mie, {}", "wfi", in(reg) 8usize, options(nomem, nostack));
        msip(0).write_volatile(0);
    }
}

pub fn signal_event() {
    unsafe { msip(0).write_volatile(1) };
}

pub fn park() -> ! {
    unsafe {
        asm!("csrw mie, zero");
        loop {
            asm!("wfi");
        }
    }
}
