//! `irq=on`: the default CPU workload with the PIT's timer interrupt on (1 kHz, IRQ 0 through
//! the 8259 on vector 0x20), so that samples land in an interrupt handler of kernel code, as
//! in the i386 kernel (examples/kernel/src/irq.rs). The stub `isr_timer` starts with
//! `push rbp; mov rbp, rsp` right below the frame the CPU pushed (RIP, CS, RFLAGS, RSP, SS:
//! ring 0 to ring 0, the same stack, no IST), as hand-written entry stubs of hobby kernels
//! do; a frame-pointer walk from `timer_tick` reaches the interrupted workload through it
//! (kern-profile marks the kernel entry there: `[interrupt]`). Its call-frame information
//! says the same for a kernel without frame pointers, as Linux's entry_64.S did before ORC
//! (`INTR_FRAME`): a signal frame above the CPU's, the interrupted RIP and RSP saved in it.
//! The handler preserves every register it or `timer_tick` may change (the caller-saved
//! general registers; `timer_tick` is integer code, no SSE): the workload's checksum is the
//! default run's. The kernel is built without a red zone, so the CPU's pushes clobber nothing.
//!
//! Every static here is in `.data`, not `.bss`: `_start` zeroes `.bss` one `rep stosq`
//! iteration per 8 bytes, and the default run's instruction counts stay as measured.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::boot;
use crate::serial::{outb, Com1};
use crate::workload;

/// The timer's vector: IRQ 0 with the master PIC remapped to 0x20.
const VECTOR: usize = 0x20;
/// PIT input clock / 1193: about 1000 interrupts a second.
const PIT_DIVISOR: u16 = 1193;
/// Iterations of the handler's loop: enough work for samples to land there.
const TICK_WORK: u32 = 5000;

#[link_section = ".data"]
static TICKS: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data"]
static TICK_HASH: AtomicU64 = AtomicU64::new(0);
/// The exception vectors of boot.rs's IDT, then the timer's.
#[link_section = ".data"]
static mut IRQ_IDT: [[u64; 2]; VECTOR + 1] = [[0; 2]; VECTOR + 1];

global_asm!(
    r#"
    .section .text.isr_timer, "ax"
    .global isr_timer
    .type isr_timer, @function
isr_timer:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa rsp, 40            /* above RIP, CS, RFLAGS, RSP, SS */
    .cfi_offset rip, -40
    .cfi_offset rsp, -16
    push rbp
    .cfi_adjust_cfa_offset 8
    .cfi_offset rbp, -48
    mov rbp, rsp                    /* [RBP + 8] = interrupted RIP, + 16 CS, + 24 RFLAGS, + 32 RSP, + 40 SS */
    .cfi_def_cfa_register rbp
    push rax
    push rcx
    push rdx
    push rsi
    push rdi
    push r8
    push r9
    push r10
    push r11
    /* The CPU aligned RSP to 16 before its pushes: 6 + 9 words here, one more for the call. */
    sub rsp, 8
    call {tick}
    add rsp, 8
    mov al, 0x20                    /* end of interrupt, master PIC */
    out 0x20, al
    pop r11
    pop r10
    pop r9
    pop r8
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rax
    pop rbp
    .cfi_def_cfa rsp, 40
    .cfi_restore rbp
    iretq
    .cfi_endproc
    .size isr_timer, . - isr_timer
    "#,
    tick = sym timer_tick,
);

extern "C" {
    fn isr_timer();
}

/// The timer interrupt's work, called by `isr_timer`.
#[no_mangle]
#[inline(never)]
extern "C" fn timer_tick() {
    let mut h = TICK_HASH.load(Ordering::Relaxed);
    let mut i: u64 = 0;
    while i < TICK_WORK as u64 {
        h = h.rotate_left(5) ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        i += 1;
    }
    TICK_HASH.store(h, Ordering::Relaxed);
    TICKS.fetch_add(1, Ordering::Relaxed);
}

/// Loads an IDT with boot.rs's 32 exception gates and a 64-bit interrupt gate (DPL 0, no
/// IST) to `isr_timer` at VECTOR.
fn load_irq_idt() {
    unsafe {
        let idt = &raw mut IRQ_IDT;
        let boot_idt = &raw const boot::IDT;
        for n in 0..32 {
            (*idt)[n] = (*boot_idt)[n];
        }
        let off = isr_timer as *const () as u64;
        let low = (off & 0xFFFF) | (0x08u64 << 16) | (0x8Eu64 << 40) | (((off >> 16) & 0xFFFF) << 48);
        (*idt)[VECTOR] = [low, off >> 32];
        let ptr = boot::DescriptorPtr { limit: ((VECTOR + 1) * 16 - 1) as u16, base: idt as u64 };
        asm!("lidt [{}]", in(reg) &ptr, options(readonly, nostack, preserves_flags));
    }
}

/// Remaps the PICs to vectors 0x20 and 0x28 and unmasks IRQ 0 only.
fn pic_timer_only() {
    for (port, val) in [
        (0x20, 0x11), (0xA0, 0x11), // ICW1: init, ICW4 follows
        (0x21, 0x20), (0xA1, 0x28), // ICW2: vector offsets
        (0x21, 0x04), (0xA1, 0x02), // ICW3: cascade on IRQ 2
        (0x21, 0x01), (0xA1, 0x01), // ICW4: 8086 mode
        (0x21, 0xFE), (0xA1, 0xFF), // masks: IRQ 0 only
    ] {
        outb(port, val);
    }
}

/// Runs the CPU workload with the timer interrupt on; returns its checksum.
#[inline(never)]
pub fn run(rounds: u32, out: &mut Com1) -> u64 {
    load_irq_idt();
    pic_timer_only();
    // PIT channel 0, lobyte/hibyte, mode 2 (rate generator).
    outb(0x43, 0x34);
    outb(0x40, PIT_DIVISOR as u8);
    outb(0x40, (PIT_DIVISOR >> 8) as u8);
    unsafe { asm!("sti", options(nomem, nostack)) };
    let checksum = workload::run_workload(rounds);
    unsafe { asm!("cli", options(nomem, nostack)) };
    boot::mask_pic();
    out.str("irq: ");
    out.dec(TICKS.load(Ordering::Relaxed) as u64);
    out.str(" timer interrupts\n");
    checksum
}
