//! `trigger=interrupt`: a `delay=` tick's sample is taken at the vCPU's next interrupt or
//! exception, from QEMU's discontinuity callback (QEMU 10.2 and later), with no translated
//! block instrumented. The example kernels' `irq=on` runs their workload under a ~1 kHz timer
//! interrupt, as real kernels run theirs.
//!
//! On a QEMU that has the callback (sid's 11.1 in scripts/test.sh's second pass) the samples
//! must name the workload as `delay=` does; on an older one (the system's 10.0.2) the
//! argument must be refused with the version it needs, before anything is written.

use kern_profile_e2e::*;
use kern_profile_format::qemu::{discon_qemu_version, version_at_least};

/// Whether the QEMU the tests run has the discontinuity callback.
fn has_discon() -> bool {
    version_at_least(&qemu_version(), discon_qemu_version())
}

#[test]
fn i386_interrupt_samples_match_exact_counts_where_emulation_cost_is_the_same() {
    if skip_i386() || !has_discon() {
        return;
    }
    // The 1 kHz timer bounds the rate: about 1,000 samples a second of workload.
    let k = kernel();
    let doc = expected_functions();
    let measure = || {
        let ((run, counts), total) = alone(|| {
            with_enough_samples(2_000, |rounds| {
                let run = boot(
                    "trigger-interrupt-i386",
                    "trigger=interrupt",
                    &format!("rounds={} irq=on alloc_rounds=0", rounds * 4),
                );
                let counts = kernel_self_counts(&folded_of(&run.raw, &k, &[]));
                let total = counts.values().sum();
                ((run, counts), total)
            })
        });
        (run, counts, total)
    };
    let (run, counts, total) = with_a_second_look(&doc, measure);
    assert!(total > 2_000, "only {total} samples at interrupts");
    // The handler runs with interrupts masked: it is never where an interrupt lands.
    assert_eq!(counts.get("timer_tick"), None, "{counts:?}");
    assert_same_body_shares(&counts, &doc);
    // Code in the middle of blocks gets its share: an interrupt at a block's start samples
    // one of its instructions (the inlined function is never a block's first).
    let inlined = counts
        .get("kernel::workload::mix_inlined")
        .copied()
        .unwrap_or(0);
    assert!(inlined as f64 > 0.05 * total as f64, "{counts:?}");
    // Host time weighs every documented function within a few points of its instructions.
    for f in doc.iter().filter(|f| f.self_share_inline > 0.01) {
        let got = counts.get(&f.symbol).copied().unwrap_or(0) as f64 / total as f64;
        assert!(
            (got - f.self_share_inline).abs() < 0.06,
            "{}: {got:.4} sampled, {:.4} of instructions",
            f.symbol,
            f.self_share_inline
        );
    }
    // The file says how it was sampled, and how long samples waited.
    let c = census(&run.raw);
    assert!(c.header.at_interrupts);
    let waits = c
        .host_timer
        .and_then(|t| t.interrupts)
        .expect("the waits in the host-timer record");
    assert_eq!(waits.samples, c.samples);
    assert!(waits.max_ns >= waits.mean_ns() && waits.mean_ns() > 0);
    assert!(run.stderr.contains("trigger=interrupt: "), "{}", run.stderr);
    let text = kern_profile(&[run.raw.to_str().unwrap(), k.to_str().unwrap(), "-f", "text"]);
    assert!(
        text.contains("at its next interrupt (delay, trigger=interrupt)")
            && text.contains("samples waited"),
        "{text}"
    );
}

/// On the other example kernels: the samples name the workload and keep their callers (the
/// interrupted context's stack is walked as `delay=` walks it).
#[test]
fn the_other_kernels_sample_their_workload_at_interrupts() {
    if !has_discon() {
        return;
    }
    for arch in ["x86_64", "riscv64", "aarch64"] {
        if (arch == "x86_64" && skip_x86_64()) || (arch != "x86_64" && skip_virt(arch)) {
            continue;
        }
        let (run, elf) = match arch {
            "x86_64" => (
                boot64(
                    "x86_64-trigger-interrupt",
                    "trigger=interrupt",
                    "irq=on alloc_rounds=0",
                ),
                kernel64(),
            ),
            a => (
                boot_virt(
                    a,
                    "trigger-interrupt",
                    "trigger=interrupt",
                    "irq=on alloc_rounds=0",
                    &[],
                ),
                virt_kernel(a),
            ),
        };
        let stacks = folded_of(&run.raw, &elf, &[]);
        let total: u64 = stacks.iter().map(|(_, n)| n).sum();
        assert!(total > 100, "{arch}: {total} samples");
        let counts = self_counts(&stacks);
        let top = counts.iter().max_by_key(|(_, n)| **n).unwrap().0;
        assert!(top.ends_with("workload::hot_leaf"), "{arch}: {counts:?}");
        // Stacks in the workload reach kmain: the interrupted stack was walked.
        let in_workload: Vec<&(Vec<String>, u64)> = stacks
            .iter()
            .filter(|(s, _)| s.last().is_some_and(|l| l.contains("workload::")))
            .collect();
        let n: u64 = in_workload.iter().map(|(_, n)| n).sum();
        let rooted: u64 = in_workload
            .iter()
            .filter(|(s, _)| s.iter().any(|f| f == "kmain"))
            .map(|(_, n)| n)
            .sum();
        assert!(
            rooted as f64 >= 0.95 * n as f64,
            "{arch}: {rooted} of {n} workload samples reach kmain: {in_workload:?}"
        );
        assert!(census(&run.raw).header.at_interrupts, "{arch}");
    }
}

/// `switches=` is an instruction hook placed at translation: with `trigger=interrupt`,
/// which registers no translation callback for sampling, `switches=example` registers one
/// and the example kernels' scheduler's switches are recorded, each leaving the task the
/// last one ran; `switches=auto` (with `tasks=`) says at load why none are.
#[test]
fn switches_asked_for_are_recorded_at_interrupts() {
    if skip_i386() || !has_discon() {
        return;
    }
    let k = kernel();
    // The scheduler is cooperative and its kernel has no timer then: few interrupts, few
    // samples, but every switch.
    let append = "sched=on alloc_rounds=0";
    let tasks = format!("trigger=interrupt,elf={},tasks=example", k.display());
    let run = boot_kernel(
        "i386",
        &k,
        "trigger-interrupt-switches",
        &format!("{tasks},switches=example"),
        append,
    );
    assert!(
        run.stderr.contains("task switches recorded at switch_to"),
        "{}",
        run.stderr
    );
    let ExactByProcess {
        switches,
        mismatched,
        ..
    } = exact_by_process(&run.raw);
    assert!(switches > 100, "{switches} switches recorded");
    assert_eq!(
        mismatched, 0,
        "every switch leaves the task the last one ran"
    );
    // The report gives each task its time on and off the CPU from them.
    let by_task = |raw: &std::path::Path| by_task_text(raw, &[k.to_str().unwrap()]);
    let text = by_task(&run.raw);
    assert!(text.contains("On-CPU s"), "{text}");
    for name in ["hasher", "sorter", "spinner"] {
        assert!(text.contains(name), "{name}:\n{text}");
    }
    // Not asked for: a line says why none are recorded, and none are.
    let auto = boot_kernel(
        "i386",
        &k,
        "trigger-interrupt-switches-auto",
        &tasks,
        append,
    );
    assert!(
        auto.stderr
            .contains("task switches not recorded: trigger=interrupt places no hook"),
        "{}",
        auto.stderr
    );
    assert!(!by_task(&auto.raw).contains("On-CPU s"));
}

/// Rounds for about 4,000 samples under `-icount shift=0`, where the kernels' 1 kHz timer
/// ticks every million instructions (4 to 5 s of QEMU each).
fn icount_rounds(arch: &str) -> u32 {
    match arch {
        "i386" => 45_000,
        "x86_64" => 40_000,
        _ => 50_000,
    }
}

/// Under `-icount`, every documented function's self share within this of its
/// instructions' (measured: 0.8 points at most on the four kernels, about 4,000 samples
/// each; host time, without `-icount`, gives up to 4.3).
const ICOUNT_TOLERANCE: f64 = 0.02;

mod under_icount_samples_fall_by_instructions {
    #[test]
    fn i386() {
        super::under_icount_samples_fall_by_instructions("i386")
    }
    #[test]
    fn x86_64() {
        super::under_icount_samples_fall_by_instructions("x86_64")
    }
    #[test]
    fn riscv64() {
        super::under_icount_samples_fall_by_instructions("riscv64")
    }
    #[test]
    fn aarch64() {
        super::under_icount_samples_fall_by_instructions("aarch64")
    }
}

/// With QEMU's `-icount`, the guest's timer follows instructions and each sample is the
/// interrupted instruction itself: the shares are the exact counts' (within
/// [`ICOUNT_TOLERANCE`]), on every architecture, and the exit line says how it sampled.
fn under_icount_samples_fall_by_instructions(arch: &'static str) {
    let skip = match arch {
        "i386" => skip_i386(),
        "x86_64" => skip_x86_64(),
        a => skip_virt(a),
    };
    if skip || !has_discon() {
        return;
    }
    let kernel = example_kernel(arch);
    let doc = expected_functions_of(&expected_of(arch));
    let append = format!("rounds={} irq=on alloc_rounds=0", icount_rounds(arch));
    let measure = || {
        let run = boot_kernel_with(
            arch,
            &kernel,
            "trigger-icount",
            "trigger=interrupt",
            &append,
            &["-icount", "shift=0"],
        );
        let counts = kernel_self_counts(&folded_of(&run.raw, &kernel, &[]));
        let total: u64 = counts.values().sum();
        assert!(total > 2_000, "{arch}: only {total} samples under -icount");
        let misses: Vec<String> = doc
            .iter()
            .filter(|f| f.self_share_inline > 0.01)
            .filter_map(|f| {
                let got = counts.get(&f.symbol).copied().unwrap_or(0) as f64 / total as f64;
                ((got - f.self_share_inline).abs() >= ICOUNT_TOLERANCE).then(|| {
                    format!(
                        "{}: {got:.4} sampled, {:.4} of instructions",
                        f.symbol, f.self_share_inline
                    )
                })
            })
            .collect();
        (run, misses)
    };
    // One more run when the first misses: about 4,000 samples still leave a share's
    // sampling error near a point.
    let (mut run, mut misses) = measure();
    if !misses.is_empty() {
        println!("{arch}: a second run after {misses:?}");
        (run, misses) = measure();
    }
    assert!(misses.is_empty(), "{arch}: {misses:?}");
    assert!(
        run.stderr
            .contains("(-icount: each at the interrupted instruction, by instructions)"),
        "{}",
        run.stderr
    );
}

/// `trigger=interrupt` on a QEMU without the discontinuity callback: one line naming the
/// version it needs, QEMU stopped, no file.
#[test]
fn an_older_qemu_refuses_the_trigger_with_the_version_it_needs() {
    if skip_i386() || has_discon() {
        return;
    }
    let dir = scratch("trigger-old-qemu");
    let run = run_to_status(
        qemu(&dir, Some("trigger=interrupt"), "alloc_rounds=0"),
        dir,
        "QEMU",
        1,
    );
    assert!(
        run.stderr.contains(&format!(
            "trigger=interrupt needs QEMU {} or newer",
            discon_qemu_version()
        )) && run.stderr.contains("use trigger=block"),
        "{}",
        run.stderr
    );
    assert!(!run.raw.exists(), "nothing is written");
}

/// With `period=` (any QEMU): one line naming the remedy.
#[test]
fn the_trigger_with_period_is_refused() {
    if skip_i386() {
        return;
    }
    let dir = scratch("trigger-period");
    let run = run_to_status(
        qemu(
            &dir,
            Some("trigger=interrupt,period=10000"),
            "alloc_rounds=0",
        ),
        dir,
        "QEMU",
        1,
    );
    assert!(
        run.stderr
            .contains("trigger=interrupt samples by host time")
            && run.stderr.contains("drop 'period'"),
        "{}",
        run.stderr
    );
    assert!(!run.raw.exists(), "nothing is written");
}
