//! Multiboot header, `_start` and a flat GDT (kernel and user segments, the TSS's slot). The
//! IDT, the exception stubs and the exit are kernel_common::x86's.

use core::arch::global_asm;

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
    "#,
    kernel_common::x86_flat_data_segments!(),
    r#"

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
    "#,
    kernel_common::x86_sse_on!("eax"),
    r#"
.Lno_sse:

    "#,
    kernel_common::x86_call_kmain!(),
    r#"
    .size _start, . - _start

    /* Like many multiboot kernels (xv6's `_start = V2P_WO(entry)`), a code-typed absolute
       symbol outside every section of the image, below the kernel proper: the entry as a
       loader's physical view would place it. A profiler must not let it name what lies
       between it and the kernel's code (kern-profile bounds kernel names by the image's
       allocated sections). Nothing refers to it. */
    .global _entry_phys
    .type _entry_phys, @function
    .set _entry_phys, 0x000ff00c

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
    "#
);

/// Selectors of the GDT above.
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
