//! Assembly the x86 kernels' entry code repeats (the BSP's `_start`, i386's AP start-up,
//! x86_64's), as string macros to splice into their `global_asm!`.

/// x87 and SSE on (CR0.EM = 0, CR0.MP = 1, CR4.OSFXSR, CR4.OSXMMEXCPT): rustc's x86 targets
/// may use SSE2 anywhere. `$r`: a scratch register, "eax" or "rax".
#[macro_export]
macro_rules! x86_sse_on {
    ($r:literal) => {
        concat!(
            "    mov ", $r, ", cr0\n",
            "    and ", $r, ", ~(1 << 2)\n",
            "    or ", $r, ", 1 << 1\n",
            "    mov cr0, ", $r, "\n",
            "    mov ", $r, ", cr4\n",
            "    or ", $r, ", (1 << 9) | (1 << 10)\n",
            "    mov cr4, ", $r, "\n",
        )
    };
}

/// The end of `_start`: EBP/RBP = 0 ends every frame-pointer walk at kmain (its return
/// address is in _start), which never returns.
#[macro_export]
macro_rules! x86_call_kmain {
    () => {
        "    xor ebp, ebp\n    call kmain\n.Lhang:\n    hlt\n    jmp .Lhang\n"
    };
}

/// The flat ring-0 data segment (the GDTs' 0x10) in every data segment register.
#[macro_export]
macro_rules! x86_flat_data_segments {
    () => {
        "    mov ax, 0x10\n    mov ds, ax\n    mov es, ax\n    mov fs, ax\n    mov gs, ax\n    mov ss, ax\n"
    };
}
