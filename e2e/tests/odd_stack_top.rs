//! A thread whose stack starts at an odd address, as a FreePascal unikernel starts every
//! thread's (`top - 1`): the x86_64 example kernel's `odd_stack=on` runs its CPU workload so
//! (examples/kernel64/src/odd_stack.rs), every frame pointer of the chain at 8n+7. x86 asks no
//! alignment of a frame pointer, and the kernel is not Linux, whose encoded `pt_regs` frame
//! pointers are odd too: the walks must reach the thread's root, `odd_thread_main` (called by
//! `odd_thread_start`), and invent no kernel entry. The plugin runs without `elf=`, as the
//! other example-kernel tests do: the frame-pointer walk, the kernel's OS unknown (Linux's
//! layouts only where Linux's own selectors prove them, which this stack has nowhere).
//!
//! Before odd frame pointers were followed (the plugin of main at 0d84201, this run): 0 of
//! the thread's 119,330 samples rooted, 1.42 frames a sample, 16,100 (13.5%) of them
//! `[user];[kernel entry];…` (an odd frame pointer taken for Linux's encoding), and 117,374
//! of the run's 119,971 walks stopped at a "misaligned frame pointer". After: all rooted,
//! 6.41 frames a sample, none invented.

use kern_profile_e2e::*;

const PLUGIN_ARGS: &str = "period=10000";
const APPEND: &str = "odd_stack=on alloc_rounds=0";

/// The thread's root, as the collapsed stacks name it: the thread-start stub, then the
/// thread's main function (both in examples/kernel64/src/odd_stack.rs).
const ROOT: [&str; 2] = ["odd_thread_start", "odd_thread_main"];

/// Frames a walk puts where it crossed into an interrupted context, or in user space.
fn is_entry_frame(f: &str) -> bool {
    ["[kernel entry]", "[syscall]", "[interrupt]", "[exception]"].contains(&f)
        || f.starts_with("[user]")
}

#[test]
fn x86_64_a_thread_on_an_odd_stack_is_walked_to_its_root() {
    if skip_x86_64() {
        return;
    }
    let run = boot64("x86_64-odd-stack", PLUGIN_ARGS, APPEND);
    // The workload ran on the odd stack, and as in the default run.
    let checksum = expected64()["kernel"]["checksum"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        run.com1
            .contains(&format!("phase cpu: done, checksum {checksum}")),
        "{}",
        run.com1
    );
    let sp = run
        .com1
        .lines()
        .find_map(|l| l.strip_prefix("odd_stack: stack pointer 0x"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no stack pointer line: {}", run.com1));
    assert_eq!(
        sp % 16,
        15,
        "the thread's stack pointer {sp:#x} is not top - 1"
    );

    let stacks = folded_of(&run.raw, &kernel64(), &[]);
    let in_thread = |s: &[String]| {
        s.iter()
            .any(|f| f.starts_with("kernel64::workload::") || f == ROOT[1])
    };
    let (mut thread, mut rooted, mut invented, mut frames) = (0u64, 0u64, 0u64, 0u64);
    for (s, n) in &stacks {
        if !in_thread(s) {
            continue;
        }
        thread += n;
        frames += n * s.len() as u64;
        if s.starts_with(&ROOT.map(String::from)) {
            rooted += n;
        }
        if s.iter().any(|f| is_entry_frame(f)) {
            invented += n;
        }
    }
    let all_invented: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| is_entry_frame(f)))
        .map(|(_, n)| n)
        .sum();
    println!(
        "odd stack: {rooted} of {thread} thread samples rooted at {ROOT:?} ({:.2}%), {:.2} \
         frames a sample, {invented} with an entry or user frame ({all_invented} in the run)",
        100.0 * rooted as f64 / thread.max(1) as f64,
        frames as f64 / thread.max(1) as f64,
    );
    // 10,000 rounds at period=10000: ~119,000 samples, nearly all in the thread.
    assert!(thread > 50_000, "{thread} samples in the thread");
    assert!(
        rooted * 100 >= thread * 95,
        "{rooted} of {thread} thread samples reach {ROOT:?}: {:?}",
        stacks
            .iter()
            .filter(|(s, _)| in_thread(s) && !s.starts_with(&ROOT.map(String::from)))
            .take(10)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        invented, 0,
        "kernel entries invented in the thread's stacks"
    );
    assert_eq!(all_invented, 0, "kernel entries invented in the run");
}
