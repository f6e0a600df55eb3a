//! `irq=on` runs of the example kernels (e2e/tests/interrupts.rs, no_frame_pointers.rs): what
//! the stacks of samples in the timer interrupt's handler must hold.

use std::path::Path;

use crate::{folded_of, Run};

/// The workload's leaves and stages: the interrupted function, looked up as is (a workload
/// function, not its caller).
const LEAVES: [&str; 6] = [
    "hot_leaf",
    "cold_leaf",
    "blend",
    "recurse",
    "mix_inlined",
    "stage_",
];

/// Checks a run of an example kernel's `irq=on alloc_rounds=0` at the default rounds: the
/// checksum, the tick count line, and the stacks of the samples in `timer_tick`, which must
/// start with `workload` (root first) and hold `[interrupt]`, `isr_timer`, `timer_tick` in a
/// row.
pub fn check_handler_stacks(run: &Run, elf: &Path, checksum: &str, workload: &[&str]) {
    assert!(
        run.com1
            .contains(&format!("phase cpu: done, checksum {checksum}")),
        "the handler changed the workload's result: {}",
        run.com1
    );
    assert!(run.com1.contains(" timer interrupts"), "{}", run.com1);
    let stacks = folded_of(&run.raw, elf, &[]);
    let in_handler: Vec<&(Vec<String>, u64)> = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| f == "timer_tick"))
        .collect();
    let total: u64 = in_handler.iter().map(|(_, n)| n).sum();
    assert!(total > 300, "{total} samples in timer_tick: {in_handler:?}");
    // Root first: the workload, the interrupt, the stub, the handler.
    let workload: Vec<String> = workload.iter().map(|s| s.to_string()).collect();
    let joined: u64 = in_handler
        .iter()
        .filter(|(s, _)| {
            s.starts_with(&workload)
                && s.windows(3)
                    .any(|w| w == ["[interrupt]", "isr_timer", "timer_tick"])
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        joined as f64 >= 0.99 * total as f64,
        "{joined} of {total} handler samples reach the interrupted workload: {in_handler:?}"
    );
    let interrupted_in_workload: u64 = in_handler
        .iter()
        .filter(|(s, _)| {
            let i = s.iter().position(|f| f == "[interrupt]").unwrap_or(0);
            i > 0 && LEAVES.iter().any(|l| s[i - 1].contains(l))
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        interrupted_in_workload as f64 >= 0.9 * total as f64,
        "{interrupted_in_workload} of {total}: {in_handler:?}"
    );
}
