//! The IDT: gates to 32 exception stubs (`isr_stubs`) that turn every CPU exception into a
//! message on COM1 and a failure exit, never a silent triple fault; and a full 256-vector
//! IDT for the modes that take interrupts (`irq=on`; i386's `smp=on`, `user=on`).

use crate::console::Console;
use crate::serial::Com1;
use crate::x86::exit::{exit, EXIT_EXCEPTION};
use core::arch::{asm, global_asm};

/// A gate: 8 bytes on i386, 16 on x86_64.
#[cfg(target_arch = "x86")]
pub type Gate = u64;
#[cfg(target_arch = "x86_64")]
pub type Gate = [u64; 2];
#[cfg(target_arch = "x86")]
const NO_GATE: Gate = 0;
#[cfg(target_arch = "x86_64")]
const NO_GATE: Gate = [0; 2];

/// The kernels' ring-0 code selector (their GDTs: 0x08).
const KERNEL_CS: u64 = 0x08;

#[repr(C, packed)]
pub struct DescriptorPtr {
    pub limit: u16,
    pub base: usize,
}

static mut IDT: [Gate; 32] = [NO_GATE; 32];

/// All 256 vectors. The default run keeps its 32-entry IDT: this one lives in .data, not
/// .bss, so the default run's boot (which zeroes .bss) executes the very same instructions.
#[link_section = ".data.idt_full"]
static mut IDT_FULL: [Gate; 256] = [NO_GATE; 256];

// isr_common's body: the frame's address as the handler's argument, the ABI's alignment.
#[cfg(target_arch = "x86")]
macro_rules! ISR_COMMON {
    () => {
        r#"
    mov eax, esp                    /* &ExceptionFrame */
    and esp, -16
    sub esp, 12
    push eax
    call {handler}
"#
    };
}
#[cfg(target_arch = "x86_64")]
macro_rules! ISR_COMMON {
    () => {
        r#"
    mov rdi, rsp                    /* &ExceptionFrame */
    and rsp, -16
    call {handler}
"#
    };
}

// One 16-byte stub per exception vector 0..31, pushing a dummy error code where the CPU
// pushes none, then the vector number; isr_common passes the frame to the handler.
global_asm!(
    r#"
    .section .text.isr, "ax"
    .balign 16
    .global isr_stubs
    .type isr_stubs, @function
isr_stubs:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    .balign 16
    .if (\n == 8) || (\n == 10) || (\n == 11) || (\n == 12) || (\n == 13) || (\n == 14) || (\n == 17) || (\n == 21) || (\n == 29) || (\n == 30)
    .else
    push 0
    .endif
    push \n
    jmp isr_common
    .endr
    .size isr_stubs, . - isr_stubs
    .type isr_common, @function
isr_common:
    "#,
    ISR_COMMON!(),
    "    .size isr_common, . - isr_common",
    handler = sym exception_handler,
);

extern "C" {
    static isr_stubs: u8;
}

/// A present interrupt gate to `handler` (selector 0x08, no IST), callable from ring `dpl`
/// with `int n`.
#[inline]
fn gate(handler: usize, dpl: u8) -> Gate {
    let off = handler as u64;
    let low = (off & 0xFFFF) | (KERNEL_CS << 16) | ((0x8E | (dpl as u64) << 5) << 40) | (((off >> 16) & 0xFFFF) << 48);
    #[cfg(target_arch = "x86")]
    return low;
    #[cfg(target_arch = "x86_64")]
    return [low, off >> 32];
}

fn load(idt: *const Gate, entries: usize) {
    let ptr = DescriptorPtr { limit: (entries * core::mem::size_of::<Gate>() - 1) as u16, base: idt as usize };
    unsafe { asm!("lidt [{}]", in(reg) &ptr, options(readonly, nostack, preserves_flags)) };
}

/// Fills the IDT with gates to the 32 exception stubs and loads it.
pub fn init() {
    unsafe {
        let base = &isr_stubs as *const u8 as usize;
        let idt = &raw mut IDT;
        for n in 0..32 {
            (*idt)[n] = gate(base + 16 * n, 0);
        }
        load(idt as *const Gate, 32);
    }
}

/// Copies the 32 exception gates into the full IDT. Once, on the boot CPU, after init.
pub fn init_full() {
    unsafe {
        let (small, full) = (&raw const IDT, &raw mut IDT_FULL);
        for n in 0..32 {
            (*full)[n] = (*small)[n];
        }
    }
}

/// Points vector `vector` of the full IDT at `handler`.
pub fn set_gate(vector: u8, handler: usize, dpl: u8) {
    unsafe { (*(&raw mut IDT_FULL))[vector as usize] = gate(handler, dpl) };
}

/// Loads the full IDT on this CPU.
pub fn load_full() {
    load(&raw const IDT_FULL as *const Gate, 256);
}

/// What the stubs push, then the CPU's interrupt frame.
#[repr(C)]
struct ExceptionFrame {
    vector: usize,
    error: usize,
    ip: usize,
    cs: usize,
    flags: usize,
    #[cfg(target_arch = "x86_64")]
    sp: usize,
    #[cfg(target_arch = "x86_64")]
    ss: usize,
}

extern "C" fn exception_handler(frame: &ExceptionFrame) -> ! {
    let mut out = Com1;
    out.str("\nCPU EXCEPTION ");
    out.dec(frame.vector as u64);
    out.str(" error ");
    out.hex(frame.error as u64);
    #[cfg(target_arch = "x86")]
    out.str(" at eip ");
    #[cfg(target_arch = "x86_64")]
    out.str(" at rip ");
    out.hex(frame.ip as u64);
    #[cfg(target_arch = "x86_64")]
    {
        out.str(" rsp ");
        out.hex(frame.sp as u64);
    }
    out.str("\n");
    exit(EXIT_EXCEPTION)
}
