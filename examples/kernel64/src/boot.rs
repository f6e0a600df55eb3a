//! Multiboot v1 header (address fields), the 32-bit bootstrap that enters long mode and the
//! higher-half `_start`. The IDT, the exception stubs and the exit are kernel_common::x86's.
//!
//! Boot path, in physical memory at 1 MiB (section `.boot`, linked where it runs):
//!
//! 1. `boot32` (32-bit protected mode, paging off, as the multiboot loader leaves it): checks
//!    for long mode, maps the first GiB twice with 2 MiB pages — identity, and at
//!    0xffffffff80000000 (PML4[511] → PDPT[510]) — enables PAE, EFER.LME and paging, loads a
//!    GDT with a 64-bit code segment and far-returns into it;
//! 2. `boot64` (64-bit mode, still at its physical address): loads the data segments and
//!    jumps to the higher half;
//! 3. `_start` (0xffffffff80xxxxxx, section `.text`): kernel stack, `.bss` zeroed, x87/SSE
//!    on, RBP = 0, `call kmain`.
//!
//! The identity map stays: the multiboot information (command line) lies in low memory.

use core::arch::global_asm;

global_asm!(
    r#"
    /* Multiboot v1 header with the address fields (flag bit 16): QEMU loads only 32-bit
       ELFs as such, and this one is an ELF64. Every address is physical. */
    .section .multiboot, "a"
    .balign 8
multiboot_header:
    .long 0x1BADB002                /* magic */
    .long 0x00010003                /* flags: page-align modules, memory info, address fields */
    .long -(0x1BADB002 + 0x00010003)
    .long multiboot_header          /* header_addr */
    .long __boot_start              /* load_addr: the file from here is loaded ... */
    .long __load_end_phys           /* load_end_addr: ... up to the end of .data */
    .long __bss_end_phys            /* bss_end_addr: zeroed up to the end of the stack */
    .long boot32                    /* entry_addr */

    .section .boot.text, "ax"
    .code32
    .global boot32
    .type boot32, @function
boot32:
    cli
    cld
    mov esp, offset boot_stack_top
    mov edi, eax                    /* multiboot magic: kmain's 1st argument (RDI) */
    mov esi, ebx                    /* multiboot information: its 2nd argument (RSI) */

    /* Long mode? (CPUID clobbers EBX, saved above.) */
    mov eax, 0x80000000
    cpuid
    cmp eax, 0x80000001
    jb .Lno_long_mode
    mov eax, 0x80000001
    cpuid
    test edx, 1 << 29
    jz .Lno_long_mode

    /* boot_pd: 512 present, writable 2 MiB pages over the first GiB. The tables are zeros
       in the file: only the entries in use are written. */
    mov eax, 0x83
    mov edx, offset boot_pd
    mov ecx, 512
.Lfill_pd:
    mov dword ptr [edx], eax
    add eax, 0x200000
    add edx, 8
    dec ecx
    jnz .Lfill_pd
    mov eax, offset boot_pd
    or eax, 3
    mov dword ptr [boot_pdpt_low], eax              /* 0 .. 1 GiB */
    mov dword ptr [boot_pdpt_high + 510 * 8], eax   /* 0xffffffff80000000 .. +1 GiB */
    mov eax, offset boot_pdpt_low
    or eax, 3
    mov dword ptr [boot_pml4], eax
    mov eax, offset boot_pdpt_high
    or eax, 3
    mov dword ptr [boot_pml4 + 511 * 8], eax

    mov eax, offset boot_pml4
    mov cr3, eax
    mov eax, cr4
    or eax, 1 << 5                  /* PAE */
    mov cr4, eax
    mov ecx, 0xC0000080             /* EFER */
    rdmsr
    or eax, 1 << 8                  /* LME */
    wrmsr
    mov eax, cr0
    or eax, 0x80000001              /* PG, PE */
    mov cr0, eax                    /* long mode, compatibility submode */

    lgdt [boot_gdt_desc]
    push 0x08
    mov eax, offset boot64
    push eax
    retf                            /* into the 64-bit code segment */

.Lno_long_mode:
    mov esi, offset .Lno_lm_msg
    mov dx, 0x3F8
.Lmsg_byte:
    lodsb
    test al, al
    jz .Lmsg_done
    out dx, al
    jmp .Lmsg_byte
.Lmsg_done:
    mov dx, 0xf4
    mov eax, 0x12                   /* EXIT_EXCEPTION: QEMU exits with 37 */
    out dx, eax
.Lhang32:
    hlt
    jmp .Lhang32
    .size boot32, . - boot32

    .code64
    .global boot64
    .type boot64, @function
boot64:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    movabs rax, offset _start
    jmp rax
    .size boot64, . - boot64

    .section .boot.data, "aw"
    .balign 4096
boot_pml4:
    .zero 4096
boot_pdpt_low:
    .zero 4096
boot_pdpt_high:
    .zero 4096
boot_pd:
    .zero 4096
    /* null, 0x08 = 64-bit ring-0 code, 0x10 = ring-0 data */
    .balign 16
boot_gdt:
    .quad 0
    .quad 0x00AF9A000000FFFF
    .quad 0x00CF92000000FFFF
boot_gdt_desc:
    .word boot_gdt_desc - boot_gdt - 1
    .quad boot_gdt
.Lno_lm_msg:
    .asciz "kern-profile example kernel64: this CPU has no long mode (use qemu-system-x86_64)\r\n"
    .balign 16
    .zero 512
boot_stack_top:

    /* The higher-half entry. EBP = 0 ends every frame-pointer walk at kmain, whose return
       address is in _start. As Linux does with its initial stack (__top_init_kernel_stack),
       the stack starts below room for a pt_regs (168 bytes, 176 to keep RSP 16-aligned) at
       the top of the stack's pages, not at their very end. */
    .section .text._start, "ax"
    .global _start
    .type _start, @function
_start:
    movabs rsp, offset __stack_top - 176
    mov r12d, edi                   /* magic */
    mov r13d, esi                   /* multiboot information (physical, identity-mapped) */

    /* Zero .bss (the stack is outside it). */
    movabs rdi, offset __bss_start
    movabs rcx, offset __bss_end
    sub rcx, rdi
    shr rcx, 3
    xor eax, eax
    rep stosq

    /* rustc's x86_64 target uses SSE2 anywhere: enable x87 and SSE. */
    fninit
    "#,
    kernel_common::x86_sse_on!("rax"),
    r#"

    mov edi, r12d
    mov esi, r13d
    "#,
    kernel_common::x86_call_kmain!(),
    r#"
    .size _start, . - _start

    "#
);
