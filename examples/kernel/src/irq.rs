//! `irq=on`: the default CPU workload with the PIT's timer interrupt on (1 kHz, IRQ 0 on
//! vector 0x20), so that samples land in an interrupt handler of kernel code. The stub
//! `isr_timer` starts with `push ebp; mov ebp, esp` right below the frame the CPU pushed
//! (EIP, CS, EFLAGS: ring 0 to ring 0, same stack), as hand-written entry stubs of hobby
//! kernels do; a frame-pointer walk from `timer_tick` reaches the interrupted workload
//! through it (kern-profile marks the kernel entry there: `[interrupt]`). Its call-frame
//! information says the same for a kernel without frame pointers, as Linux's entry_32.S did
//! (`RING0_INT_FRAME`): a signal frame whose CFA is the interrupted ESP, above the saved EIP.
//! The handler preserves every register: the workload's checksum is the default run's.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::boot;
use crate::serial::{outb, Com1};
use crate::workload;

/// PIT input clock / 1193: about 1000 interrupts a second.
const PIT_DIVISOR: u16 = 1193;
/// Iterations of the handler's loop: enough work for samples to land there.
const TICK_WORK: u32 = 5000;

static TICKS: AtomicU32 = AtomicU32::new(0);
static TICK_HASH: AtomicU32 = AtomicU32::new(0);

global_asm!(
    r#"
    .section .text.isr_timer, "ax"
    .global isr_timer
    .type isr_timer, @function
isr_timer:
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa esp, 12            /* the interrupted ESP: above EIP, CS, EFLAGS */
    .cfi_offset eip, -12
    push ebp
    .cfi_adjust_cfa_offset 4
    .cfi_offset ebp, -16
    mov ebp, esp                    /* [EBP + 4] = interrupted EIP, + 8 CS, + 12 EFLAGS */
    .cfi_def_cfa_register ebp
    push eax
    push ecx
    push edx
    mov eax, esp
    and esp, -16                    /* the Rust ABI's stack alignment */
    sub esp, 12
    push eax
    call {tick}
    pop esp
    mov al, 0x20                    /* end of interrupt, master PIC */
    out 0x20, al
    pop edx
    pop ecx
    pop eax
    pop ebp
    .cfi_def_cfa esp, 12
    .cfi_restore ebp
    iretd
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
    let mut i = 0;
    while i < TICK_WORK {
        h = h.rotate_left(5) ^ i.wrapping_mul(0x9E37_79B9);
        i += 1;
    }
    TICK_HASH.store(h, Ordering::Relaxed);
    TICKS.fetch_add(1, Ordering::Relaxed);
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
pub fn run(rounds: u32, out: &mut Com1) -> u32 {
    boot::init_full_idt();
    boot::set_gate(0x20, isr_timer as usize as u32, 0);
    boot::load_full_idt();
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
