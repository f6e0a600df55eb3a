//! `procs=on`: two ring-3 programs linked at the same addresses, each in an address space of
//! its own, run in turns, as a kernel runs processes.
//!
//! A is the `user=on` program (target/examples/user.elf), B its variant with a function of
//! its own (user-b.elf, `--cfg variant_b`); both are linked at 64 MiB. Paging is on for this
//! phase only, with one page directory per program, 4 MiB pages (PSE):
//!
//! | virtual | A's directory | B's directory | |
//! | --- | --- | --- | --- |
//! | 0 .. 64 MiB, 80 .. 128 MiB | identity | identity | supervisor only |
//! | 64 .. 80 MiB (program and stack) | 64 .. 80 MiB | 96 .. 112 MiB | user |
//!
//! So the kernel (its image, heaps, the system-call stack below 96 MiB) is mapped the same
//! in both and out of ring 3's reach, and the user stack (below 80 MiB) stays below the
//! kernel's. Each program is loaded once, under its own directory; then A and B run
//! SLICES times each, alternately (A, B, A, B, ...), each turn `rounds / SLICES` rounds
//! through `user::enter` (its `exit` ends the turn), CR3 switched before each. Afterwards
//! paging goes off again (CR3 = 0), and the allocation phase runs as in every mode.
//!
//! `exec=on` ([`run_exec`]): the same programs one after another in one address space, A's
//! directory, as a kernel whose exec frees the old page directory and gets the same page
//! back (xv6's `kalloc` does): each turn loads its program over the other's, in the same
//! window, under the same CR3, then enters it.

use core::arch::asm;

use kernel_common::console::Console;
use kernel_common::serial::Com1;
use crate::user;

/// Program B (stripped of debug info; target/examples/user-b.elf has it all).
static USER_B_ELF: &[u8] = include_bytes!(env!("KP_USER_B_ELF"));
/// Program A: the `user=on` program.
static USER_A_ELF: &[u8] = include_bytes!(env!("KP_USER_ELF"));

/// Turns each program gets.
pub const SLICES: u32 = 4;
/// The user window: 4 MiB pages 16 to 19 (64 .. 80 MiB), the program and its stack.
const USER_PDE_FIRST: usize = (user::USER_BASE >> 22) as usize;
const USER_PDE_END: usize = (user::USER_STACK_TOP >> 22) as usize;
/// Where B's window lies in physical memory (A's is at its virtual address).
const PHYS_B: u32 = 0x0600_0000;
const PHYS_B_END: u32 = PHYS_B + (user::USER_STACK_TOP - user::USER_BASE);
/// Identity-mapped: the 128 MiB of RAM `-m 128M` gives.
const IDENTITY_PDES: usize = 32;

const PDE_PRESENT: u32 = 1;
const PDE_WRITE: u32 = 1 << 1;
const PDE_USER: u32 = 1 << 2;
const PDE_4M: u32 = 1 << 7;

#[repr(C, align(4096))]
struct PageDirectory([u32; 1024]);

// In .data, not .bss (see src/smp.rs on .bss).
#[link_section = ".data.procs"]
static mut DIR_A: PageDirectory = PageDirectory([0; 1024]);
#[link_section = ".data.procs"]
static mut DIR_B: PageDirectory = PageDirectory([0; 1024]);

/// One program: its name on COM1, ELF, directory and where its window lies.
struct Program {
    name: &'static str,
    elf: &'static [u8],
    dir: *mut PageDirectory,
    phys: u32,
}

/// Runs A and B in turns, `rounds` rounds each in all; returns A's last exit code
/// (any program exiting with another code than 0 is a panic).
#[inline(never)]
pub fn run(rounds: u32, mem_end: Option<usize>, out: &mut Com1) -> u32 {
    if mem_end.is_some_and(|end| end < PHYS_B_END as usize) {
        panic!("procs=on needs RAM up to {:#x}", PHYS_B_END);
    }
    let programs = [
        Program { name: "user.elf", elf: USER_A_ELF, dir: &raw mut DIR_A, phys: user::USER_BASE },
        Program { name: "user-b.elf", elf: USER_B_ELF, dir: &raw mut DIR_B, phys: PHYS_B },
    ];
    user::init_entry();
    let mut entries = [0u32; 2];
    for (i, p) in programs.iter().enumerate() {
        fill_directory(p.dir, p.phys);
        switch_to(p.dir);
        entries[i] = user::load_elf(p.elf);
        out.str("procs: ");
        out.str(p.name);
        out.str(" at ");
        out.hex(entries[i] as u64);
        out.str(", cr3 ");
        out.hex(p.dir as u32 as u64);
        out.str("\n");
    }
    let mut code = 0;
    for slice in 0..SLICES {
        let n = if slice + 1 == SLICES { rounds - rounds / SLICES * (SLICES - 1) } else { rounds / SLICES };
        for (i, p) in programs.iter().enumerate() {
            switch_to(p.dir);
            code = user::enter(entries[i], n);
            if code != 0 {
                panic!("procs=on: {} exited with {}", p.name, code);
            }
        }
    }
    paging_off();
    out.str("procs: done, ");
    out.dec((SLICES * 2) as u64);
    out.str(" turns\n");
    code
}

/// `exec=on`: A, B, A, B, ... (SLICES turns each, `rounds` rounds each in all), each turn
/// loading its program anew into A's directory and window; returns the last exit code.
#[inline(never)]
pub fn run_exec(rounds: u32, out: &mut Com1) -> u32 {
    let programs = [("user.elf", USER_A_ELF), ("user-b.elf", USER_B_ELF)];
    user::init_entry();
    let dir = &raw mut DIR_A;
    fill_directory(dir, user::USER_BASE);
    switch_to(dir);
    let mut code = 0;
    for slice in 0..SLICES {
        let n = if slice + 1 == SLICES { rounds - rounds / SLICES * (SLICES - 1) } else { rounds / SLICES };
        for (name, elf) in programs {
            let entry = user::load_elf(elf);
            if slice == 0 {
                out.str("exec: ");
                out.str(name);
                out.str(" at ");
                out.hex(entry as u64);
                out.str(", cr3 ");
                out.hex(dir as u32 as u64);
                out.str("\n");
            }
            code = user::enter(entry, n);
            if code != 0 {
                panic!("exec=on: {} exited with {}", name, code);
            }
        }
    }
    paging_off();
    out.str("exec: done, ");
    out.dec((SLICES * 2) as u64);
    out.str(" turns\n");
    code
}

/// Identity-maps RAM (supervisor only) and maps the user window to `phys` (user).
fn fill_directory(dir: *mut PageDirectory, phys: u32) {
    let dir = unsafe { &mut (*dir).0 };
    for (i, e) in dir.iter_mut().enumerate().take(IDENTITY_PDES) {
        *e = (i as u32) << 22 | PDE_PRESENT | PDE_WRITE | PDE_4M;
    }
    for i in USER_PDE_FIRST..USER_PDE_END {
        let frame = phys + (((i - USER_PDE_FIRST) as u32) << 22);
        dir[i] = frame | PDE_PRESENT | PDE_WRITE | PDE_USER | PDE_4M;
    }
}

/// Loads CR3 with `dir`, turning paging (with 4 MiB pages) on the first time.
fn switch_to(dir: *mut PageDirectory) {
    unsafe {
        asm!(
            "mov cr3, {dir}",
            "mov {t}, cr4",
            "or {t}, 0x10",                 /* PSE */
            "mov cr4, {t}",
            "mov {t}, cr0",
            "or {t}, 0x80000000",           /* PG */
            "mov cr0, {t}",
            dir = in(reg) dir as u32,
            t = out(reg) _,
            options(nostack),
        );
    }
}

/// Back to physical addressing, as the other modes run; CR3 = 0, so that samples from here
/// on carry no program's directory.
fn paging_off() {
    unsafe {
        asm!(
            "mov {t}, cr0",
            "and {t}, 0x7fffffff",
            "mov cr0, {t}",
            "xor {t}, {t}",
            "mov cr3, {t}",
            "mov {t}, cr4",
            "and {t}, 0xffffffef",
            "mov cr4, {t}",
            t = out(reg) _,
            options(nostack),
        );
    }
}
