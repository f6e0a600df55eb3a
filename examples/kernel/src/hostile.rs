//! `hostile=on`: frame chains no compiler makes, for the test that sampling cost and stop
//! reasons hold whatever a guest does. Four cases, each `rounds` x 1000 iterations of a spin
//! loop that runs on a stack of its own with EBP pointing at a hostile chain just above its
//! stack pointer (where a walk starts, and within the span a walk reads). Each iteration calls
//! a two-instruction leaf, as real code calls: a loop of one translated block, with nothing
//! but registers, ran 2.0 s to 3.8 s in identical bare QEMU runs on the AMD hosts here, too
//! unsteady to measure a plugin's cost against.
//!
//! | case | EBP | a walk stops with |
//! | --- | --- | --- |
//! | `cycle` | two frame records pointing at each other | frame pointer not increasing (after the switches a walk allows) |
//! | `unmapped` | the end of RAM (the stack is RAM's last page): nothing there | unreadable memory |
//! | `misaligned` | an odd address, over zeroed memory | null return address (x86 asks no alignment: the record there is read and names no caller) |
//! | `deep` | 4096 records, one per 4 KiB page | read budget spent (or the depth cap, if lower) |
//!
//! Each case's code that runs with the hostile EBP (from its loop to the function's end) is
//! printed on COM1 (`hostile: NAME 0xSTART 0xEND`), so a test can find its samples by PC.

use core::arch::global_asm;

use kernel_common::console::Console;
use kernel_common::serial::Com1;

/// Where the chains are built: free RAM above the heaps (src/kalloc.rs) and below the user
/// program (src/user.rs).
const CHAIN_BASE: u32 = 0x0100_0000;
const PAGE: u32 = 0x1000;
/// Records of the deep chain: one per page, 16 MiB, more than any depth allows.
const DEEP: u32 = 4096;
const CYCLE: u32 = CHAIN_BASE + DEEP * PAGE;
const MISALIGNED: u32 = CYCLE + 0x1001;
/// RAM ends on a multiple of this (QEMU's `-m`; ACPI tables fill the reserved last pages).
const RAM_GRAIN: usize = 0x0100_0000;

global_asm!(
    r#"
    /* u32 NAME(ebp, iters, esp): on the stack ending at `esp`, spins `iters` times with
       EBP = ebp; returns a hash. */
    .macro HOSTILE_SPIN name
    .section .text.\name, "ax"
    .global \name
    .type \name, @function
\name:
    push ebp
    mov ebp, esp
    push ebx
    push esi
    mov eax, dword ptr [ebp + 8]
    mov ecx, dword ptr [ebp + 12]
    mov esi, dword ptr [ebp + 16]
    xor edx, edx
    mov ebx, esp
    mov esp, esi
    push ebp
    mov ebp, eax
    /* A jump, so that the loop starts a translated block of its own: a block whose
       registers are the hostile ones from its first instruction. The leaf keeps EBP. */
    jmp \name\()_loop
    .global \name\()_loop
\name\()_loop:
1:  call \name\()_step
    dec ecx
    jnz 1b
    pop ebp
    mov esp, ebx
    mov eax, edx
    pop esi
    pop ebx
    pop ebp
    ret
\name\()_step:
    imul edx, edx, 33
    add edx, ecx
    ret
    .global \name\()_end
\name\()_end:
    .size \name, . - \name
    .endm

    HOSTILE_SPIN hostile_spin_cycle
    HOSTILE_SPIN hostile_spin_unmapped
    HOSTILE_SPIN hostile_spin_misaligned
    HOSTILE_SPIN hostile_spin_deep
    "#
);

extern "C" {
    fn hostile_spin_cycle(ebp: u32, iters: u32, esp: u32) -> u32;
    fn hostile_spin_unmapped(ebp: u32, iters: u32, esp: u32) -> u32;
    fn hostile_spin_misaligned(ebp: u32, iters: u32, esp: u32) -> u32;
    fn hostile_spin_deep(ebp: u32, iters: u32, esp: u32) -> u32;
    static hostile_spin_cycle_loop: u8;
    static hostile_spin_unmapped_loop: u8;
    static hostile_spin_misaligned_loop: u8;
    static hostile_spin_deep_loop: u8;
    static hostile_spin_cycle_end: u8;
    static hostile_spin_unmapped_end: u8;
    static hostile_spin_misaligned_end: u8;
    static hostile_spin_deep_end: u8;
}

type Spin = unsafe extern "C" fn(u32, u32, u32) -> u32;

/// Writes a frame record (saved EBP, return address) at `at`.
fn record(at: u32, saved: u32, ret: u32) {
    unsafe {
        (at as *mut u32).write_volatile(saved);
        ((at + 4) as *mut u32).write_volatile(ret);
    }
}

/// Builds the chains, then runs each case; returns a checksum of the spins.
#[inline(never)]
pub fn run(rounds: u32, mem_end: Option<usize>, out: &mut Com1) -> u32 {
    if mem_end.is_some_and(|end| end < (CYCLE + 2 * PAGE) as usize) {
        panic!("hostile=on needs RAM up to {:#x}", CYCLE + 2 * PAGE);
    }
    // The first address past RAM: on a PC nothing is there up to the devices near 4 GiB.
    let unmapped = mem_end.unwrap_or(0x0800_0000).next_multiple_of(RAM_GRAIN) as u32;
    // Return addresses inside this function: code a reader can name.
    let ret = run as usize as u32 + 1;
    for i in 0..DEEP {
        let at = CHAIN_BASE + i * PAGE;
        let next = if i + 1 == DEEP { 0 } else { at + PAGE };
        record(at, next, ret);
    }
    record(CYCLE, CYCLE + 0x40, ret);
    record(CYCLE + 0x40, CYCLE, ret);
    // Addresses only: taking them reads nothing.
    // (name, spin, its hostile code range, EBP, the top of its stack)
    let cases: [(&str, Spin, [*const u8; 2], u32, u32); 4] = [
        ("cycle", hostile_spin_cycle, [&raw const hostile_spin_cycle_loop, &raw const hostile_spin_cycle_end], CYCLE, CYCLE - 0x40),
        ("unmapped", hostile_spin_unmapped, [&raw const hostile_spin_unmapped_loop, &raw const hostile_spin_unmapped_end], unmapped, unmapped - 0x100),
        ("misaligned", hostile_spin_misaligned, [&raw const hostile_spin_misaligned_loop, &raw const hostile_spin_misaligned_end], MISALIGNED, CYCLE + 0x1000 - 0x40),
        ("deep", hostile_spin_deep, [&raw const hostile_spin_deep_loop, &raw const hostile_spin_deep_end], CHAIN_BASE, CHAIN_BASE - 0x40),
    ];
    let mut sum = 0u32;
    for (name, spin, [start, end], ebp, esp) in cases {
        out.str("hostile: ");
        out.str(name);
        out.str(" ");
        out.hex(start as usize as u64);
        out.str(" ");
        out.hex(end as usize as u64);
        out.str("\n");
        sum = sum.wrapping_add(unsafe { spin(ebp, rounds.saturating_mul(1000), esp) });
    }
    sum
}
