//! What is riscv64 about this kernel (QEMU `virt`, `-bios none`): the M-mode set-up a
//! firmware would do, then S-mode (the kernel) and U-mode (`user=on`, `ecall`); the ns16550a
//! UART, the SiFive test device (exit), semihosting, harts woken through the CLINT's
//! software interrupts.
//!
//! Every hart starts at `_start` in M-mode with a0 = its hart ID and a1 = the device tree,
//! opens memory to the lower modes (PMP), delegates exceptions to S-mode and drops to it
//! (`mret`). Hart 0 runs `kmain`; the others wait in M-mode `wfi` (software interrupt
//! enabled, never taken) until `start_cpu` sets their bit in AP_GO and raises their CLINT
//! MSIP, then enter S-mode at `ap_start`.
//!
//! `irq=on` (irq.rs): `irq_start` asks M-mode (`ecall`, taken by `m_trap`) for Sstc's
//! `stimecmp` and the supervisor timer interrupt, then points stvec at `isr_timer`, which
//! runs `timer_tick` on the interrupt stack (`__irq_stack_top`) and re-arms `stimecmp`.
//!
//! Frame records (LLVM, `-C force-frame-pointers=non-leaf`): s0 points just above the saved
//! pair, [s0 - 8] = return address, [s0 - 16] = the caller's s0. Leaves have none. Built
//! with `bare_entries` (--no-frame-pointers), `trap_vector` and `isr_timer` build none
//! either: a trap frame (below), s0 as the trapped code had it.

use super::park;
use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};

pub const NAME: &str = "riscv64";
pub const CAUSE_NAME: &str = "scause (mcause from M-mode)";
pub const ELF_MACHINE: u16 = 243; // EM_RISCV
pub const RAM_BASE: usize = 0x8000_0000;

const UART: usize = 0x1000_0000;
const TEST_DEVICE: usize = 0x10_0000;
const CLINT_MSIP: usize = 0x0200_0000;
/// The CLINT's `mtime`, and its rate: the `virt` board's timebase-frequency.
const CLINT_MTIME: usize = 0x0200_BFF8;
const TIMEBASE_HZ: usize = 10_000_000;

/// Bit n set: hart n may leave its boot wait and run `ap_main(n)`. In .data: _start clears .bss
/// on hart 0 while the others already poll it.
#[link_section = ".data"]
static AP_GO: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data"]
static mut SAVED_KSP: usize = 0;

// The supervisor trap stubs in pieces (as examples/kernel-common/src/x86/timer.rs): the
// frame-pointer builds' with a frame record, and, with `bare_entries` (the kernels without
// frame pointers), as riscv hobby kernels (xv6, rCore, ArceOS) write them: a trap frame on
// the stack and s0 left as the trapped code had it. The trap frame, 34 words: x<n> at 8 * n
// (x2's slot: the trapped sp; x0's unused), sepc at 256, sstatus at 264.
macro_rules! TRAP_ENTRY {
    () => {
        r#"
    /* Supervisor traps. sscratch is 0 in the kernel and the system-call stack's top in
       U-mode. */
    .section .text.trap_vector, "ax"
    .balign 4
    .global trap_vector
    .type trap_vector, @function
trap_vector:
    csrrw sp, sscratch, sp
    beqz sp, 7f
"#
    };
}
#[cfg(not(bare_entries))]
macro_rules! SYSCALL {
    () => {
        r#"
    /* From U-mode: a frame record (user s0, user pc) (plus the user's sp and ra), so that
       a walk from the handlers goes on into the program. */
    addi sp, sp, -32
    sd ra, 0(sp)
    csrr t0, sscratch
    sd t0, 8(sp)
    sd s0, 16(sp)
    csrr t0, sepc
    sd t0, 24(sp)
    addi s0, sp, 32
    csrr t0, scause
    /* environment call from U-mode */
    li t1, 8
    bne t0, t1, 8f
    call {dispatch}
    ld t0, 24(sp)
    addi t0, t0, 4
    csrw sepc, t0
    ld ra, 0(sp)
    ld s0, 16(sp)
    addi t0, sp, 32
    csrw sscratch, t0
    ld sp, 8(sp)
    sret
"#
    };
}
#[cfg(bare_entries)]
macro_rules! SYSCALL {
    () => {
        r#"
    /* From U-mode: every general register into the trap frame, the user's sp (in sscratch
       since the swap), sepc and sstatus after them; a0-a2 go on to the dispatcher as the
       program passed them. */
    addi sp, sp, -272
    .irp r, 1,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    sd x\r, \r*8(sp)
    .endr
    csrr t0, sscratch
    sd t0, 16(sp)
    csrr t0, sepc
    csrr t1, sstatus
    sd t0, 256(sp)
    sd t1, 264(sp)
    csrr t0, scause
    /* environment call from U-mode */
    li t1, 8
    bne t0, t1, 8f
    call {dispatch}
    /* back past the ecall with its result in a0, every other register as it came; the
       user's sp through sscratch, which keeps the stack's top again */
    ld t0, 256(sp)
    addi t0, t0, 4
    csrw sepc, t0
    ld t0, 16(sp)
    csrw sscratch, t0
    .irp r, 1,3,4,5,6,7,8,9,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    ld x\r, \r*8(sp)
    .endr
    addi sp, sp, 272
    csrrw sp, sscratch, sp
    sret
"#
    };
}
macro_rules! TRAP_REPORT {
    () => {
        r#"
    /* from S-mode: back to the kernel's sp */
7:  csrrw sp, sscratch, sp
8:  csrr a0, scause
    csrr a1, sepc
    csrr a2, stval
    call {report}
    .size trap_vector, . - trap_vector
"#
    };
}
macro_rules! ISR_ENTRY {
    () => {
        r#"
    /* irq=on's supervisor trap vector (stvec while irq.rs runs the workload): the timer
       interrupt of kernel code, on the 16 KiB interrupt stack below __irq_stack_top (above
       every other stack). sscratch (0 in the kernel) keeps the interrupted sp meanwhile.
       Then the caller-saved registers, timer_tick, the next deadline; anything but the
       timer goes to trap_vector's report as it came. */
    .section .text.isr_timer, "ax"
    .balign 4
    .global isr_timer
    .type isr_timer, @function
isr_timer:
    csrw sscratch, sp
    la sp, __irq_stack_top
"#
    };
}
macro_rules! REARM {
    () => {
        r#"
    /* re-arm: stimecmp = mtime (the CLINT's) + one period, from the handler's end (never
       due again at once, however slow the host); this also clears the pending interrupt */
    li t0, {mtime}
    ld t0, 0(t0)
    li t1, {period}
    add t0, t0, t1
    /* stimecmp */
    csrw 0x14d, t0
"#
    };
}
#[cfg(not(bare_entries))]
macro_rules! ISR_BODY {
    () => {
        concat!(
            r#"
    /* The top of the interrupt stack holds the frame record (interrupted s0, sepc): s0
       points just above it, so a walk from timer_tick comes here and leads down into the
       interrupted stack. */
    addi sp, sp, -160
    sd s0, 144(sp)
    sd t0, 0(sp)
    csrr t0, sepc
    sd t0, 152(sp)
    addi s0, sp, 160
    csrr t0, sscratch
    sd t0, 8(sp)
    csrw sscratch, zero
    /* scause: interrupt 5, the supervisor timer */
    csrr t0, scause
    bgez t0, 1f
    addi t0, t0, -5
    slli t0, t0, 1
    bnez t0, 1f
    sd ra, 16(sp)
    sd t1, 24(sp)
    sd t2, 32(sp)
    sd t3, 40(sp)
    sd t4, 48(sp)
    sd t5, 56(sp)
    sd t6, 64(sp)
    sd a0, 72(sp)
    sd a1, 80(sp)
    sd a2, 88(sp)
    sd a3, 96(sp)
    sd a4, 104(sp)
    sd a5, 112(sp)
    sd a6, 120(sp)
    sd a7, 128(sp)
    call {tick}
"#,
            REARM!(),
            r#"
    ld ra, 16(sp)
    ld t1, 24(sp)
    ld t2, 32(sp)
    ld t3, 40(sp)
    ld t4, 48(sp)
    ld t5, 56(sp)
    ld t6, 64(sp)
    ld a0, 72(sp)
    ld a1, 80(sp)
    ld a2, 88(sp)
    ld a3, 96(sp)
    ld a4, 104(sp)
    ld a5, 112(sp)
    ld a6, 120(sp)
    ld a7, 128(sp)
    ld t0, 0(sp)
    ld s0, 144(sp)
    ld sp, 8(sp)
    sret
1:  ld t0, 0(sp)
    ld s0, 144(sp)
    ld sp, 8(sp)
    j trap_vector
"#
        )
    };
}
#[cfg(bare_entries)]
macro_rules! ISR_BODY {
    () => {
        concat!(
            r#"
    /* A trap frame at the top of the interrupt stack: ra, t0-t2, s0, a0-a7, t3-t6, the
       interrupted sp (from sscratch, 0 again), sepc and sstatus. */
    addi sp, sp, -272
    .irp r, 1,5,6,7,8,10,11,12,13,14,15,16,17,28,29,30,31
    sd x\r, \r*8(sp)
    .endr
    csrr t0, sscratch
    sd t0, 16(sp)
    csrw sscratch, zero
    csrr t0, sepc
    csrr t1, sstatus
    sd t0, 256(sp)
    sd t1, 264(sp)
    /* scause: interrupt 5, the supervisor timer */
    csrr t0, scause
    bgez t0, 1f
    addi t0, t0, -5
    slli t0, t0, 1
    bnez t0, 1f
    call {tick}
"#,
            REARM!(),
            r#"
    .irp r, 1,5,6,7,8,10,11,12,13,14,15,16,17,28,29,30,31
    ld x\r, \r*8(sp)
    .endr
    ld sp, 16(sp)
    sret
    /* t0 and t1 are the only registers changed */
1:  ld t0, 40(sp)
    ld t1, 48(sp)
    ld sp, 16(sp)
    j trap_vector
"#
        )
    };
}
macro_rules! ISR_EXIT {
    () => {
        "    .size isr_timer, . - isr_timer"
    };
}

global_asm!(
    r#"
    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    /* Machine mode, every hart (a0 = hart ID, a1 = device tree): what firmware would do.
       PMP entry 0 opens all memory to S- and U-mode (NAPOT over everything); exceptions
       go to S-mode (medeleg: misaligned/access faults, illegal instruction, breakpoint,
       ecall from U, page faults), the supervisor software interrupt is delegated (the boot
       hart's wake-up, see m_trap); mstatus.FS = initial (LLVM may use FP registers). */
    csrw mie, zero
    la t0, m_trap
    csrw mtvec, t0
    li t0, -1
    csrw pmpaddr0, t0
    li t0, 0x1f
    csrw pmpcfg0, t0
    li t0, 0xb1ff
    csrw medeleg, t0
    li t0, 2
    csrw mideleg, t0
    csrw satp, zero
    li t0, 0x2000
    csrs mstatus, t0
    li t0, 0x1800
    csrc mstatus, t0
    li t0, 0x800
    /* mstatus.MPP = S */
    csrs mstatus, t0
    la t0, trap_vector
    csrw stvec, t0
    csrw sscratch, zero
    /* fp = 0 and ra = 0 end every frame-pointer walk. */
    li s0, 0
    li ra, 0
    bnez a0, 2f
    /* Hart 0: M-mode software interrupts on (secondaries wake it, m_trap passes that on
       as a supervisor software interrupt), then S-mode. */
    li t0, 8
    csrw mie, t0
    la t0, 1f
    csrw mepc, t0
    mret
1:  li t0, 2
    /* sie.SSIE: wfi wakes on SSIP (sstatus.SIE stays 0: never taken as a trap) */
    csrw sie, t0
    la sp, __stack_top
    la t0, __bss_start
    la t1, __bss_end
3:  bgeu t0, t1, 4f
    sd zero, 0(t0)
    addi t0, t0, 8
    j 3b
4:  mv a0, a1
    call kmain
    j park

    /* Harts 1..3: their own 16 KiB stack, wait in M-mode (wfi on MSIP) for AP_GO, then
       S-mode at ap_start. */
2:  li t0, 4
    bgeu a0, t0, park
    la sp, __ap_stacks_bottom
    slli t0, a0, 14
    add sp, sp, t0
    li t0, 8
    csrw mie, t0
5:  wfi
    la t0, {ap_go}
    lw t1, 0(t0)
    srl t1, t1, a0
    andi t1, t1, 1
    beqz t1, 5b
    /* clear this hart's MSIP */
    li t0, 0x2000000
    slli t1, a0, 2
    add t0, t0, t1
    sw zero, 0(t0)
    csrw mie, zero
    la t0, ap_start
    csrw mepc, t0
    mret
    .size _start, . - _start

    /* A function of its own, so that the secondaries' stacks end in it (a label inside
       _start's size would be named _start). */
    .global ap_start
    .type ap_start, @function
ap_start:
    call {ap_main}
park:
    wfi
    j park
    .size ap_start, . - ap_start

    /* Machine-mode traps. Only the boot hart takes interrupts here: its MSIP, raised by a
       secondary that is done, becomes a pending supervisor software interrupt (SSIP) that
       its S-mode wfi wakes on. Anything else is an exception in M-mode: reported. */
    .section .text.m_trap, "ax"
    .balign 4
m_trap:
    csrw mscratch, t0
    csrr t0, mcause
    bgez t0, 6f
    li t0, 0x2000000
    sw zero, 0(t0)
    csrsi mip, 2
    csrr t0, mscratch
    mret
    /* An environment call from S-mode: the kernel's one request, irq.rs's timer (irq_start).
       As a firmware would (OpenSBI with Sstc), give S-mode its own timer: menvcfg.STCE
       (stimecmp), mcounteren.TM (which stimecmp needs too), the supervisor timer interrupt
       delegated (mideleg.STI). */
6:  addi t0, t0, -9
    bnez t0, 9f
    li t0, 1
    slli t0, t0, 63
    /* menvcfg */
    csrs 0x30a, t0
    csrsi mcounteren, 2
    li t0, 0x20
    csrs mideleg, t0
    csrr t0, mepc
    addi t0, t0, 4
    csrw mepc, t0
    csrr t0, mscratch
    mret
9:  csrr a0, mcause
    csrr a1, mepc
    csrr a2, mtval
    call {report}

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

    "#,
    TRAP_ENTRY!(),
    SYSCALL!(),
    TRAP_REPORT!(),
    ISR_ENTRY!(),
    ISR_BODY!(),
    ISR_EXIT!(),
    r#"
    /* enter_user(entry, user sp, arg) -> exit code: saves the kernel's callee-saved
       registers and srets to U-mode, the classic way (xv6, V6 Unix): ra = a fake return
       address of all ones, s0 left as the kernel had it (its caller's frame pointer, on the
       boot stack), so the program's first frame record holds garbage a walk must not
       follow. */
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
    la t0, __syscall_stack_top
    csrw sscratch, t0
    csrw sepc, a0
    /* sstatus.SPP = U */
    li t0, 0x100
    csrc sstatus, t0
    mv sp, a1
    mv a0, a2
    li ra, -1
    sret

    /* user_exit(code): back to enter_user's caller, returning code. */
    .global user_exit
user_exit:
    csrw sscratch, zero
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
    tick = sym kernel_common::tick::timer_tick,
    mtime = const CLINT_MTIME,
    period = const TIMEBASE_HZ / crate::irq::HZ as usize,
);

extern "C" {
    fn isr_timer();
    fn trap_vector();
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
    park()
}

/// The test device needs no semihosting.
pub fn exit_without_semihosting(code: u32) -> ! {
    exit(code)
}

pub fn fault() -> ! {
    unsafe { asm!("unimp", options(noreturn)) }
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
/// calls): m_trap turns the signal into a pending SSIP, which stays pending (sstatus.SIE is
/// 0) and makes wfi return at once if it came since the check.
pub fn wait_event() {
    unsafe { asm!("wfi", "csrci sip, 2", options(nomem, nostack)) };
}

pub fn signal_event() {
    unsafe { msip(0).write_volatile(1) };
}

/// irq=on: the supervisor timer interrupt every `TIMEBASE_HZ / hz` ticks of `mtime`, taken
/// by `isr_timer`. M-mode (m_trap, asked through `ecall`) opens `stimecmp` to S-mode and
/// delegates the interrupt; then stvec, the first deadline, sie.STIE and sstatus.SIE.
pub fn irq_start(hz: u32) {
    let period = TIMEBASE_HZ / hz as usize;
    unsafe {
        asm!("ecall", options(nostack));
        asm!("csrw stvec, {}", in(reg) isr_timer as usize, options(nostack));
        let now = (CLINT_MTIME as *const u64).read_volatile();
        asm!("csrw 0x14d, {}", in(reg) now + period as u64, options(nostack));
        asm!("csrs sie, {}", "csrsi sstatus, 2", in(reg) 0x20usize, options(nostack));
    }
}

/// Ends irq_start's interrupts: sstatus.SIE and sie.STIE off, no deadline, trap_vector back.
pub fn irq_stop() {
    unsafe {
        asm!("csrci sstatus, 2", "csrc sie, {}", in(reg) 0x20usize, options(nostack));
        asm!("csrw 0x14d, {}", in(reg) u64::MAX, options(nostack));
        asm!("csrw stvec, {}", in(reg) trap_vector as usize, options(nostack));
    }
}
