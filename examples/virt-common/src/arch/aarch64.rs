//! What is aarch64 about this kernel (QEMU `virt`, `-cpu cortex-a57`, entered at EL1 with the
//! MMU off): the PL011 UART, semihosting (exit status, memtrace), PSCI `CPU_ON` through `hvc`
//! for the secondary CPUs, EL0 for `user=on` and its `svc` entry, and `irq=on`'s virtual
//! timer (PPI 27) through the GICv2, taken by `isr_timer` on the interrupt stack (irq.rs).
//!
//! QEMU starts only CPU 0 at `_start` (the others stay off until `CPU_ON`) and, for an ELF
//! that is not Linux, puts the device tree at the start of RAM: the kernel is linked 2 MiB
//! above it. With the MMU off every data access is Device memory: the target
//! (aarch64-unknown-none) is `+strict-align`, so nothing relies on unaligned accesses.
//!
//! Frame records (LLVM, `-C force-frame-pointers=non-leaf`): x29 points to the pair
//! {saved x29, saved x30}. Leaves have none. Built with `bare_entries`
//! (--no-frame-pointers), `svc_entry` and `isr_timer` build none either: a trap frame
//! (below), x29 as the trapped code had it.

use super::park;
use core::arch::{asm, global_asm};

pub const NAME: &str = "aarch64";
pub const CAUSE_NAME: &str = "ESR_EL1";
pub const ELF_MACHINE: u16 = 183; // EM_AARCH64
pub const RAM_BASE: usize = 0x4000_0000;
const SYS_EXIT: usize = 0x18;
const ADP_STOPPED_APPLICATION_EXIT: usize = 0x20026;

/// The device tree, where QEMU puts it for a non-Linux ELF.
pub const DTB: usize = RAM_BASE;
const UART: usize = 0x0900_0000;
const PSCI_CPU_ON: usize = 0xC400_0003;
/// The `virt` board's GICv2: distributor and CPU interface; the virtual timer's PPI.
const GICD: usize = 0x0800_0000;
const GICC: usize = 0x0801_0000;
const TIMER_PPI: usize = 27;

#[link_section = ".data"]
static mut SAVED_KSP: usize = 0;

// The exception stubs in pieces (as examples/kernel-common/src/x86/timer.rs): the
// frame-pointer builds' with a frame record, and, with `bare_entries` (the kernels without
// frame pointers), as aarch64 hobby kernels (ArceOS, the Raspberry Pi tutorials) write them: a
// trap frame on the stack and x29 left as the trapped code had it. The trap frame, 34 words:
// x<n> at 8 * n (n = 0..30), the trapped sp at 248 (svc: SP_EL0, the program's), ELR_EL1 at
// 256, SPSR_EL1 at 264.
macro_rules! SVC_ENTRY {
    () => {
        r#"
    .global svc_entry
    .type svc_entry, @function
svc_entry:
    mrs x9, esr_el1
    lsr x9, x9, #26
    /* EC 0x15: SVC from AArch64 */
    cmp x9, #0x15
    b.ne fault_entry
"#
    };
}
#[cfg(not(bare_entries))]
macro_rules! SVC_BODY {
    () => {
        r#"
    /* A frame record (user x29, user pc) (plus the user's x30), so that a walk from the
       handlers goes on into the program. SP_EL1 is the system-call stack here. */
    sub sp, sp, #32
    mrs x9, elr_el1
    stp x29, x9, [sp]
    str x30, [sp, #16]
    mov x29, sp
    bl {dispatch}
    ldr x30, [sp, #16]
    ldr x29, [sp]
    add sp, sp, #32
    eret
"#
    };
}
#[cfg(bare_entries)]
macro_rules! SVC_BODY {
    () => {
        r#"
    /* Every general register into the trap frame on the system-call stack (SP_EL1; x9
       holds the exception class by now), then SP_EL0, ELR_EL1, SPSR_EL1; x0-x2 go on to
       the dispatcher as the program passed them. */
    sub sp, sp, #272
    stp x0, x1, [sp]
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    stp x8, x9, [sp, #64]
    stp x10, x11, [sp, #80]
    stp x12, x13, [sp, #96]
    stp x14, x15, [sp, #112]
    stp x16, x17, [sp, #128]
    stp x18, x19, [sp, #144]
    stp x20, x21, [sp, #160]
    stp x22, x23, [sp, #176]
    stp x24, x25, [sp, #192]
    stp x26, x27, [sp, #208]
    stp x28, x29, [sp, #224]
    mrs x9, sp_el0
    stp x30, x9, [sp, #240]
    mrs x10, elr_el1
    mrs x11, spsr_el1
    stp x10, x11, [sp, #256]
    bl {dispatch}
    /* the result in x0, every other register as it came (ELR_EL1 already points past the
       svc) */
    ldr x1, [sp, #8]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldp x8, x9, [sp, #64]
    ldp x10, x11, [sp, #80]
    ldp x12, x13, [sp, #96]
    ldp x14, x15, [sp, #112]
    ldp x16, x17, [sp, #128]
    ldp x18, x19, [sp, #144]
    ldp x20, x21, [sp, #160]
    ldp x22, x23, [sp, #176]
    ldp x24, x25, [sp, #192]
    ldp x26, x27, [sp, #208]
    ldp x28, x29, [sp, #224]
    ldr x30, [sp, #240]
    add sp, sp, #272
    eret
"#
    };
}
macro_rules! SVC_EXIT {
    () => {
        "    .size svc_entry, . - svc_entry"
    };
}
macro_rules! ISR_ENTRY {
    () => {
        r#"
    /* irq=on's timer interrupt of kernel code (irq.rs): on the 16 KiB interrupt stack below
       __irq_stack_top (above every other stack); x0 and x1 are on the interrupted stack,
       under its sp (the kernel has no red zone), x1 = where. Acknowledges the GIC, calls
       timer_tick, re-arms the virtual timer (one period from now), ends the interrupt. */
    .section .text.isr_timer, "ax"
    .global isr_timer
    .type isr_timer, @function
isr_timer:
    stp x0, x1, [sp, #-16]!
    mov x1, sp
    adrp x0, __irq_stack_top
    add x0, x0, :lo12:__irq_stack_top
"#
    };
}
macro_rules! REARM {
    () => {
        r#"
    /* CNTV_TVAL_EL0 = CNTFRQ_EL0 / HZ: the next deadline, from the handler's end (never due
       again at once, however slow the host), and the line drops */
    mrs x11, cntfrq_el0
    mov x12, #{hz}
    udiv x11, x11, x12
    msr cntv_tval_el0, x11
    isb
"#
    };
}
#[cfg(not(bare_entries))]
macro_rules! ISR_BODY {
    () => {
        concat!(
            r#"
    /* The top of the interrupt stack holds the frame record (interrupted x29, ELR_EL1),
       x29 pointing at it, so that a walk from timer_tick comes here and leads down into the
       interrupted stack; below it the caller-saved registers and the interrupted sp (x1). */
    sub sp, x0, #176
    stp x2, x3, [sp]
    stp x4, x5, [sp, #16]
    stp x6, x7, [sp, #32]
    stp x8, x9, [sp, #48]
    stp x10, x11, [sp, #64]
    stp x12, x13, [sp, #80]
    stp x14, x15, [sp, #96]
    stp x16, x17, [sp, #112]
    stp x18, x30, [sp, #128]
    mrs x0, elr_el1
    stp x29, x0, [sp, #160]
    add x29, sp, #160
    /* GICC_IAR: the interrupt's ID, kept for GICC_EOIR; 1023 is none (spurious) */
    mov x9, #{gicc}
    ldr w10, [x9, #0x0c]
    stp x1, x10, [sp, #144]
    and w11, w10, #0x3ff
    cmp w11, #1023
    b.eq 2f
    cmp w11, #{ppi}
    b.ne 1f
    bl {tick}
"#,
            REARM!(),
            r#"
1:  mov x9, #{gicc}
    ldr x10, [sp, #152]
    str w10, [x9, #0x10]
2:  ldp x2, x3, [sp]
    ldp x4, x5, [sp, #16]
    ldp x6, x7, [sp, #32]
    ldp x8, x9, [sp, #48]
    ldp x10, x11, [sp, #64]
    ldp x12, x13, [sp, #80]
    ldp x14, x15, [sp, #96]
    ldp x16, x17, [sp, #112]
    ldp x18, x30, [sp, #128]
    ldr x29, [sp, #160]
    ldr x1, [sp, #144]
    mov sp, x1
    ldp x0, x1, [sp], #16
    eret
"#
        )
    };
}
#[cfg(bare_entries)]
macro_rules! ISR_BODY {
    () => {
        concat!(
            r#"
    /* A trap frame at the top of the interrupt stack: the caller-saved registers, x19 (which
       keeps the interrupt's ID across timer_tick), x29, x30, a copy of the interrupted x0
       and x1, the interrupted sp, ELR_EL1 and SPSR_EL1. */
    sub sp, x0, #272
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    stp x8, x9, [sp, #64]
    stp x10, x11, [sp, #80]
    stp x12, x13, [sp, #96]
    stp x14, x15, [sp, #112]
    stp x16, x17, [sp, #128]
    stp x18, x19, [sp, #144]
    str x29, [sp, #232]
    add x2, x1, #16
    stp x30, x2, [sp, #240]
    ldp x2, x3, [x1]
    stp x2, x3, [sp]
    mrs x2, elr_el1
    mrs x3, spsr_el1
    stp x2, x3, [sp, #256]
    /* GICC_IAR: the interrupt's ID, kept for GICC_EOIR; 1023 is none (spurious) */
    mov x9, #{gicc}
    ldr w19, [x9, #0x0c]
    and w11, w19, #0x3ff
    cmp w11, #1023
    b.eq 2f
    cmp w11, #{ppi}
    b.ne 1f
    bl {tick}
"#,
            REARM!(),
            r#"
1:  mov x9, #{gicc}
    str w19, [x9, #0x10]
2:  ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldp x8, x9, [sp, #64]
    ldp x10, x11, [sp, #80]
    ldp x12, x13, [sp, #96]
    ldp x14, x15, [sp, #112]
    ldp x16, x17, [sp, #128]
    ldp x18, x19, [sp, #144]
    ldr x29, [sp, #232]
    ldr x30, [sp, #240]
    /* back on the interrupted stack, x0 and x1 from where they were pushed */
    ldr x1, [sp, #248]
    sub sp, x1, #16
    ldp x0, x1, [sp], #16
    eret
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
    /* Every CPU's first steps: FP/SIMD at EL0 and EL1 (CPACR_EL1.FPEN: LLVM may use the
       vector registers), the exception vectors. */
    .macro cpu_setup
    mov x1, #(3 << 20)
    msr cpacr_el1, x1
    adrp x1, vectors
    add x1, x1, :lo12:vectors
    msr vbar_el1, x1
    isb
    .endm

    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    mrs x1, mpidr_el1
    and x1, x1, #0xff
    cbnz x1, park
    cpu_setup
    adrp x1, __stack_top
    add x1, x1, :lo12:__stack_top
    mov sp, x1
    /* x29 = 0 and x30 = 0 end every frame-pointer walk. */
    mov x29, #0
    mov x30, #0
    adrp x1, __bss_start
    add x1, x1, :lo12:__bss_start
    adrp x2, __bss_end
    add x2, x2, :lo12:__bss_end
1:  cmp x1, x2
    b.hs 2f
    str xzr, [x1], #8
    b 1b
2:  mov x0, #{dtb}
    bl kmain
    b park
    .size _start, . - _start

    /* PSCI CPU_ON's entry point: x0 = the CPU's number (context ID); its own 16 KiB stack. */
    .section .text.ap_start, "ax"
    .global ap_start
    .type ap_start, @function
ap_start:
    cpu_setup
    adrp x1, __ap_stacks_bottom
    add x1, x1, :lo12:__ap_stacks_bottom
    add x1, x1, x0, lsl #14
    mov sp, x1
    mov x29, #0
    mov x30, #0
    bl {ap_main}
    .global park
park:
    wfi
    b park
    .size ap_start, . - ap_start

    /* Semihosting: HLT #0xF000 with the operation in w0 and the parameter in x1. */
    .section .text.semihost_call, "ax"
    .global semihost_call
semihost_call:
    hlt #0xf000
    ret
    .global semihost_call_end
semihost_call_end:

    /* Exception vectors: the system call (synchronous, from EL0 in AArch64), irq=on's
       timer (IRQ, from EL1 with SP_EL1) and, for everything else, a report naming ESR_EL1,
       ELR_EL1 and FAR_EL1. */
    .section .text.vectors, "ax"
    .balign 2048
vectors:
    .set i, 0
    .rept 16
    .balign 128
    .if i == 8
    b svc_entry
    .elseif i == 5
    b isr_timer
    .else
    b fault_entry
    .endif
    .set i, i + 1
    .endr

    "#,
    SVC_ENTRY!(),
    SVC_BODY!(),
    SVC_EXIT!(),
    ISR_ENTRY!(),
    ISR_BODY!(),
    ISR_EXIT!(),
    r#"
fault_entry:
    mrs x0, esr_el1
    mrs x1, elr_el1
    mrs x2, far_el1
    bl {report}

    /* enter_user(entry, user sp, arg) -> exit code: saves the kernel's callee-saved
       registers and erets to EL0t (interrupts masked) on the system-call stack, the classic
       way: x30 = a fake return address of all ones, x29 left as the kernel had it (its
       caller's frame pointer, on the boot stack), so the program's first frame record holds
       garbage a walk must not follow. */
    .section .text.enter_user, "ax"
    .global enter_user
enter_user:
    stp x19, x20, [sp, #-96]!
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    adrp x9, {saved_ksp}
    mov x10, sp
    str x10, [x9, :lo12:{saved_ksp}]
    msr elr_el1, x0
    msr sp_el0, x1
    mov x9, #0x3c0
    msr spsr_el1, x9
    adrp x9, __syscall_stack_top
    add x9, x9, :lo12:__syscall_stack_top
    mov sp, x9
    mov x0, x2
    mov x30, #-1
    eret

    /* user_exit(code): back to enter_user's caller, returning code. */
    .global user_exit
user_exit:
    adrp x9, {saved_ksp}
    ldr x10, [x9, :lo12:{saved_ksp}]
    mov sp, x10
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp x19, x20, [sp], #96
    ret
    "#,
    dtb = const DTB,
    ap_main = sym crate::smp::ap_main,
    dispatch = sym crate::user::syscall_dispatch,
    report = sym crate::kmain::trap_report,
    saved_ksp = sym SAVED_KSP,
    tick = sym kernel_common::tick::timer_tick,
    gicc = const GICC,
    ppi = const TIMER_PPI,
    hz = const crate::irq::HZ,
);

extern "C" {
    fn ap_start();
}

/// The PL011: transmitter and UART enabled (QEMU sends regardless, real ones do not).
pub fn init() {
    unsafe { ((UART + 0x30) as *mut u32).write_volatile(0x101) };
}

pub fn putc(b: u8) {
    unsafe {
        while ((UART + 0x18) as *const u32).read_volatile() & 0x20 != 0 {}
        (UART as *mut u32).write_volatile(b as u32);
    }
}

/// Ends QEMU through semihosting `SYS_EXIT` (ADP_Stopped_ApplicationExit): status `code`.
pub fn exit(code: u32) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT, code as usize];
    semihost(SYS_EXIT, block.as_ptr() as usize);
    park()
}

/// The exit status needs semihosting: without it, stop here (QEMU keeps running; the
/// message is on the UART) rather than end with a status that would read as success.
pub fn exit_without_semihosting(_code: u32) -> ! {
    park()
}

pub fn fault() -> ! {
    unsafe { asm!("udf #0", options(noreturn)) }
}

pub fn semihost(op: usize, param: usize) -> isize {
    unsafe { super::semihost_call(op, param) }
}

/// Starts CPU `id` (MPIDR affinity 0 = id on `virt`) at `ap_start` with PSCI `CPU_ON`.
pub fn start_cpu(id: u32) -> bool {
    let r: isize;
    unsafe {
        asm!("hvc #0", inlateout("x0") PSCI_CPU_ON => r, in("x1") id as usize,
             in("x2") ap_start as usize, in("x3") id as usize, options(nostack))
    };
    r == 0
}

/// The boot CPU's wait for a secondary's signal (smp::run checks its condition between
/// calls): `wfe` returns at once when an event came since the last one.
pub fn wait_event() {
    unsafe { asm!("wfe", options(nomem, nostack)) };
}

pub fn signal_event() {
    unsafe { asm!("dsb sy", "sev", options(nomem, nostack)) };
}

fn mmio_write(addr: usize, v: u32) {
    unsafe { (addr as *mut u32).write_volatile(v) };
}

/// irq=on: the virtual timer's interrupt (PPI 27) every CNTFRQ_EL0 / `hz` ticks, taken by
/// `isr_timer` (the vector for IRQs from EL1 with SP_EL1). The GIC: distributor and CPU
/// interface on, the PPI enabled (priority 0, the reset value), every priority unmasked;
/// the timer: first deadline, enabled, its output unmasked; then PSTATE.I cleared.
pub fn irq_start(hz: u32) {
    mmio_write(GICD, 1); // GICD_CTLR: forward
    mmio_write(GICD + 0x100, 1 << TIMER_PPI); // GICD_ISENABLER0
    mmio_write(GICC + 0x04, 0xF0); // GICC_PMR
    mmio_write(GICC, 1); // GICC_CTLR: signal
    unsafe {
        let freq: u64;
        asm!("mrs {}, cntfrq_el0", out(reg) freq, options(nomem, nostack));
        asm!("msr cntv_tval_el0, {}", "msr cntv_ctl_el0, {}", "isb", "msr daifclr, #2",
             in(reg) freq / hz as u64, in(reg) 1u64, options(nostack));
    }
}

/// Ends irq_start's interrupts: PSTATE.I set, the timer off, the PPI disabled.
pub fn irq_stop() {
    unsafe { asm!("msr daifset, #2", "msr cntv_ctl_el0, xzr", "isb", options(nostack)) };
    mmio_write(GICD + 0x180, 1 << TIMER_PPI); // GICD_ICENABLER0
}
