//! `user=on`: a ring-3 program (examples/kernel-common/user, its own ELF) that enters the kernel
//! through `int 0x80` system calls.
//!
//! The program's ELF (built by scripts/guests/build-kernel.sh, debug info stripped) is embedded
//! with `include_bytes!`; its PT_LOAD segments are copied to their link addresses (64 MiB
//! and up: paging stays off, so user code runs at its physical address; privilege comes
//! from the segments: ring-3 code and data selectors, IOPL 0). The TSS gives the ring-0
//! stack system calls run on. `enter_user` saves the kernel's registers and `iret`s to the
//! program's entry with EAX = rounds, the classic way (V6 Unix, xv6): a fake return address
//! 0xffffffff at the top of the user stack (ESP = USER_STACK_TOP - 4) and EBP left as the
//! kernel had it (`enter_user`'s own frame pointer, on the kernel's stack), so the program's
//! first frame record holds garbage that a walk must not follow. `exit` comes back through
//! the saved registers, as if `enter_user` returned.
//!
//! System calls: `int 0x80`, EAX = number, ECX and EDX = arguments, result in EAX.
//!
//! | EAX | call | does |
//! | --- | --- | --- |
//! | 0 | `exit(code)` | ends the program: `enter_user` returns `code` |
//! | 1 | `work(seed, iters)` | `sys_work`: `iters` iterations of the leaf loop, returns the hash |
//! | 2 | `write(ptr, len)` | writes user bytes to COM1, returns `len` |
//!
//! Stacks: the handler runs on its own kernel stack (KSTACK_TOP, at 96 MiB), which lies
//! above the user stack as kernel stacks do in real kernels (the higher half).
//! `syscall_entry` starts with `push ebp; mov ebp, esp` right below the CPU's interrupt
//! frame, making a frame record of the user's EBP and the interrupted EIP, so a
//! frame-pointer walk from `sys_work` goes on *down* into the user stack, through the
//! program's frames up to its `_start`, whose record holds the fake return address: the
//! walker recognises the interrupt frame above that record as a kernel entry, and ends the
//! user stack at the fake return address.

use core::arch::{asm, global_asm};

use crate::boot;
use kernel_common::x86::idt;
use kernel_common::console::Console;
use kernel_common::serial::Com1;

/// The program (stripped of debug info; target/examples/user.elf has it all).
static USER_ELF: &[u8] = include_bytes!(env!("KP_USER_ELF"));

/// Where the program may load (user/linker.ld links it at USER_BASE).
pub const USER_BASE: u32 = 0x0400_0000;
/// Top of the user stack (64 KiB below it must be free of the program's segments).
pub const USER_STACK_TOP: u32 = 0x0500_0000;
const USER_STACK_SIZE: u32 = 0x1_0000;
/// Top of the ring-0 stack of system calls (the TSS's ESP0; 16 KiB below it are free RAM,
/// -m 128M): above the user stack, as in a higher-half kernel.
pub const KSTACK_TOP: u32 = 0x0600_0000;

pub const SYS_EXIT: u32 = 0;
pub const SYS_WORK: u32 = 1;
pub const SYS_WRITE: u32 = 2;

/// The 32-bit TSS: only SS0:ESP0 (the ring-0 stack of system calls) is used.
#[repr(C, align(16))]
struct Tss([u32; 26]);

#[link_section = ".data.user"]
static mut TSS: Tss = Tss([0; 26]);

/// The kernel's ESP inside `enter_user`, for `exit` (in .data: see src/smp.rs on .bss).
#[link_section = ".data.user"]
static mut SAVED_ESP: u32 = 0;

/// The registers `syscall_entry` saves, lowest address first.
#[repr(C)]
pub struct SyscallFrame {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
    pub esi: u32,
    pub edi: u32,
    pub es: u32,
    pub ds: u32,
    /// The user's EBP: with `eip` just above it, a frame record.
    pub ebp: u32,
    pub eip: u32,
    pub cs: u32,
    pub eflags: u32,
    pub esp: u32,
    pub ss: u32,
}

// The system-call stub's frame record: with one, linking the kernel's walk to the user's; or
// (`bare_entries`, the kernels without frame pointers) as hobby kernels write their stubs,
// with none: kern-profile then finds the CPU's frame from the stub's own instructions. The
// saved registers (`SyscallFrame`) are the same either way.
#[cfg(not(bare_entries))]
macro_rules! SYSCALL_FRAME {
    () => {
        r#"
    push ebp                        /* [EBP] = user EBP, [EBP + 4] = user EIP: a frame */
    mov ebp, esp                    /* record that links the kernel's walk to the user's */
"#
    };
}
#[cfg(bare_entries)]
macro_rules! SYSCALL_FRAME {
    () => {
        "    push ebp                        /* the user's EBP, SyscallFrame.ebp: no frame record */"
    };
}
// Back to `&SyscallFrame` after the call.
#[cfg(not(bare_entries))]
macro_rules! SYSCALL_BACK {
    () => {
        "    lea esp, [ebp - 32]"
    };
}
#[cfg(bare_entries)]
macro_rules! SYSCALL_BACK {
    () => {
        "    pop esp                         /* the pointer pushed for the handler */"
    };
}

global_asm!(
    r#"
    /* int 0x80 from ring 3: the CPU switched to the TSS's stack and pushed SS, ESP,
       EFLAGS, CS, EIP. */
    .section .text.syscall_entry, "ax"
    .global syscall_entry
    .type syscall_entry, @function
syscall_entry:
"#,
    SYSCALL_FRAME!(),
    r#"
    .byte 0x1e                      /* push ds (32-bit; LLVM assembles `push ds` as pushw) */
    .byte 0x06                      /* push es */
    push edi
    push esi
    push edx
    push ecx
    push ebx
    push eax
    mov ax, {kds}
    mov ds, ax
    mov es, ax
    mov eax, esp                    /* &SyscallFrame */
    and esp, -16
    sub esp, 12
    push eax
    call {dispatch}
"#,
    SYSCALL_BACK!(),
    r#"
    mov dword ptr [esp], eax        /* the result, in the user's EAX */
    pop eax
    pop ebx
    pop ecx
    pop edx
    pop esi
    pop edi
    .byte 0x07                      /* pop es */
    .byte 0x1f                      /* pop ds */
    pop ebp
    iretd
    .size syscall_entry, . - syscall_entry

    /* u32 enter_user(entry, user_esp, arg): runs the program until it calls exit. */
    .section .text.enter_user, "ax"
    .global enter_user
    .type enter_user, @function
enter_user:
    push ebp
    mov ebp, esp
    push ebx
    push esi
    push edi
    mov dword ptr [{saved}], esp
    mov eax, dword ptr [ebp + 8]
    mov ecx, dword ptr [ebp + 12]
    mov edx, dword ptr [ebp + 16]
    sub ecx, 4                      /* the classic start (V6 Unix, xv6): a fake return */
    mov dword ptr [ecx], 0xffffffff /* address at the top of the user stack */
    push {uds}                      /* SS */
    push ecx                        /* ESP */
    push 0x2                        /* EFLAGS: interrupts off (as everywhere), IOPL 0 */
    push {ucs}                      /* CS */
    push eax                        /* EIP */
    mov ax, {uds}
    mov ds, ax
    mov es, ax
    mov fs, ax
    mov gs, ax
    mov eax, edx                    /* the program's argument: rounds */
    xor ebx, ebx
    xor ecx, ecx
    xor edx, edx
    xor esi, esi
    xor edi, edi
    /* EBP stays this frame's (a kernel stack address), as classic kernels leave whatever
       the trap frame held: the program's first frame record saves garbage. */
    iretd
    .size enter_user, . - enter_user

    /* exit: back on the kernel stack of enter_user, which returns EAX. */
    .global user_exit_to_kernel
    .type user_exit_to_kernel, @function
user_exit_to_kernel:
    mov eax, dword ptr [esp + 4]
    mov cx, {kds}
    mov ds, cx
    mov es, cx
    mov fs, cx
    mov gs, cx
    mov esp, dword ptr [{saved}]
    pop edi
    pop esi
    pop ebx
    pop ebp
    ret
    .size user_exit_to_kernel, . - user_exit_to_kernel
    "#,
    kds = const boot::KERNEL_DS,
    uds = const boot::USER_DS,
    ucs = const boot::USER_CS,
    dispatch = sym syscall_dispatch,
    saved = sym SAVED_ESP,
);

extern "C" {
    fn syscall_entry();
    fn enter_user(entry: u32, user_esp: u32, arg: u32) -> u32;
    fn user_exit_to_kernel(code: u32) -> !;
}

/// Loads the program, runs it with `rounds`, returns its exit code. A real call (never
/// inlined into kmain): its frame shows.
#[inline(never)]
pub fn run(rounds: u32, mem_end: Option<usize>, out: &mut Com1) -> u32 {
    if mem_end.is_some_and(|end| end < KSTACK_TOP as usize) {
        panic!("user=on needs RAM up to {:#x}", KSTACK_TOP);
    }
    let entry = load_elf(USER_ELF);
    init_entry();

    out.str("user: entering ring 3 at ");
    out.hex(entry as u64);
    out.str("\n");
    unsafe { enter_user(entry, USER_STACK_TOP, rounds) }
}

/// The TSS (SS0:ESP0 = the system calls' stack) and the `int 0x80` gate of the full IDT.
/// Inlined: `run`'s instructions stay what `[user]` in expected.toml measured.
#[inline(always)]
pub(crate) fn init_entry() {
    // The TSS: ring-0 stack for system calls; no I/O bitmap (its offset past the limit).
    unsafe {
        let tss = &raw mut TSS;
        (*tss).0[1] = KSTACK_TOP; // ESP0
        (*tss).0[2] = boot::KERNEL_DS as u32; // SS0
        (*tss).0[25] = (core::mem::size_of::<Tss>() as u32) << 16; // I/O map base
        let base = tss as u32 as u64;
        let limit = core::mem::size_of::<Tss>() as u64 - 1;
        // Present, DPL 0, 32-bit available TSS (type 9), byte granularity.
        let desc = (limit & 0xFFFF)
            | ((base & 0xFF_FFFF) << 16)
            | (0x89u64 << 40)
            | (((limit >> 16) & 0xF) << 48)
            | ((base >> 24) << 56);
        boot::set_gdt_entry((boot::TSS_SEL >> 3) as usize, desc);
        asm!("ltr {0:x}", in(reg) boot::TSS_SEL, options(nomem, nostack, preserves_flags));
    }
    idt::init_full();
    idt::set_gate(0x80, syscall_entry as usize, 3);
    idt::load_full();
}

/// Runs the program loaded at `entry` in ring 3 with `arg` (EAX) until it calls `exit`;
/// returns the exit code. The caller has loaded it and called [`init_entry`].
pub(crate) fn enter(entry: u32, arg: u32) -> u32 {
    unsafe { enter_user(entry, USER_STACK_TOP, arg) }
}

/// Copies the PT_LOAD segments of an ELF32 i386 executable to their addresses (zeroing
/// what the file does not hold) and returns its entry point.
pub(crate) fn load_elf(elf: &[u8]) -> u32 {
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes([elf[o], elf[o + 1], elf[o + 2], elf[o + 3]]);
    if elf.len() < 52 || &elf[..4] != b"\x7fELF" || elf[4] != 1 || u16_at(18) != 3 {
        panic!("the embedded user program is not an ELF32 i386 executable");
    }
    let (phoff, phentsize, phnum) = (u32_at(28) as usize, u16_at(42), u16_at(44));
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if ph + 32 > elf.len() || u32_at(ph) != 1 {
            continue; // not PT_LOAD
        }
        let (off, vaddr, filesz, memsz) =
            (u32_at(ph + 4) as usize, u32_at(ph + 8), u32_at(ph + 16) as usize, u32_at(ph + 20));
        let end = vaddr as u64 + memsz as u64;
        if vaddr < USER_BASE || end > (USER_STACK_TOP - USER_STACK_SIZE) as u64 || off + filesz > elf.len() {
            panic!("user program segment {:#x}+{:#x} outside the user area", vaddr, memsz);
        }
        unsafe {
            let dst = vaddr as *mut u8;
            core::ptr::copy_nonoverlapping(elf.as_ptr().add(off), dst, filesz);
            core::ptr::write_bytes(dst.add(filesz), 0, memsz as usize - filesz);
        }
    }
    u32_at(24)
}

/// Called by `syscall_entry` with the saved user registers.
extern "C" fn syscall_dispatch(frame: &mut SyscallFrame) -> u32 {
    let mut r = match frame.eax {
        SYS_EXIT => unsafe { user_exit_to_kernel(frame.ecx) },
        SYS_WORK => sys_work(frame.ecx, frame.edx),
        SYS_WRITE => sys_write(frame.ecx, frame.edx),
        _ => u32::MAX,
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
    unsafe { asm!("/* {0} */", inout(reg) n, options(nomem, nostack, preserves_flags)) };
    let mut acc = seed;
    let mut i: u32 = 0;
    while i < n {
        let mut v = ((acc << 5) | (acc >> 27)) ^ i;
        unsafe { asm!("/* {0} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        acc = v * 0x9E37_79B9;
        i += 1;
    }
    acc
}

/// Writes the user's bytes `[ptr, ptr + len)` to COM1 (the range must lie in the user area).
#[inline(never)]
fn sys_write(ptr: u32, len: u32) -> u32 {
    let end = ptr as u64 + len as u64;
    if ptr < USER_BASE || end > USER_STACK_TOP as u64 {
        return u32::MAX;
    }
    let bytes = unsafe { core::slice::from_raw_parts(ptr as *const u8, len as usize) };
    Com1.bytes(bytes);
    len
}
