//! `smp=on` under `-smp 4 -accel tcg,thread=multi`, period mode, the real plugin: every
//! vCPU sampled, nothing lost, and each vCPU's profile dominated by its own documented
//! workload (examples/kernel/expected.toml, `[smp]`).

use std::path::Path;
use std::sync::OnceLock;

use kern_profile_e2e::*;

/// Prime, and far from any divisor of a round (~30,050 instructions in smp=on, ~60,100 in
/// user=on), so that samples fall evenly over the round's instructions. (10,007, close to a
/// third of an smp=on round, walks through a round only ~4 times in a run: the own share of
/// vCPU 0 came out 0.5 points high.)
const PERIOD: u64 = 7_919;
const VCPUS: u32 = 4;

/// Boots the kernel with extra QEMU arguments (`-smp`, `-accel`), with or without the
/// plugin; asserts success.
fn boot_smp(name: &str, plugin_args: Option<&str>, append: &str, vcpus: u32) -> Run {
    let dir = scratch(name);
    let mut c = qemu(&dir, plugin_args, append);
    c.args(["-smp", &vcpus.to_string(), "-accel", "tcg,thread=multi"]);
    run_to_success(c, dir, "the kernel")
}

/// One `smp=on` run at the documented rounds under -smp 4, shared by the tests.
fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| boot_smp("smp4", Some(&format!("period={PERIOD}")), "smp=on", VCPUS))
}

struct CpuDoc {
    own: String,
    own_share: f64,
    shared_share: f64,
}

fn documented() -> Vec<CpuDoc> {
    let e = expected();
    let smp = &e["smp"];
    assert_eq!(smp["vcpus"].as_integer(), Some(VCPUS as i64));
    smp["cpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| CpuDoc {
            own: c["own"].as_str().unwrap().to_string(),
            own_share: c["own_share"].as_float().unwrap(),
            shared_share: c["shared_share"].as_float().unwrap(),
        })
        .collect()
}

fn folded(raw: &Path, extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    folded_of(raw, &kernel(), extra)
}

#[test]
fn every_vcpu_is_sampled_and_nothing_is_lost() {
    if skip_i386() {
        return;
    }
    // A corrupt record fails the census, a cut file shows as a truncation.
    let c = census(&run().raw);
    assert_eq!(c.header.vcpus, VCPUS);
    assert!(c.per_vcpu.keys().all(|&v| v < VCPUS), "{:?}", c.per_vcpu);
    assert_eq!(c.user, 0, "no user mode in smp=on");
    let per_vcpu: Vec<u64> = (0..VCPUS)
        .map(|v| c.per_vcpu.get(&v).copied().unwrap_or(0))
        .collect();
    let stats = c.stats;
    assert!(c.truncation.is_none(), "{:?}", c.truncation);
    let stats = stats.expect("a statistics record at exit");
    assert_eq!(stats.dropped, 0, "dropped samples");
    assert_eq!(stats.samples, per_vcpu.iter().sum::<u64>());
    assert_eq!(stats.vcpu_instructions.len(), VCPUS as usize);
    let rounds = expected()["smp"]["rounds"].as_integer().unwrap() as f64;
    for (cpu, (&n, &insns)) in per_vcpu.iter().zip(&stats.vcpu_instructions).enumerate() {
        let want = insns as f64 / PERIOD as f64;
        assert!(
            (n as f64 - want).abs() / want < 0.01,
            "vCPU {cpu}: {n} samples for {insns} instructions ({want:.0} expected)"
        );
        // Each vCPU ran its rounds: ~30,000 instructions each.
        assert!(insns as f64 > rounds * 30_000.0, "vCPU {cpu}: {insns}");
    }
    assert!(
        run().stderr.contains("0 dropped"),
        "the plugin's exit line: {}",
        run().stderr
    );
}

#[test]
fn each_vcpu_is_dominated_by_its_own_workload() {
    if skip_i386() {
        return;
    }
    let doc = documented();
    assert_eq!(doc.len(), VCPUS as usize);
    for (cpu, d) in doc.iter().enumerate() {
        let cpu_arg = cpu.to_string();
        let counts = kernel_self_counts(&folded(&run().raw, &["--cpu", &cpu_arg]));
        let total: u64 = counts.values().sum();
        assert!(total > 2_000, "vCPU {cpu}: only {total} samples");
        let own = share(&counts, &d.own);
        assert!(
            (own - d.own_share).abs() < 0.03,
            "vCPU {cpu}: {} {own:.4} sampled, {:.4} documented",
            d.own,
            d.own_share
        );
        let shared = share(&counts, "kernel::smp::smp_shared");
        assert!(
            (shared - d.shared_share).abs() < 0.03,
            "vCPU {cpu}: smp_shared {shared:.4} sampled, {:.4} documented",
            d.shared_share
        );
        let top = counts.iter().max_by_key(|(_, n)| **n).unwrap().0;
        assert_eq!(top, &d.own, "vCPU {cpu}'s hottest function");
        // No other CPU's own function ever shows on this vCPU.
        for (other, o) in doc.iter().enumerate() {
            if other != cpu {
                assert_eq!(counts.get(&o.own), None, "{} on vCPU {cpu}", o.own);
            }
        }
    }
}

#[test]
fn per_cpu_roots_match_the_cpu_filter() {
    if skip_i386() {
        return;
    }
    let doc = documented();
    let all = folded(&run().raw, &["--per-cpu"]);
    for (cpu, d) in doc.iter().enumerate() {
        let mine = cpu_stacks(&all, cpu);
        let cpu_arg = cpu.to_string();
        let alone = folded(&run().raw, &["--cpu", &cpu_arg]);
        let (a, b) = (self_counts(&mine), self_counts(&alone));
        assert_eq!(a, b, "vCPU {cpu}: --per-cpu and --cpu {cpu} differ");
        let counts = kernel_self_counts(&mine);
        assert!((share(&counts, &d.own) - d.own_share).abs() < 0.03);
        // The stacks' shapes: the BSP's from _start, the APs' from their own entry; nearly
        // every sample of the own function has the whole documented chain.
        let e = expected();
        let key = if cpu == 0 {
            "call_chain_bsp"
        } else {
            "call_chain_ap"
        };
        let mut chain: Vec<String> = e["kernel"]["smp"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect();
        chain.push(d.own.clone());
        let full: u64 = mine
            .iter()
            .filter(|(s, _)| *s == chain)
            .map(|(_, n)| n)
            .sum();
        assert!(
            full as f64 > 0.99 * counts[&d.own] as f64,
            "vCPU {cpu}: {full} of {} samples of {} have the stack {}",
            counts[&d.own],
            d.own,
            chain.join(";")
        );
    }
    // Two CPUs' lists at once.
    let two = kernel_self_counts(&folded(&run().raw, &["--cpu", "1,3"]));
    assert!(two.contains_key(&doc[1].own) && two.contains_key(&doc[3].own));
    assert!(!two.contains_key(&doc[0].own) && !two.contains_key(&doc[2].own));
}

#[test]
fn text_report_lists_every_vcpu() {
    if skip_i386() {
        return;
    }
    let raw = run().raw.to_str().unwrap().to_string();
    let k = kernel();
    let text = kern_profile(&[&raw, k.to_str().unwrap(), "-f", "text", "--per-cpu"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("# per vCPU: "))
        .unwrap_or_else(|| panic!("no per-vCPU line in\n{text}"));
    for cpu in 0..VCPUS {
        assert!(line.contains(&format!("cpu {cpu} ")), "{line}");
    }
    // Kernel mode only: no kernel/user split line.
    assert!(!text.contains("kernel/user split"), "{text}");
}

#[test]
fn every_cpu_reports_its_checksum() {
    if skip_i386() {
        return;
    }
    let com1 = &run().com1;
    assert!(com1.contains("smp: 4 CPU(s) in the ACPI MADT"), "{com1}");
    assert!(
        com1.contains("smp: started 3 application processor(s)"),
        "{com1}"
    );
    let e = expected();
    let sums = e["kernel"]["smp"]["checksums"].as_array().unwrap();
    for cpu in 0..VCPUS {
        let sum = sums[cpu as usize].as_str().unwrap();
        assert!(
            com1.contains(&format!("smp: cpu {cpu} checksum {sum}\r\n")),
            "{com1}"
        );
    }
    assert!(com1.trim_end().ends_with("done"), "{com1}");
}

#[test]
fn smp_mode_works_with_one_to_three_cpus_and_default_mode_ignores_aps() {
    if skip_i386() {
        return;
    }
    for vcpus in 1..=3u32 {
        let run = boot_smp(&format!("smp{vcpus}"), None, "smp=on rounds=200", vcpus);
        let started = format!("smp: started {} application processor(s)", vcpus - 1);
        assert!(run.com1.contains(&started), "{}", run.com1);
        for cpu in 0..vcpus {
            assert!(
                run.com1.contains(&format!("smp: cpu {cpu} checksum")),
                "{}",
                run.com1
            );
        }
        assert!(!run.com1.contains(&format!("smp: cpu {vcpus} checksum")));
    }
    // Without smp=on the APs stay in the firmware: the default run, unchanged.
    let run = boot_smp("smp-default", None, "rounds=200", 4);
    assert!(!run.com1.contains("smp:"), "{}", run.com1);
    assert!(
        run.com1.contains("phase cpu: done, checksum"),
        "{}",
        run.com1
    );
}
