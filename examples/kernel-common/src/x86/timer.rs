//! `irq=on` on x86: the PIT's timer interrupt (1 kHz, IRQ 0 through the 8259 on vector 0x20)
//! during the CPU workload, so that samples land in an interrupt handler of kernel code.
//!
//! The stub `isr_timer` starts with `push bp; mov bp, sp` right below the frame the CPU
//! pushed (ring 0 to ring 0, the same stack, no IST; i386: EIP, CS, EFLAGS; x86_64: RIP, CS,
//! RFLAGS, RSP, SS), as hand-written entry stubs of hobby kernels do; a frame-pointer walk
//! from `timer_tick` reaches the interrupted workload through it (kern-profile marks the
//! kernel entry there: `[interrupt]`). Its call-frame information says the same for a kernel
//! without frame pointers, as Linux's entry_32.S (`RING0_INT_FRAME`) and, before ORC,
//! entry_64.S (`INTR_FRAME`) did: a signal frame above the CPU's. The stub preserves every
//! register `timer_tick` may change (the caller-saved general registers; integer code, no
//! SSE): the workload's checksum is the default run's. The x86_64 kernel is built without a
//! red zone, so the CPU's pushes clobber nothing. Built with `bare_entries` (the kernels
//! without frame pointers), the stub pushes no frame record and has no CFI, as most hobby
//! kernels' stubs: kern-profile crosses it from its instructions and the CPU's frame.

use crate::serial::Com1;
use crate::x86::{idt, pic};
use core::arch::{asm, global_asm};

/// IRQ 0 with the master PIC remapped to 0x20.
const VECTOR: u8 = 0x20;
/// PIT input clock / 1193: about 1000 interrupts a second.
const PIT_DIVISOR: u16 = 1193;

// The stub in pieces: its frame record and CFI (`ENTER`, `LEAVE`: none with `bare_entries`,
// the kernels without frame pointers, as hobby kernels write their stubs; kern-profile then
// crosses it from its instructions), and the body both builds share.
#[cfg(all(target_arch = "x86", not(bare_entries)))]
macro_rules! ENTER {
    () => {
        r#"
    .cfi_startproc simple
    .cfi_signal_frame
    .cfi_def_cfa esp, 12            /* the interrupted ESP: above EIP, CS, EFLAGS */
    .cfi_offset eip, -12
    push ebp
    .cfi_adjust_cfa_offset 4
    .cfi_offset ebp, -16
    mov ebp, esp                    /* [EBP + 4] = interrupted EIP, + 8 CS, + 12 EFLAGS */
    .cfi_def_cfa_register ebp
"#
    };
}
#[cfg(all(target_arch = "x86", not(bare_entries)))]
macro_rules! LEAVE {
    () => {
        r#"
    pop ebp
    .cfi_def_cfa esp, 12
    .cfi_restore ebp
    iretd
    .cfi_endproc
"#
    };
}
#[cfg(all(target_arch = "x86", bare_entries))]
macro_rules! LEAVE {
    () => {
        "    iretd"
    };
}
#[cfg(target_arch = "x86")]
macro_rules! BODY {
    () => {
        r#"
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
"#
    };
}
#[cfg(all(target_arch = "x86_64", not(bare_entries)))]
macro_rules! ENTER {
    () => {
        r#"
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
"#
    };
}
#[cfg(all(target_arch = "x86_64", not(bare_entries)))]
macro_rules! LEAVE {
    () => {
        r#"
    pop rbp
    .cfi_def_cfa rsp, 40
    .cfi_restore rbp
    iretq
    .cfi_endproc
"#
    };
}
#[cfg(all(target_arch = "x86_64", bare_entries))]
macro_rules! LEAVE {
    () => {
        "    iretq"
    };
}
// The CPU aligned RSP to 16 before its 5 pushes; with the frame record's, 6 + 9 words here and
// one more for the call; without it, 5 + 9 and the call.
#[cfg(all(target_arch = "x86_64", not(bare_entries)))]
macro_rules! ALIGN_CALL {
    () => {
        "    sub rsp, 8\n    call {tick}\n    add rsp, 8"
    };
}
#[cfg(all(target_arch = "x86_64", bare_entries))]
macro_rules! ALIGN_CALL {
    () => {
        "    call {tick}"
    };
}
#[cfg(target_arch = "x86_64")]
macro_rules! BODY {
    () => {
        concat!(
            r#"
    push rax
    push rcx
    push rdx
    push rsi
    push rdi
    push r8
    push r9
    push r10
    push r11
"#,
            ALIGN_CALL!(),
            r#"
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
"#
        )
    };
}
#[cfg(bare_entries)]
macro_rules! ENTER {
    () => {
        ""
    };
}

global_asm!(
    ".section .text.isr_timer, \"ax\"",
    ".global isr_timer",
    ".type isr_timer, @function",
    "isr_timer:",
    ENTER!(),
    BODY!(),
    LEAVE!(),
    ".size isr_timer, . - isr_timer",
    tick = sym crate::tick::timer_tick,
);

extern "C" {
    fn isr_timer();
}

/// The timer on: its gate in the full IDT, IRQ 0 alone unmasked, the PIT running,
/// interrupts enabled.
pub fn start() {
    idt::init_full();
    idt::set_gate(VECTOR, isr_timer as *const () as usize, 0);
    idt::load_full();
    pic::timer_only();
    pic::pit_start(PIT_DIVISOR);
    unsafe { asm!("sti", options(nomem, nostack)) };
}

/// The timer off again (interrupts disabled, the PICs masked) and the tick count on COM1;
/// passes the workload's checksum on.
pub fn stop<T>(out: &mut Com1, checksum: T) -> T {
    unsafe { asm!("cli", options(nomem, nostack)) };
    pic::mask();
    crate::tick::report(out, checksum)
}
