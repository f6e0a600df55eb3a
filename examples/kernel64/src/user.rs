//! `user=on`: a ring-3 program (examples/kernel-common/user, its own ELF) that enters the kernel
//! through `int 0x80` system calls, as in the i386 kernel (examples/kernel/src/user.rs).
//!
//! The program's ELF (built by scripts/guests/build-kernel-x86_64.sh, debug info stripped) is
//! embedded with `include_bytes!`; its PT_LOAD segments are copied to their link addresses
//! (64 MiB and up) through the boot page tables' identity map of the first GiB, whose 2 MiB
//! pages from 64 to 80 MiB (the program and its stack) get the U bit, with the PML4 and PDPT
//! entries above them; the rest of the map, and the higher half, stay supervisor-only. A GDT
//! of its own (the boot GDT's ring-0 segments, 64-bit ring-3 code and data, a 64-bit TSS whose
//! RSP0 is the system calls' stack) replaces the boot one. `enter_user` saves the kernel's
//! registers and `iretq`s to the program's entry with RDI = rounds, the classic way (V6 Unix,
//! xv6): a fake return address of all ones at the top of the user stack (RSP =
//! USER_STACK_TOP - 8) and RBP left as the kernel had it (`enter_user`'s own frame pointer, on
//! the kernel's stack), so the program's first frame record holds garbage that a walk must
//! not follow. `exit` comes back through the saved registers, as if `enter_user` returned.
//!
//! System calls: `int 0x80`, RAX = number, RDI and RSI = arguments, result in RAX; every
//! other general register is preserved (no SSE state: the kernel's handlers are integer code).
//! With `syscall=on` the program makes them with the `SYSCALL` instruction instead (RSI = 1
//! at its entry tells it to; RCX and R11 are lost, as the instruction uses them):
//! `syscall_instr_entry` (LSTAR) pushes nothing the CPU did not, so it switches to the
//! kernel stack (a static holding its top, as a per-CPU variable would on SMP) and pushes
//! the frame `int 0x80` would have left there, `SS, RSP, RFLAGS (R11), CS, RIP (RCX)`, as
//! Linux's `entry_SYSCALL_64` and Redox's stub do, then does what `syscall_entry` does, in
//! its own copy of that code, and returns by `iretq` (no `sysretq`: STAR's user half is
//! unused).
//!
//! | RAX | call | does |
//! | --- | --- | --- |
//! | 0 | `exit(code)` | ends the program: `enter_user` returns `code` |
//! | 1 | `work(seed, iters)` | `sys_work`: `iters` iterations of the leaf loop, returns the hash |
//! | 2 | `write(ptr, len)` | writes user bytes to COM1, returns `len` |
//!
//! Stacks: the handler runs on its own kernel stack (KSTACK_TOP: 96 MiB of RAM seen through the
//! higher half, 0xffffffff86000000), apart from the user stack as in real kernels.
//! `syscall_entry` starts with `push rbp; mov rbp, rsp` right below the CPU's interrupt frame,
//! making a frame record of the user's RBP and the interrupted RIP, so a frame-pointer walk
//! from `sys_work` goes on into the user stack, through the program's frames up to its
//! `_start`, whose record holds the fake return address. Built with `bare_entries` (the
//! kernel without frame pointers), the stub pushes the user's RBP with the other registers and
//! makes no frame record, and has no CFI, as hobby kernels write their stubs: kern-profile
//! finds the CPU's frame from the stub's own instructions.

use core::arch::{asm, global_asm};

use kernel_common::console::Console;
use kernel_common::serial::Com1;
use kernel_common::x86::idt;

/// The program (stripped of debug info; target/examples/user-x86_64.elf has it all).
static USER_ELF: &[u8] = include_bytes!(env!("KP_USER_ELF"));

/// Where the program may load (user/linker.ld links it at USER_BASE).
pub const USER_BASE: u64 = 0x0400_0000;
/// Top of the user stack (64 KiB below it must be free of the program's segments).
pub const USER_STACK_TOP: u64 = 0x0500_0000;
const USER_STACK_SIZE: u64 = 0x1_0000;
/// Top of the ring-0 stack of system calls (the TSS's RSP0; 16 KiB below it are free RAM,
/// -m 128M), in the higher half.
pub const KSTACK_TOP: u64 = KERNEL_VMA + KSTACK_TOP_PHYS;
const KSTACK_TOP_PHYS: u64 = 0x0600_0000;
/// Where the boot page tables map the first GiB a second time (src/boot.rs).
const KERNEL_VMA: u64 = 0xffff_ffff_8000_0000;

/// Selectors of the GDT below.
const KERNEL_DS: u16 = 0x10;
const USER_CS: u16 = 0x18 | 3;
const USER_DS: u16 = 0x20 | 3;
const TSS_SEL: u16 = 0x28;

pub const SYS_EXIT: u64 = 0;
pub const SYS_WORK: u64 = 1;
pub const SYS_WRITE: u64 = 2;

/// null, 0x08 = 64-bit ring-0 code, 0x10 = ring-0 data (the boot GDT's), 0x18 = 64-bit ring-3
/// code, 0x20 = ring-3 data, 0x28 = the 64-bit TSS (16 bytes, filled in by `init_entry`).
/// In .data (not .bss), as every static of user=on: the default run's boot stays the same.
#[repr(C, align(16))]
struct Gdt([u64; 7]);

#[link_section = ".data.user"]
static mut GDT: Gdt =
    Gdt([0, 0x00AF_9A00_0000_FFFF, 0x00CF_9200_0000_FFFF, 0x00AF_FA00_0000_FFFF, 0x00CF_F200_0000_FFFF, 0, 0]);

/// The 64-bit TSS (104 bytes): only RSP0 (the ring-0 stack of system calls) is used.
#[repr(C, align(16))]
struct Tss([u32; 26]);

#[link_section = ".data.user"]
static mut TSS: Tss = Tss([0; 26]);

/// The kernel's RSP inside `enter_user`, for `exit`.
#[link_section = ".data.user"]
static mut SAVED_RSP: u64 = 0;

/// `SYSCALL`'s kernel stack, and where its stub keeps the user's RSP meanwhile.
#[link_section = ".data.user"]
static mut SYSCALL_KSTACK: u64 = KSTACK_TOP;
#[link_section = ".data.user"]
static mut SYSCALL_USER_RSP: u64 = 0;

/// The MSRs `SYSCALL` reads: EFER (SCE, bit 0, enables it), STAR (the kernel's CS in bits
/// 32..47), LSTAR (the entry), FMASK (RFLAGS bits cleared at the entry).
const MSR_EFER: u32 = 0xC000_0080;
const MSR_STAR: u32 = 0xC000_0081;
const MSR_LSTAR: u32 = 0xC000_0082;
const MSR_FMASK: u32 = 0xC000_0084;

/// The registers `syscall_entry` saves, lowest address first.
#[repr(C)]
pub struct SyscallFrame {
    pub rax: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    /// The user's RBP: with `rip` just above it, a frame record.
    pub rbp: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

// The system-call stub's frame record: with one, linking the kernel's walk to the user's; or
// (`bare_entries`, the kernel without frame pointers) as hobby kernels write their stubs,
// with none: kern-profile then finds the CPU's frame from the stub's own instructions. The
// saved registers (`SyscallFrame`) are the same either way.
#[cfg(not(bare_entries))]
macro_rules! SYSCALL_FRAME {
    () => {
        r#"
    push rbp                        /* [RBP] = user RBP, [RBP + 8] = user RIP: a frame */
    mov rbp, rsp                    /* record that links the kernel's walk to the user's */
"#
    };
}
#[cfg(bare_entries)]
macro_rules! SYSCALL_FRAME {
    () => {
        "    push rbp                        /* the user's RBP, SyscallFrame.rbp: no frame record */"
    };
}

// What both system-call stubs do once the CPU's frame (or its copy) is on the kernel stack:
// save the registers (`SyscallFrame`), call the dispatcher, return by `iretq`. Each stub has
// its own copy, as Linux's and Redox's entries have their own code.
macro_rules! SYSCALL_BODY {
    () => {
        r#"
    push r11
    push r10
    push r9
    push r8
    push rcx
    push rdx
    push rsi
    push rdi
    push rax
    mov rdi, rsp                    /* &SyscallFrame */
    sub rsp, 8                      /* 16-aligned at the call: 15 words pushed, and this one */
    call {dispatch}
    add rsp, 8
    mov qword ptr [rsp], rax        /* the result, in the user's RAX */
    pop rax
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop r8
    pop r9
    pop r10
    pop r11
    pop rbp
    iretq
"#
    };
}

global_asm!(
    r#"
    /* int 0x80 from ring 3: the CPU switched to the TSS's RSP0 (16-aligned) and pushed SS,
       RSP, RFLAGS, CS, RIP: RSP is 8 mod 16 here. */
    .section .text.syscall_entry, "ax"
    .global syscall_entry
    .type syscall_entry, @function
syscall_entry:
"#,
    SYSCALL_FRAME!(),
    SYSCALL_BODY!(),
    r#"
    .size syscall_entry, . - syscall_entry

    /* SYSCALL (syscall=on): RCX = the user's RIP, R11 = its RFLAGS, RSP still the user's. */
    .section .text.syscall_instr_entry, "ax"
    .global syscall_instr_entry
    .type syscall_instr_entry, @function
syscall_instr_entry:
    mov qword ptr [rip + {user_rsp}], rsp
    mov rsp, qword ptr [rip + {kstack}]
    push {uds}                      /* SS */
    push qword ptr [rip + {user_rsp}] /* RSP */
    push r11                        /* RFLAGS */
    push {ucs}                      /* CS */
    push rcx                        /* RIP: the frame int 0x80 leaves */
"#,
    SYSCALL_FRAME!(),
    SYSCALL_BODY!(),
    r#"
    .size syscall_instr_entry, . - syscall_instr_entry

    /* u64 enter_user(entry, user_rsp, arg, arg2): runs the program until it calls exit. */
    .section .text.enter_user, "ax"
    .global enter_user
    .type enter_user, @function
enter_user:
    push rbp
    mov rbp, rsp
    push rbx
    push r12
    push r13
    push r14
    push r15
    mov qword ptr [rip + {saved}], rsp
    sub rsi, 8                      /* the classic start (V6 Unix, xv6): a fake return */
    mov qword ptr [rsi], -1         /* address at the top of the user stack */
    push {uds}                      /* SS */
    push rsi                        /* RSP */
    push 0x2                        /* RFLAGS: interrupts off (as everywhere), IOPL 0 */
    push {ucs}                      /* CS */
    push rdi                        /* RIP */
    mov ax, {uds}
    mov ds, ax
    mov es, ax
    mov rdi, rdx                    /* the program's arguments: rounds */
    mov rsi, rcx                    /* and 1 for SYSCALL */
    xor eax, eax
    xor ebx, ebx
    xor ecx, ecx
    xor edx, edx
    xor r8d, r8d
    xor r9d, r9d
    xor r10d, r10d
    xor r11d, r11d
    xor r12d, r12d
    xor r13d, r13d
    xor r14d, r14d
    xor r15d, r15d
    /* RBP stays this frame's (a kernel stack address), as classic kernels leave whatever
       the trap frame held: the program's first frame record saves garbage. */
    iretq
    .size enter_user, . - enter_user

    /* exit: back on the kernel stack of enter_user, which returns RDI. */
    .global user_exit_to_kernel
    .type user_exit_to_kernel, @function
user_exit_to_kernel:
    mov rax, rdi
    mov cx, {kds}
    mov ds, cx
    mov es, cx
    mov rsp, qword ptr [rip + {saved}]
    pop r15
    pop r14
    pop r13
    pop r12
    pop rbx
    pop rbp
    ret
    .size user_exit_to_kernel, . - user_exit_to_kernel
    "#,
    kds = const KERNEL_DS,
    uds = const USER_DS,
    ucs = const USER_CS,
    dispatch = sym syscall_dispatch,
    saved = sym SAVED_RSP,
    user_rsp = sym SYSCALL_USER_RSP,
    kstack = sym SYSCALL_KSTACK,
);

extern "C" {
    fn syscall_entry();
    fn syscall_instr_entry();
    fn enter_user(entry: u64, user_rsp: u64, arg: u64, arg2: u64) -> u64;
    fn user_exit_to_kernel(code: u64) -> !;
}

/// Loads the program, runs it with `rounds` (its system calls through `SYSCALL` when
/// `syscall_instr`), returns its exit code. A real call (never inlined into kmain): its
/// frame shows.
#[inline(never)]
pub fn run(rounds: u32, syscall_instr: bool, mem_end: Option<usize>, out: &mut Com1) -> u32 {
    if mem_end.is_some_and(|end| (end as u64) < KSTACK_TOP_PHYS) {
        panic!("user=on needs RAM up to {:#x}", KSTACK_TOP_PHYS);
    }
    let entry = load_elf(USER_ELF);
    init_entry();
    if syscall_instr {
        init_syscall_instr();
    }

    out.str("user: entering ring 3 at ");
    out.hex(entry);
    out.str(if syscall_instr { " (system calls by SYSCALL)\n" } else { "\n" });
    unsafe { enter_user(entry, USER_STACK_TOP, rounds as u64, syscall_instr as u64) as u32 }
}

/// `SYSCALL` on, entering `syscall_instr_entry` on the kernel's CS with interrupts, traps
/// and the direction flag cleared.
fn init_syscall_instr() {
    let wrmsr = |msr: u32, v: u64| unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") v as u32, in("edx") (v >> 32) as u32, options(nostack, preserves_flags));
    };
    let efer: u64 = unsafe {
        let (lo, hi): (u32, u32);
        asm!("rdmsr", in("ecx") MSR_EFER, out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags));
        (hi as u64) << 32 | lo as u64
    };
    wrmsr(MSR_EFER, efer | 1);
    wrmsr(MSR_STAR, 0x08u64 << 32);
    wrmsr(MSR_LSTAR, syscall_instr_entry as *const () as u64);
    wrmsr(MSR_FMASK, 0x700);
}

/// The user pages, the GDT with the TSS (RSP0 = the system calls' stack) and the `int 0x80`
/// gate of the full IDT.
#[inline(always)]
fn init_entry() {
    user_pages();
    unsafe {
        let tss = &raw mut TSS;
        (*tss).0[1] = KSTACK_TOP as u32; // RSP0, low half
        (*tss).0[2] = (KSTACK_TOP >> 32) as u32; // RSP0, high half
        (*tss).0[25] = (core::mem::size_of::<Tss>() as u32) << 16; // I/O map base: none
        let base = tss as u64;
        let limit = core::mem::size_of::<Tss>() as u64 - 1;
        // Present, DPL 0, 64-bit available TSS (type 9), byte granularity; the upper half of
        // the 16-byte descriptor holds bits 32..63 of the base.
        let desc = (limit & 0xFFFF)
            | ((base & 0xFF_FFFF) << 16)
            | (0x89u64 << 40)
            | (((limit >> 16) & 0xF) << 48)
            | (((base >> 24) & 0xFF) << 56);
        let gdt = &raw mut GDT;
        (*gdt).0[(TSS_SEL >> 3) as usize] = desc;
        (*gdt).0[(TSS_SEL >> 3) as usize + 1] = base >> 32;
        let ptr = idt::DescriptorPtr { limit: (core::mem::size_of::<Gdt>() - 1) as u16, base: gdt as usize };
        // CS (0x08) and SS (0x10) name the same descriptors in the new GDT.
        asm!("lgdt [{}]", in(reg) &ptr, options(readonly, nostack, preserves_flags));
        asm!("ltr {0:x}", in(reg) TSS_SEL, options(nomem, nostack, preserves_flags));
    }
    idt::init_full();
    idt::set_gate(0x80, syscall_entry as *const () as usize, 3);
    idt::load_full();
}

/// The U bit on the identity map's 2 MiB pages of `[USER_BASE, USER_STACK_TOP)` and on the
/// PML4 and PDPT entries above them (an access from ring 3 needs it at every level), then a
/// TLB flush. The page tables are the boot ones (src/boot.rs), read through CR3 and the
/// identity map.
fn user_pages() {
    const U: u64 = 1 << 2;
    const ADDR: u64 = 0x000f_ffff_ffff_f000;
    unsafe {
        let cr3: u64;
        asm!("mov {}, cr3", out(reg) cr3, options(nomem, nostack, preserves_flags));
        let pml4 = (cr3 & ADDR) as *mut u64;
        *pml4 |= U;
        let pdpt = (*pml4 & ADDR) as *mut u64;
        *pdpt |= U;
        let pd = (*pdpt & ADDR) as *mut u64;
        for i in (USER_BASE >> 21)..(USER_STACK_TOP >> 21) {
            *pd.add(i as usize) |= U;
        }
        asm!("mov cr3, {}", in(reg) cr3, options(nostack, preserves_flags));
    }
}

/// Copies the PT_LOAD segments of an ELF64 x86_64 executable to their addresses (zeroing
/// what the file does not hold) and returns its entry point.
fn load_elf(elf: &[u8]) -> u64 {
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes([elf[o], elf[o + 1], elf[o + 2], elf[o + 3]]);
    let u64_at = |o: usize| u32_at(o) as u64 | (u32_at(o + 4) as u64) << 32;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || u16_at(18) != 62 {
        panic!("the embedded user program is not an ELF64 x86_64 executable");
    }
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54), u16_at(56));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if ph + 56 > elf.len() || u32_at(ph) != 1 {
            continue; // not PT_LOAD
        }
        let (off, vaddr, filesz, memsz) =
            (u64_at(ph + 8) as usize, u64_at(ph + 16), u64_at(ph + 32) as usize, u64_at(ph + 40));
        let end = vaddr.saturating_add(memsz);
        if vaddr < USER_BASE || end > USER_STACK_TOP - USER_STACK_SIZE || off + filesz > elf.len() {
            panic!("user program segment {:#x}+{:#x} outside the user area", vaddr, memsz);
        }
        unsafe {
            let dst = vaddr as *mut u8;
            core::ptr::copy_nonoverlapping(elf.as_ptr().add(off), dst, filesz);
            core::ptr::write_bytes(dst.add(filesz), 0, memsz as usize - filesz);
        }
    }
    u64_at(24)
}

/// Called by `syscall_entry` with the saved user registers.
extern "C" fn syscall_dispatch(frame: &mut SyscallFrame) -> u64 {
    let mut r = match frame.rax {
        SYS_EXIT => unsafe { user_exit_to_kernel(frame.rdi) },
        SYS_WORK => sys_work(frame.rdi as u32, frame.rsi as u32) as u64,
        SYS_WRITE => sys_write(frame.rdi, frame.rsi),
        _ => u64::MAX,
    };
    // A barrier after the calls: without it they become tail jumps, and the handlers'
    // stacks would lose this frame.
    unsafe { asm!("/* {0} */", inout(reg) r, options(nomem, nostack, preserves_flags)) };
    r
}

/// The kernel's share of a round: `iters` iterations of the leaf loop (6 instructions each,
/// as in kernel_common::leaf_loop!).
#[inline(never)]
pub fn sys_work(seed: u32, iters: u32) -> u32 {
    let mut n: u32 = iters;
    unsafe { asm!("/* {0:e} */", inout(reg) n, options(nomem, nostack, preserves_flags)) };
    let mut acc = seed;
    let mut i: u32 = 0;
    while i < n {
        let mut v = ((acc << 5) | (acc >> 27)) ^ i;
        unsafe { asm!("/* {0:e} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        acc = v * 0x9E37_79B9;
        i += 1;
    }
    acc
}

/// Writes the user's bytes `[ptr, ptr + len)` to COM1 (the range must lie in the user area).
#[inline(never)]
fn sys_write(ptr: u64, len: u64) -> u64 {
    let end = ptr.saturating_add(len);
    if ptr < USER_BASE || end > USER_STACK_TOP {
        return u64::MAX;
    }
    let bytes = unsafe { core::slice::from_raw_parts(ptr as *const u8, len as usize) };
    Com1.bytes(bytes);
    len
}
