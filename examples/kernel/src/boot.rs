//! Multiboot header, `_start`, a flat GDT, an IDT that turns every CPU exception into a
//! message and a failure exit (never a silent triple fault), and QEMU's `isa-debug-exit`.

use crate::serial::Com1;
use core::arch::{asm, global_asm};

/// Values written to `isa-debug-exit` (iobase 0xf4). QEMU exits with `(value << 1) | 1`.
pub const EXIT_SUCCESS: u32 = 0x10; // QEMU exit status 33
pub const EXIT_PANIC: u32 = 0x11; // 35
pub const EXIT_EXCEPTION: u32 = 0x12; // 37

global_asm!(
    r#"
    .section .multiboot, "a"
    .balign 4
    .long 0x1BADB002                /* magic */
    .long 0x00000003                /* flags: page-align modules, want memory info */
    .long -(0x1BADB002 + 0x00000003)

    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    cli
    cld
    /* As Linux does with its initial stack (__top_init_kernel_stack), room for a pt_regs
       and the top-of-stack padding (76 bytes, 80 to keep ESP 16-aligned) stays free above the
       first frame. */
    mov esp, offset __stack_top - 80
    sub esp, 8                      /* the i386 SysV ABI wants ESP 16-aligned at each call */
    push ebx                        /* kmain's 2nd argument: multiboot info address */
    push eax                        /* kmain's 1st argument: multiboot magic */

    /* Our own flat GDT: the loader's may live in memory we do not own, and the IDT gates
       below name selector 0x08. */
    lgdt [.Lgdt_desc]
    push 0x08
    mov eax, offset .Lreload_cs
    push eax
    retf
.Lreload_cs:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov fs, ax
    mov gs, ax
    mov ss, ax

    /* Zero .bss (the stack is outside it). */
    mov edi, offset __bss_start
    mov ecx, offset __bss_end
    sub ecx, edi
    shr ecx, 2
    xor eax, eax
    rep stosd

    /* The i686 target may emit SSE2: enable x87 and SSE if the CPU has FXSR. */
    fninit
    mov eax, 1
    cpuid
    test edx, 1 << 24
    jz .Lno_sse
    mov eax, cr0
    and eax, ~(1 << 2)              /* EM = 0 */
    or eax, 1 << 1                  /* MP = 1 */
    mov cr0, eax
    mov eax, cr4
    or eax, (1 << 9) | (1 << 10)    /* OSFXSR, OSXMMEXCPT */
    mov cr4, eax
.Lno_sse:

    /* EBP = 0 ends every frame-pointer walk at kmain (its return address is in _start). */
    xor ebp, ebp
    call kmain
.Lhang:
    hlt
    jmp .Lhang
    .size _start, . - _start

    /* Like many multiboot kernels (xv6's `_start = V2P_WO(entry)`), a code-typed absolute
       symbol outside every section of the image, below the kernel proper: the entry as a
       loader's physical view would place it. A profiler must not let it name what lies
       between it and the kernel's code (kern-profile bounds kernel names by the image's
       allocated sections). Nothing refers to it. */
    .global _entry_phys
    .type _entry_phys, @function
    .set _entry_phys, 0x000ff00c

    /* One 16-byte stub per exception vector 0..31, pushing a dummy error code where the CPU
       pushes none, then the vector number. */
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
    mov eax, esp                    /* &ExceptionFrame */
    and esp, -16
    sub esp, 12
    push eax
    call {handler}
    .size isr_common, . - isr_common

    /* null, 0x08 = flat 32-bit ring-0 code, 0x10 = flat 32-bit ring-0 data,
       0x18 = flat 32-bit ring-3 code, 0x20 = flat 32-bit ring-3 data (user=on),
       0x28 = the TSS (user=on; filled in by src/user.rs). Writable: the CPU marks the TSS
       descriptor busy. Global: the APs' trampoline (src/smp.rs) loads the same GDT. */
    .section .data.gdt, "aw"
    .balign 8
    .global kernel_gdt
kernel_gdt:
.Lgdt:
    .quad 0
    .quad 0x00CF9A000000FFFF
    .quad 0x00CF92000000FFFF
    .quad 0x00CFFA000000FFFF
    .quad 0x00CFF2000000FFFF
    .quad 0
    .global kernel_gdt_desc
kernel_gdt_desc:
.Lgdt_desc:
    .word .Lgdt_desc - .Lgdt - 1
    .long .Lgdt
    "#,
    handler = sym exception_handler,
);

#[repr(C, packed)]
struct DescriptorPtr {
    limit: u16,
    base: u32,
}

static mut IDT: [u64; 32] = [0; 32];

extern "C" {
    static isr_stubs: u8;
}

/// Masks every line of both 8259 PICs. Interrupts are off anyway, but a pending IRQ (the
/// PIT's, 18 Hz) still makes QEMU leave and re-enter translated code, which shows up as
/// noise in `-d exec` instruction logs (examples/kernel/measure-shares.py).
pub fn mask_pic() {
    crate::serial::outb(0x21, 0xFF);
    crate::serial::outb(0xA1, 0xFF);
}

/// Fills the IDT with interrupt gates to the 32 exception stubs and loads it.
pub fn init_idt() {
    unsafe {
        let base = &isr_stubs as *const u8 as u32;
        let idt = &raw mut IDT;
        for n in 0..32u32 {
            let off = base + 16 * n;
            // Present, DPL 0, 32-bit interrupt gate, selector 0x08.
            let gate = (off as u64 & 0xFFFF)
                | (0x08u64 << 16)
                | (0x8Eu64 << 40)
                | (((off as u64) >> 16) << 48);
            (*idt)[n as usize] = gate;
        }
        let ptr = DescriptorPtr { limit: (32 * 8 - 1) as u16, base: idt as u32 };
        asm!("lidt [{}]", in(reg) &ptr, options(readonly, nostack, preserves_flags));
    }
}

/// Selectors of the GDT above.
pub const KERNEL_CS: u16 = 0x08;
pub const KERNEL_DS: u16 = 0x10;
pub const USER_CS: u16 = 0x18 | 3;
pub const USER_DS: u16 = 0x20 | 3;
pub const TSS_SEL: u16 = 0x28;

extern "C" {
    static mut kernel_gdt: [u64; 6];
}

/// Writes GDT entry `index` (src/user.rs puts its TSS descriptor at index 5).
pub fn set_gdt_entry(index: usize, desc: u64) {
    unsafe { (*(&raw mut kernel_gdt))[index] = desc };
}

/// All 256 vectors, for the SMP and user modes, which need interrupt vectors above the 32
/// exceptions (IPIs, the APIC's spurious vector, `int 0x80`). The default run keeps its
/// 32-entry IDT: this one lives in .data, not .bss, so the default run's boot (which zeroes
/// .bss) executes the very same instructions.
#[link_section = ".data.idt_full"]
static mut IDT_FULL: [u64; 256] = [0; 256];

/// A present 32-bit interrupt gate to `handler` (selector 0x08), callable from ring `dpl`
/// with `int n`.
fn gate(handler: u32, dpl: u8) -> u64 {
    (handler as u64 & 0xFFFF)
        | ((KERNEL_CS as u64) << 16)
        | (((0x8E | (dpl as u64) << 5) as u64) << 40)
        | (((handler as u64) >> 16) << 48)
}

/// Copies the 32 exception gates into the full IDT. Once, on the boot CPU, after init_idt.
pub fn init_full_idt() {
    unsafe {
        let (small, full) = (&raw const IDT, &raw mut IDT_FULL);
        for n in 0..32 {
            (*full)[n] = (*small)[n];
        }
    }
}

/// Points vector `vector` of the full IDT at `handler`.
pub fn set_gate(vector: u8, handler: u32, dpl: u8) {
    unsafe { (*(&raw mut IDT_FULL))[vector as usize] = gate(handler, dpl) };
}

/// Loads the full IDT on this CPU.
pub fn load_full_idt() {
    unsafe {
        let ptr = DescriptorPtr { limit: (256 * 8 - 1) as u16, base: &raw const IDT_FULL as u32 };
        asm!("lidt [{}]", in(reg) &ptr, options(readonly, nostack, preserves_flags));
    }
}

#[repr(C)]
struct ExceptionFrame {
    vector: u32,
    error: u32,
    eip: u32,
    cs: u32,
    eflags: u32,
}

extern "C" fn exception_handler(frame: &ExceptionFrame) -> ! {
    let mut out = Com1;
    out.str("\nCPU EXCEPTION ");
    out.dec(frame.vector as u64);
    out.str(" error ");
    out.hex(frame.error as u64);
    out.str(" at eip ");
    out.hex(frame.eip as u64);
    out.str("\n");
    exit(EXIT_EXCEPTION)
}

/// Halts for good, interrupts off: QEMU keeps running until it is stopped (`halt=on`).
pub fn halt() -> ! {
    unsafe { asm!("cli", "2:", "hlt", "jmp 2b", options(noreturn)) }
}

/// Ends the run through `isa-debug-exit`.
pub fn exit(code: u32) -> ! {
    // isa-debug-exit has no read side: a read gives 0 when it is there and all ones (an
    // unassigned port) when it is not.
    let probe: u32;
    unsafe { asm!("in eax, dx", out("eax") probe, in("dx") 0xf4u16, options(nomem, nostack)) };
    if probe != 0xFFFF_FFFF {
        unsafe {
            asm!("out dx, eax", in("dx") 0xf4u16, in("eax") code, options(nomem, nostack));
            // QEMU stops the vCPU a little after the write, not at once: halt with
            // interrupts off so that no further instruction runs (exact counts stay exact).
            asm!("cli", "2:", "hlt", "jmp 2b", options(noreturn));
        }
    }
    Com1.str("no isa-debug-exit device at 0xf4: triple-faulting (QEMU -no-reboot exits with 0)\n");
    unsafe {
        let null = DescriptorPtr { limit: 0, base: 0 };
        asm!("lidt [{}]", "int3", in(reg) &null, options(noreturn));
    }
}
