//! Interrupts of kernel code in kernels that are not Linux: the example kernels' `irq=on`
//! runs their CPU workload with a ~1 kHz timer interrupt whose entry stub (`isr_timer`) makes
//! a frame record of the interrupted context. Samples in the handler (`timer_tick`) must
//! reach the interrupted workload through an `[interrupt]` frame, and the handler must not
//! change what the workload computes.
//!
//! - i386 (examples/kernel/src/irq.rs) and x86_64 (examples/kernel64/src/irq.rs): the PIT
//!   through the 8259; the stub's `push bp; mov bp, sp` lies right below the frame the CPU
//!   pushed, on the interrupted stack, and the walk recognises that frame (kernel `cs`,
//!   flags with IF).
//! - riscv64 and aarch64 (examples/virt-common/src/irq.rs and arch/): Sstc's `stimecmp`, the
//!   virtual generic timer through the GICv2; the stub runs on an interrupt stack above the
//!   kernel's, whose top record `{interrupted fp, interrupted pc}` leads down into the
//!   interrupted stack: the walk's crossing into an interrupted context.
//!
//! Known gap on riscv64 and aarch64 (not asserted either way): when the interrupted function
//! is a leaf without a frame record (`hot_leaf`, `cold_leaf`, `blend`: `-C
//! force-frame-pointers=non-leaf`), its caller is only in `ra`/`x30`, which the stub saves
//! but a frame-record walk does not read: the stack goes from the leaf to its caller's
//! caller (`stage_outer;hot_leaf;[interrupt]`, no `stage_middle`). The x86 kernels keep a
//! record in every function and show the whole chain.

use std::path::Path;

use kern_profile_e2e::*;

/// The plugin's and the kernel's arguments of every run here.
const PLUGIN_ARGS: &str = "period=10000";
const APPEND: &str = "irq=on alloc_rounds=0";

/// Checks the handler's stacks of `run` of `kernel`, documented in `e`, whose workload is
/// in the crate `krate`.
fn check(run: &Run, kernel: &Path, e: &toml::Table, krate: &str) {
    let checksum = e["kernel"]["checksum"].as_str().unwrap();
    check_handler_stacks(
        run,
        kernel,
        checksum,
        &[
            "_start",
            "kmain",
            &format!("{krate}::irq::run"),
            &format!("{krate}::workload::run_workload"),
        ],
    );
}

#[test]
fn samples_in_an_interrupt_handler_reach_the_interrupted_code() {
    if skip_i386() {
        return;
    }
    let run = boot("irq", PLUGIN_ARGS, APPEND);
    check(&run, &kernel(), &expected(), "kernel");
}

#[test]
fn x86_64_samples_in_an_interrupt_handler_reach_the_interrupted_code() {
    if skip_x86_64() {
        return;
    }
    let run = boot64("x86_64-irq", PLUGIN_ARGS, APPEND);
    check(&run, &kernel64(), &expected64(), "kernel64");
}

fn virt(arch: &'static str) {
    if skip_virt(arch) {
        return;
    }
    let run = boot_virt(arch, "irq", PLUGIN_ARGS, APPEND, &[]);
    check(&run, &virt_kernel(arch), &expected_virt(arch), "kernel");
}

#[test]
fn riscv64_samples_in_an_interrupt_handler_reach_the_interrupted_code() {
    virt("riscv64");
}

#[test]
fn aarch64_samples_in_an_interrupt_handler_reach_the_interrupted_code() {
    virt("aarch64");
}
