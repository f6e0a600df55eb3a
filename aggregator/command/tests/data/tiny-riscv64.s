# tiny-riscv64.elf: the aggregator tests' small riscv64 ELF with call-frame information, for
# the leaf and prologue correction (tests/return_register.rs). Built by build-tiny-virt.sh;
# tiny-riscv64-nocfi.elf is the same without .eh_frame (prologue analysis).
    .option norelax
    .text

# The prologue that makes a frame record: ra and s0 saved below the CFA, s0 set to it.
    .macro frame_record
    addi sp, sp, -16
    .cfi_def_cfa_offset 16
    sd ra, 8(sp)
    sd s0, 0(sp)
    .cfi_offset ra, -8
    .cfi_offset s0, -16
    addi s0, sp, 16
    .cfi_def_cfa s0, 0
    .endm

# The boot entry: no frame record, fp cleared (the walk from it finds nothing).
    .globl _start
    .type _start, @function
_start:
    .cfi_startproc
    .cfi_undefined ra
    li s0, 0
    call outer
    call nofp
    call epi
1:  j 1b
    .cfi_endproc
    .size _start, .-_start

# A function with a record, whose loop head comes right after its prologue.
    .globl outer
    .type outer, @function
outer:
    .cfi_startproc
    frame_record
    li a1, 4
.Louter_loop:
    addi a1, a1, -1
    call leaf
    bnez a1, .Louter_loop
    ld ra, 8(sp)
    ld s0, 0(sp)
    addi sp, sp, 16
    ret
    .cfi_endproc
    .size outer, .-outer

# A leaf: no record, the return address stays in ra.
    .globl leaf
    .type leaf, @function
leaf:
    .cfi_startproc
    addi a0, a0, 1
    addi a0, a0, 2
    ret
    .cfi_endproc
    .size leaf, .-leaf

# A function that calls without a record: ra saved on the stack, then overwritten.
    .globl nofp
    .type nofp, @function
nofp:
    .cfi_startproc
    addi sp, sp, -16
    .cfi_def_cfa_offset 16
    sd ra, 8(sp)
    .cfi_offset ra, -8
    call leaf
    addi a0, a0, 3
    ld ra, 8(sp)
    .cfi_restore ra
    addi sp, sp, 16
    .cfi_def_cfa_offset 0
    ret
    .cfi_endproc
    .size nofp, .-nofp

# Shrink-wrapped: an early exit jumps past the record to the epilogue's `ret`.
    .globl epi
    .type epi, @function
epi:
    .cfi_startproc
    beqz a0, .Lepi_ret
    frame_record
    call leaf
    .cfi_def_cfa sp, 16
    ld ra, 8(sp)
    .cfi_restore ra
    ld s0, 0(sp)
    .cfi_restore s0
    addi sp, sp, 16
    .cfi_def_cfa_offset 0
.Lepi_ret:
    ret
    .cfi_endproc
    .size epi, .-epi
