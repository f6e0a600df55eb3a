//! The original's `delay=` mode (host time) on the example kernel.

use kern_profile_e2e::*;

#[test]
fn delay_mode_hot_leaf_share_matches_documentation() {
    // alloc_rounds=0: the allocation phase writes its memtrace to COM2 one byte per QEMU
    // write(2) (~40 ms of host time at the default 279 records), which delay mode weighs by
    // host time: ~3% of the kernel's samples, against 0.02% of its instructions. With the
    // workload at its normal speed (examples/kernel/README.md, "Wall time") that alone
    // moved hot_leaf 2 points below its instruction share. 23 records remain.
    let run = boot("delay", "delay=10", "alloc_rounds=0");
    let k = kernel();
    let text = kern_profile(&[
        run.raw.to_str().unwrap(),
        k.to_str().unwrap(),
        "-f",
        "folded",
        "-o",
        "-",
    ]);
    let stacks = parse_folded(&text);
    // Firmware runs slowly under TCG (port I/O), so by host time it holds about a tenth of
    // the samples; the documented shares are of the kernel's own instructions.
    let counts = kernel_self_counts(&stacks);
    let total: u64 = counts.values().sum();
    assert!(
        total > 20_000,
        "only {total} samples at delay=10 over a ~1 s run"
    );
    let hot = hottest();
    let doc = expected_functions()
        .into_iter()
        .find(|f| f.symbol == hot)
        .unwrap();
    let got = counts[&hot] as f64 / total as f64;
    assert!(
        (got - doc.self_share_inline).abs() < 0.02,
        "{hot}: {got:.4} sampled, {:.4} documented",
        doc.self_share_inline
    );
    // The plugin said what it did on stderr at exit.
    assert!(run.stderr.contains("samples written"), "{}", run.stderr);
}
