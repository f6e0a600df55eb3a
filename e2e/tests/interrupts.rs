//! Interrupts of kernel code in a kernel that is not Linux: the example kernel's `irq=on`
//! runs its CPU workload with a 1 kHz timer interrupt whose stub (`isr_timer`) makes a frame
//! record right below the CPU's interrupt frame. Samples in the handler must reach the
//! interrupted workload through an `[interrupt]` frame, and the handler must not change
//! what the workload computes.

use kern_profile_e2e::*;

#[test]
fn samples_in_an_interrupt_handler_reach_the_interrupted_code() {
    if skip_i386() {
        return;
    }
    let run = boot("irq", "period=10000", "irq=on alloc_rounds=0");
    let e = expected();
    let checksum = e["kernel"]["checksum"].as_str().unwrap();
    assert!(
        run.com1
            .contains(&format!("phase cpu: done, checksum {checksum}")),
        "the handler changed the workload's result: {}",
        run.com1
    );
    assert!(run.com1.contains(" timer interrupts"), "{}", run.com1);
    let stacks = folded_of(&run.raw, &kernel(), &[]);
    let in_handler: Vec<&(Vec<String>, u64)> = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| f == "timer_tick"))
        .collect();
    let total: u64 = in_handler.iter().map(|(_, n)| n).sum();
    assert!(total > 300, "{total} samples in timer_tick: {in_handler:?}");
    // Root first: the workload, the interrupt, the stub, the handler.
    let workload = [
        "_start",
        "kmain",
        "kernel::irq::run",
        "kernel::workload::run_workload",
    ];
    let joined: u64 = in_handler
        .iter()
        .filter(|(s, _)| {
            s.starts_with(&workload.map(String::from))
                && s.windows(3)
                    .any(|w| w == ["[interrupt]", "isr_timer", "timer_tick"])
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        joined as f64 >= 0.99 * total as f64,
        "{joined} of {total} handler samples reach the interrupted workload: {in_handler:?}"
    );
    // The interrupted function is looked up as is: a workload function, not its caller.
    let leaves = [
        "hot_leaf",
        "cold_leaf",
        "blend",
        "recurse",
        "mix_inlined",
        "stage_",
    ];
    let interrupted_in_workload: u64 = in_handler
        .iter()
        .filter(|(s, _)| {
            let i = s.iter().position(|f| f == "[interrupt]").unwrap_or(0);
            i > 0 && leaves.iter().any(|l| s[i - 1].contains(l))
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        interrupted_in_workload as f64 >= 0.9 * total as f64,
        "{interrupted_in_workload} of {total}: {in_handler:?}"
    );
}
