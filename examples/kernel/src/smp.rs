//! `smp=on`: every CPU runs a workload of its own.
//!
//! The boot CPU (BSP) finds the CPUs in the ACPI MADT, copies a real-mode trampoline below
//! 1 MiB and starts each application processor (AP) with INIT-SIPI-SIPI through its local
//! APIC. An AP leaves real mode in the trampoline, loads the kernel's GDT, takes its own
//! stack (by its APIC ID) in `ap_start32`, and runs `ap_main`. Every CPU — the BSP too —
//! then runs `smp_run` with `CPU n = APIC ID n` (QEMU's vCPU index n):
//!
//! ```text
//! smp_run                  loop over `rounds`
//! └─ smp_round(n)          once per round: ROUND_ITERS leaf iterations in all
//!    ├─ cpu_work_n         OWN_ITERS[n] iterations: CPU n's own function
//!    └─ smp_shared         ROUND_ITERS - OWN_ITERS[n] iterations: common to every CPU
//! ```
//!
//! so CPU n's profile is dominated by `cpu_work_n`, with a share that differs from CPU to
//! CPU (0.80, 0.72, 0.64, 0.56: examples/kernel/expected.toml, `[smp]`). An AP that is done
//! stores its checksum, counts itself done and wakes the BSP with an IPI, then halts. The
//! BSP, done with its own rounds, sleeps in `hlt` until every AP is done (an APIC timer
//! wakes it every 100 ms and gives up after 120 s), prints the checksums and goes on as in
//! the default run (allocation phase, exit). CPUs with APIC IDs of 8 or more are not
//! started. With `-smp 1`, the BSP runs its workload alone.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};

use kernel_common::console::Console;
use kernel_common::serial::Com1;
use crate::{acpi, apic};
use kernel_common::x86::idt;
use kernel_common::opaque;

// MAX_CPUS (workloads for APIC IDs 0..MAX_CPUS), ROUND_ITERS, OWN_ITERS and smp_run with
// what it calls: the workload every kernel shares.
kernel_common::smp_workload!(8);

/// Where the trampoline is copied: page 8 (SIPI vector 0x08), free conventional memory
/// below QEMU's multiboot information at 0x9000.
const TRAMPOLINE: usize = 0x8000;
/// An AP's stack (linker.ld: `.ap_stacks`, (MAX_CPUS - 1) stacks).
const AP_STACK_SHIFT: u32 = 14; // 16 KiB

const WAKE_VECTOR: u8 = 0x40;
const TIMER_VECTOR: u8 = 0x41;
/// 100 ms of QEMU's virtual time at the APIC clock (1 GHz) divided by 128.
const TIMER_COUNT: u32 = 781_250;
const WATCHDOG_TICKS: u32 = 1_200;

// Shared state: in .data rather than .bss (zero-initialised statics go to .bss, which the
// default run's boot zeroes: its instruction count would change with .bss's size).
#[link_section = ".data.smp"]
static ROUNDS: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.smp"]
static BSP_APIC: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.smp"]
static DONE: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.smp"]
static TICKS: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.smp"]
static EOI_REG: AtomicU32 = AtomicU32::new(0);
#[link_section = ".data.smp"]
static CHECKSUMS: [AtomicU32; MAX_CPUS as usize] = [const { AtomicU32::new(0) }; MAX_CPUS as usize];

global_asm!(
    r#"
    /* The AP trampoline, copied to {tramp} and entered in real mode at CS:IP = 0x0800:0
       by the SIPI. Data here (never run at its link address). */
    .section .rodata.ap_trampoline, "a"
    .code16
    .global ap_trampoline
ap_trampoline:
    cli
    cld
    xor ax, ax
    mov ds, ax
    /* o32 lgdt [{tramp} + offset]: with a 32-bit base (the GDT is above 1 MiB) */
    .byte 0x66, 0x0F, 0x01, 0x16
    .word {tramp} + (.Ltramp_gdt - ap_trampoline)
    mov eax, cr0
    or al, 1
    mov cr0, eax
    /* jmp far 0x08:ap_start32, 32-bit offset */
    .byte 0x66, 0xEA
    .long ap_start32
    .word 0x08
    .balign 4
.Ltramp_gdt:
    .word 6 * 8 - 1
    .long kernel_gdt
    .global ap_trampoline_end
ap_trampoline_end:
    .code32

    /* An AP in protected mode: flat segments, its own stack, SSE as on the BSP, then
       ap_main(apic_id) with EBP = 0 (the end of every frame-pointer walk). */
    .section .text.ap_start32, "ax"
    .global ap_start32
    .type ap_start32, @function
ap_start32:
    "#,
    kernel_common::x86_flat_data_segments!(),
    r#"
    mov eax, 1
    cpuid
    shr ebx, 24                     /* initial APIC ID */
    cmp ebx, {max_cpus}
    jae 2f
    test ebx, ebx
    jz 2f
    mov esp, ebx
    shl esp, {stack_shift}
    add esp, offset __ap_stacks_bottom   /* APIC ID n: the top of stack n - 1 */
    fninit
    test edx, 1 << 24
    jz 1f
    "#,
    kernel_common::x86_sse_on!("eax"),
    r#"
1:
    xor ebp, ebp
    sub esp, 12
    push ebx
    call {ap_main}
2:
    cli
    hlt
    jmp 2b
    .size ap_start32, . - ap_start32

    /* The BSP's wake-up IPI and timer: acknowledge (the timer also counts), return. */
    .macro eoi_iret
    push eax
    mov eax, dword ptr [{eoi}]
    mov dword ptr [eax], 0
    pop eax
    iretd
    .endm
    .section .text.smp_isr, "ax"
    .global smp_wake_isr
    .type smp_wake_isr, @function
smp_wake_isr:
    eoi_iret
    .size smp_wake_isr, . - smp_wake_isr
    .global smp_timer_isr
    .type smp_timer_isr, @function
smp_timer_isr:
    lock inc dword ptr [{ticks}]
    eoi_iret
    .size smp_timer_isr, . - smp_timer_isr
    .global smp_spurious_isr
    .type smp_spurious_isr, @function
smp_spurious_isr:
    iretd
    .size smp_spurious_isr, . - smp_spurious_isr
    "#,
    tramp = const TRAMPOLINE,
    max_cpus = const MAX_CPUS,
    stack_shift = const AP_STACK_SHIFT,
    ap_main = sym ap_main,
    eoi = sym EOI_REG,
    ticks = sym TICKS,
);

extern "C" {
    static ap_trampoline: u8;
    static ap_trampoline_end: u8;
    fn smp_wake_isr();
    fn smp_timer_isr();
    fn smp_spurious_isr();
}

/// The BSP's side: start the APs, run CPU 0's workload, wait for the others, report.
/// Returns the BSP's checksum. A real call (never inlined into kmain): its frame shows.
#[inline(never)]
pub fn run(rounds: u32, out: &mut Com1) -> u32 {
    apic::init_base();
    EOI_REG.store(apic::eoi_register(), Ordering::Relaxed);
    idt::init_full();
    idt::set_gate(WAKE_VECTOR, smp_wake_isr as usize, 0);
    idt::set_gate(TIMER_VECTOR, smp_timer_isr as usize, 0);
    idt::set_gate(apic::SPURIOUS_VECTOR, smp_spurious_isr as usize, 0);
    idt::load_full();
    apic::enable();
    let bsp = apic::id();
    BSP_APIC.store(bsp, Ordering::Relaxed);
    ROUNDS.store(rounds, Ordering::Relaxed);
    unsafe {
        let start = &ap_trampoline as *const u8;
        let len = &ap_trampoline_end as *const u8 as usize - start as usize;
        core::ptr::copy_nonoverlapping(start, TRAMPOLINE as *mut u8, len);
    }

    let mut aps = 0u32;
    match acpi::cpus() {
        None => out.str("smp: no ACPI MADT: the boot CPU runs alone\n"),
        Some(cpus) => {
            out.str("smp: ");
            out.dec(cpus.n as u64);
            out.str(" CPU(s) in the ACPI MADT, boot CPU APIC ID ");
            out.dec(bsp as u64);
            out.str("\n");
            for &id in &cpus.ids[..cpus.n] {
                let id = id as u32;
                if id == bsp {
                    continue;
                }
                if id >= MAX_CPUS {
                    out.str("smp: not starting APIC ID ");
                    out.dec(id as u64);
                    out.str(" (workloads for APIC IDs 0-7 only)\n");
                    continue;
                }
                start_ap(id);
                aps += 1;
            }
        }
    }
    out.str("smp: started ");
    out.dec(aps as u64);
    out.str(" application processor(s)\n");

    let mine = smp_run(bsp, rounds);
    if bsp < MAX_CPUS {
        CHECKSUMS[bsp as usize].store(mine, Ordering::Relaxed);
    }

    apic::start_timer(TIMER_VECTOR, TIMER_COUNT);
    let all = wait_for_aps(aps);
    apic::stop_timer();
    if !all {
        panic!(
            "smp: {} of {} application processors finished within {} s",
            DONE.load(Ordering::Acquire),
            aps,
            WATCHDOG_TICKS / 10
        );
    }
    for cpu in 0..MAX_CPUS {
        let c = CHECKSUMS[cpu as usize].load(Ordering::Acquire);
        if c != 0 {
            out.str("smp: cpu ");
            out.dec(cpu as u64);
            out.str(" checksum ");
            out.hex(c as u64);
            out.str("\n");
        }
    }
    mine
}

/// INIT, then two STARTUP IPIs pointing at the trampoline's page. The pauses between them
/// are nominal (QEMU needs none; real hardware wants ~10 ms and ~200 us).
fn start_ap(id: u32) {
    apic::send_ipi(id, apic::ICR_INIT | apic::ICR_ASSERT | apic::ICR_LEVEL);
    delay();
    apic::send_ipi(id, apic::ICR_INIT | apic::ICR_LEVEL);
    delay();
    for _ in 0..2 {
        apic::send_ipi(id, apic::ICR_STARTUP | apic::ICR_ASSERT | (TRAMPOLINE >> 12) as u32);
        delay();
    }
}

#[inline(never)]
fn delay() {
    let n = opaque!(1_000);
    let mut i = 0;
    while i < n {
        unsafe { asm!("pause", options(nomem, nostack, preserves_flags)) };
        i += 1;
    }
}

/// Sleeps until `aps` APs are done: interrupts are enabled only in `sti; hlt` (`sti` takes
/// effect after `hlt` starts, so a wake-up IPI cannot slip in between the check and the
/// sleep). False when the watchdog ran out.
fn wait_for_aps(aps: u32) -> bool {
    loop {
        unsafe { asm!("cli", options(nomem, nostack)) };
        if DONE.load(Ordering::Acquire) >= aps {
            return true;
        }
        if TICKS.load(Ordering::Relaxed) >= WATCHDOG_TICKS {
            return false;
        }
        unsafe { asm!("sti", "hlt", options(nomem, nostack)) };
    }
}

/// An AP, on its own stack, with the kernel's GDT: the same IDT as the BSP, its APIC on,
/// its workload; then done, the BSP woken, halted for good.
extern "C" fn ap_main(id: u32) -> ! {
    idt::load_full();
    apic::enable();
    let c = smp_run(id, ROUNDS.load(Ordering::Relaxed));
    CHECKSUMS[id as usize].store(c, Ordering::Relaxed);
    DONE.fetch_add(1, Ordering::Release);
    apic::send_ipi(BSP_APIC.load(Ordering::Relaxed), apic::ICR_FIXED | WAKE_VECTOR as u32);
    loop {
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}
