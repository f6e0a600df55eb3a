//! The gdbstub source on every example kernel's architecture: `record --gdb -- QEMU...` of
//! the x86_64, riscv64 and aarch64 kernels (each its `g` layout, its stack walk, its exit)
//! returns QEMU's status, every workload sample is rooted at `_start;kmain` with the
//! documented callers, and the documented functions' shares are within [`share_bound`] of
//! exact counts (the stop's bias plus three standard errors); `stacks --attach` of a 2-vCPU i386 guest names both vCPUs, the boot CPU's
//! stack and the AP's each down to its own root, and detaches from a guest that runs on to
//! its success; and the i386 kernel's two processes are kept apart by the `cr3` the stub
//! gives.

use std::time::{Duration, Instant};

use kern_profile_e2e::*;

/// Where every example kernel's stacks begin: its entry, `_start`, calls `kmain`.
const ROOT: [&str; 2] = ["_start", "kmain"];

/// Workload samples a run must have: a share's standard error is then 3.5 points at most.
const MIN_SAMPLES: u64 = 200;

#[test]
fn record_gdb_samples_the_x86_64_kernel() {
    record_gdb_samples("x86_64");
}

#[test]
fn record_gdb_samples_the_riscv64_kernel() {
    record_gdb_samples("riscv64");
}

#[test]
fn record_gdb_samples_the_aarch64_kernel() {
    record_gdb_samples("aarch64");
}

/// `record --gdb` of `arch`'s example kernel at 6x its default rounds (~3 s of TCG): QEMU's
/// status is the kernel's success (record_gdb), every sample in a documented function is
/// rooted at `_start;kmain` through `run_workload` with every
/// caller documented, and the documented functions' self shares by real function are within
/// [`share_bound`] of exact counts.
fn record_gdb_samples(arch: &'static str) {
    if skip_gdb(arch) {
        return;
    }
    // Host time: a second emulator on the same cores slows every stop.
    alone(|| {
        let t = Instant::now();
        let kernel = example_kernel(arch);
        let doc = expected_of(arch);
        let documented: Vec<String> = expected_functions_of(&doc)
            .into_iter()
            .map(|f| f.symbol)
            .collect();
        // A loaded host stops a vCPU slowly and the 5% budget spaces the looks: a longer run
        // when too few looks landed in the workload.
        let (workload, n, err) = with_enough_samples(MIN_SAMPLES, |rounds| {
            let (out_dir, err) = record_gdb(
                arch,
                &format!("gdb-record-{arch}"),
                &["--rounds", &(rounds * 6).to_string(), "--alloc-rounds", "0"],
            );
            let folded = folded_of(&out_dir.join("cpu.raw"), &kernel, &["--no-inline"]);
            let workload: Vec<(Vec<String>, u64)> = folded
                .into_iter()
                .filter(|(s, _)| s.iter().any(|f| documented.contains(f)))
                .collect();
            let n: u64 = workload.iter().map(|(_, c)| c).sum();
            ((workload, n, err), n)
        })
        .0;
        assert!(n >= MIN_SAMPLES, "{n} workload samples: {err}");
        let edges = call_tree_of(&doc);
        for (stack, c) in &workload {
            assert!(
                stack.len() >= 3 && stack[..2] == ROOT && stack[2].ends_with("::run_workload"),
                "{c} sample(s) not under _start;kmain;run_workload: {stack:?}"
            );
            let names: Vec<&str> = stack.iter().map(String::as_str).collect();
            check_callers(&names, &edges, *c);
        }
        // No "hottest function" check: a stop is weighed by host time, and on a loaded host
        // blend (23% of the instructions) was sampled as often as hot_leaf (50%); the shares'
        // bounds say how far each may be.
        let counts = self_counts(&workload);
        assert_real_function_shares(arch, &counts);
        println!("{arch}: {n} workload samples, {:?}", t.elapsed());
    })
}

/// Rounds of the 2-vCPU run, which must outlast the looks (~1.5 s): 100,000 took 5 s on one
/// machine and 1.5 s on another, where the guest was gone by the second look; 400,000 take
/// 6 s on the faster.
const SMP_ROUNDS: &str = "400000";
const LOOKS: usize = 3;

/// `stacks --attach` of the i386 kernel under `-smp 2` (`smp=on`: each CPU runs its own
/// workload) while the smp rounds run: two vCPU blocks every look, the boot CPU's stack the
/// documented chain from `_start`, the AP's from `ap_start32`, both in `smp_round`; the guest
/// runs on to its success after each detach.
#[test]
fn stacks_of_a_two_vcpu_guest() {
    if skip_gdb("i386") {
        return;
    }
    let t = Instant::now();
    let smp = &expected()["kernel"]["smp"];
    let chain = |key: &str| -> Vec<String> {
        smp[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let chains = [chain("call_chain_bsp"), chain("call_chain_ap")];
    let kernel = kernel();
    let args = ["--smp", "2", "--rounds", SMP_ROUNDS, "--alloc-rounds", "0"];
    // Printed once the boot CPU sent the AP its start-up IPIs; the AP leaves its real-mode
    // trampoline within microseconds of guest time.
    let started = "smp: started 1 application processor(s)";
    let (dir, attach, guest) =
        boot_with_gdbstub("i386", &kernel, "gdb-stacks-smp", false, &args, started);
    std::thread::sleep(Duration::from_millis(200));
    for look in 0..LOOKS {
        let out = stacks(&["--attach", &attach, &kernel.display().to_string()]);
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "look {look}: {err}\n{text}");
        assert!(
            err.contains("2 vCPU(s)") && err.contains("running again"),
            "{err}"
        );
        let blocks: Vec<&str> = text.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "two vCPUs:\n{text}");
        for (cpu, (block, chain)) in blocks.iter().zip(&chains).enumerate() {
            assert!(
                block.starts_with(&format!("vCPU {cpu} ")),
                "look {look}, block {cpu}:\n{block}"
            );
            let frames = frames_of(block);
            assert!(
                frames.iter().all(|f| f != "??"),
                "an unnamed frame:\n{block}"
            );
            // From the root: the whole chain, or (a vCPU stopped between two rounds) the
            // chain but its last function, with nothing deeper.
            let from_root: Vec<String> = frames.iter().rev().cloned().collect();
            assert!(
                from_root.starts_with(chain) || from_root == chain[..chain.len() - 1],
                "look {look}, vCPU {cpu}: not {chain:?} from its root:\n{block}"
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let run = guest.join().unwrap();
    let com1 = std::fs::read_to_string(dir.join("com1")).unwrap_or_default();
    assert_eq!(
        run.status.code(),
        Some(exit_success("i386")),
        "the kernel did not finish after the looks: {}\n{com1}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(com1.contains("smp: cpu 1 checksum"), "{com1}");
    println!("2-vCPU stacks: {:?}", t.elapsed());
}

/// `record --gdb` of the i386 kernel's `procs=on` phase (two programs, each in its own page
/// directory): the samples carry each vCPU's `cr3` from the stub's `g` reply, so
/// `--per-process` roots them in both programs' address spaces, the ones the console names.
#[test]
fn record_gdb_keeps_two_address_spaces_apart() {
    if skip_gdb("i386") {
        return;
    }
    let cr3_of = |com1: &str, program: &str| -> String {
        let line = com1
            .lines()
            .find(|l| l.starts_with(&format!("procs: {program} at ")))
            .unwrap_or_else(|| panic!("no address space of {program}:\n{com1}"));
        line.rsplit("cr3 ").next().unwrap().trim().to_string()
    };
    // Sized for a loaded machine: each program holds about a third of the looks, and the 5%
    // stopped budget spaces the looks further apart as each takes longer. At load 10 on 2
    // cores, 30,000 rounds gave 31 looks in 1.4 s and 7 samples to one program; 150,000
    // rounds at load 5 gave 122 looks in 10 s: some 40 a program, the bound of 10 far below.
    let (out_dir, err) = record_gdb(
        "i386",
        "gdb-record-procs",
        &["-append", "procs=on rounds=150000 alloc_rounds=0"],
    );
    let com1 = std::fs::read_to_string(out_dir.parent().unwrap().join("com1")).unwrap();
    let folded = folded_of(&out_dir.join("cpu.raw"), &kernel(), &["--per-process"]);
    for program in ["user.elf", "user-b.elf"] {
        let root = format!("[as cr3 {}]", cr3_of(&com1, program));
        let n: u64 = folded
            .iter()
            .filter(|(s, _)| s[0] == root)
            .map(|(_, n)| n)
            .sum();
        assert!(n >= 10, "{n} samples under {root}: {err}\n{folded:?}");
    }
}
