//! `delay=` (host time, timer-armed) on the example kernel.
//!
//! Delay mode weighs code by the host time QEMU spends emulating it, not by guest
//! instructions (docs/reports.md, "What the numbers mean"): instructions of different kinds cost TCG different
//! host time, so shares differ from the exact instruction counts of expected.toml. Where the
//! code is the same, the cost is the same, and there the shares must match: hot_leaf and
//! cold_leaf run the same loop body, 10 times more often in hot_leaf.

use kern_profile_e2e::*;

#[test]
fn delay_mode_shares_match_exact_counts_where_emulation_cost_is_the_same() {
    if skip_i386() {
        return;
    }
    // alloc_rounds=0: the allocation phase writes its memtrace to COM2 one byte per QEMU
    // write(2) (~40 ms of host time at the default 279 records), which delay mode weighs by
    // host time: ~3% of the kernel's samples, against 0.02% of its instructions.
    // 100,000 ticks a second are asked for; a host delivers fewer where its timer wake-ups
    // are costly (the timer keeps under a tenth of a core: about 5,000 a second in a virtual
    // machine whose wake-ups cost 20 µs), and fewer still when loaded (the plugin says how
    // many it skipped). 3,000 samples hold the shares below.
    let k = kernel();
    let doc = expected_functions();
    let measure = || {
        let ((run, counts), total) = alone(|| {
            with_enough_samples(3_000, |rounds| {
                let run = boot(
                    "delay",
                    "delay=10",
                    &format!("rounds={rounds} alloc_rounds=0"),
                );
                let text = kern_profile(&[
                    run.raw.to_str().unwrap(),
                    k.to_str().unwrap(),
                    "-f",
                    "folded",
                    "-o",
                    "-",
                ]);
                let counts = kernel_self_counts(&parse_folded(&text));
                let total = counts.values().sum();
                ((run, counts), total)
            })
        });
        (run, counts, total)
    };
    let (run, counts, total) = with_a_second_look(&doc, measure);
    assert!(total > 3_000, "only {total} samples at delay=10");
    assert_same_body_shares(&counts, &doc);
    // Everywhere else host time and instructions differ, but not by more than this on this
    // workload (measured: hot_leaf +7 points, the others within 5).
    for f in doc.iter().filter(|f| f.self_share_inline > 0.01) {
        let got = counts.get(&f.symbol).copied().unwrap_or(0) as f64 / total as f64;
        assert!(
            (got - f.self_share_inline).abs() < 0.12,
            "{}: {got:.4} sampled, {:.4} of instructions",
            f.symbol,
            f.self_share_inline
        );
    }
    // The plugin said what it did on stderr at exit, the host timer included.
    assert!(run.stderr.contains("samples written"), "{}", run.stderr);
    assert!(run.stderr.contains("host timer:"), "{}", run.stderr);
}

#[test]
fn delay_mode_records_the_host_timer_and_no_instruction_counts() {
    if skip_i386() {
        return;
    }
    let run = boot("delay-timer", "delay=100", "alloc_rounds=0");
    let c = census(&run.raw);
    let stats = c.stats.expect("a statistics record at exit");
    assert!(
        stats.vcpu_instructions.is_empty(),
        "delay= counts no instructions: {:?}",
        stats.vcpu_instructions
    );
    let timer = c.host_timer.expect("a host-timer record with delay=");
    assert_timer_spacing(&timer, 100, &run.stderr);
    assert_eq!(timer.vcpus.len(), 1);
    // Every sample comes from a tick that armed the vCPU; a few armed ticks take none (the
    // vCPU halted before its next block, or QEMU exited).
    let armed = timer.vcpus[0].armed_ticks;
    assert!(
        c.samples <= armed && c.samples as f64 >= 0.9 * armed as f64,
        "{} samples for {armed} armed ticks",
        c.samples
    );
    assert!(timer.ticks >= armed);
}
