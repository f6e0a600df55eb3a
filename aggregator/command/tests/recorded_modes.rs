//! Golden files and checks on the example kernel's SMP and user modes, recorded with the real
//! plugin (tests/data/example-modes, see its README): `--cpu` and `--per-cpu` on real SMP data,
//! `--user` and the kernel/user split on a real ring-3 program with system calls.
//! `KP_BLESS=1` rewrites the goldens.

mod common;

use std::path::PathBuf;

use common::runs::in_format;
use kern_profile::{CpuList, Options, OutputFormat};

fn data(name: &str) -> PathBuf {
    common::data("example-modes").join(name)
}

fn run(raw: &str, opts: &Options) -> String {
    common::runs::recorded_text("example-modes", raw, opts)
}

fn user(format: OutputFormat) -> Options {
    Options {
        user_binaries: vec![data("user.elf")],
        ..in_format(format)
    }
}

/// Self counts per leaf (without `_[i]`), of the stacks under `root` when given; samples
/// in the firmware (`[unknown]`, most of vCPU 0's at 200 rounds) left out.
fn leaves(folded: &str, root: Option<&str>) -> Vec<(String, u64)> {
    let mut m = std::collections::BTreeMap::new();
    for l in folded.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        if root.is_some_and(|r| stack.split(';').next() != Some(r)) {
            continue;
        }
        let leaf = stack.rsplit(';').next().unwrap().trim_end_matches("_[i]");
        if leaf == "[unknown]" {
            continue;
        }
        *m.entry(leaf.to_string()).or_insert(0u64) += n.parse::<u64>().unwrap();
    }
    let mut v: Vec<(String, u64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[test]
fn smp_per_cpu_and_cpu_lists() {
    let per_cpu = Options {
        per_cpu: true,
        ..in_format(OutputFormat::Folded)
    };
    let folded = run("raw-smp", &per_cpu);
    common::golden("example-smp-per-cpu.folded", folded.as_bytes());
    for cpu in 0..4 {
        let root = format!("cpu {cpu}");
        let top = leaves(&folded, Some(&root));
        assert_eq!(
            top[0].0,
            format!("kernel::smp::cpu_work_{cpu}"),
            "{root}: {top:?}"
        );
        // The other CPUs' own functions never show on this one.
        for other in (0..4).filter(|o| *o != cpu) {
            let name = format!("kernel::smp::cpu_work_{other}");
            assert!(top.iter().all(|(n, _)| *n != name), "{root}: {top:?}");
        }
    }
    // --cpu keeps those vCPUs only, and agrees with the per-cpu roots.
    let two = Options {
        cpus: Some(CpuList::parse("1,3").unwrap()),
        ..in_format(OutputFormat::Folded)
    };
    let folded13 = run("raw-smp", &two);
    let names: Vec<String> = leaves(&folded13, None).into_iter().map(|l| l.0).collect();
    assert!(names.contains(&"kernel::smp::cpu_work_1".into()));
    assert!(names.contains(&"kernel::smp::cpu_work_3".into()));
    assert!(!names.contains(&"kernel::smp::cpu_work_0".into()));
    assert!(!names.contains(&"kernel::smp::cpu_work_2".into()));
    let one = Options {
        cpus: Some(CpuList::parse("2").unwrap()),
        ..in_format(OutputFormat::Folded)
    };
    let alone = leaves(&run("raw-smp", &one), None);
    let mut rooted = leaves(&folded, Some("cpu 2"));
    rooted.sort();
    let mut alone_sorted = alone.clone();
    alone_sorted.sort();
    assert_eq!(rooted, alone_sorted);

    let text = run(
        "raw-smp",
        &Options {
            per_cpu: true,
            ..in_format(OutputFormat::Text)
        },
    );
    common::golden("example-smp.txt", text.as_bytes());
    assert!(text.contains("# per vCPU: cpu 0 "), "{text}");
    assert!(text.contains(", cpu 3 "), "{text}");
    assert!(!text.contains("kernel/user split"), "{text}");
}

#[test]
fn user_program_named_with_the_split() {
    let folded = run("raw-user", &user(OutputFormat::Folded));
    common::golden("example-user.folded", folded.as_bytes());
    assert!(
        folded.contains("[user] user.elf;_start;user_main;user::run;user::round;user::user_hot "),
        "{folded}"
    );
    assert!(
        folded.contains(
            "[user] user.elf;_start;user_main;user::run;user::round;user::syscall;\
             syscall_entry;kernel::user::syscall_dispatch;kernel::user::sys_work "
        ),
        "{folded}"
    );
    let top = leaves(&folded, None);
    assert_eq!(top[0].0, "user::user_hot", "{top:?}");
    assert_eq!(top[1].0, "kernel::user::sys_work", "{top:?}");

    let text = run(
        "raw-user",
        &Options {
            per_cpu: true,
            ..user(OutputFormat::Text)
        },
    );
    common::golden("example-user.txt", text.as_bytes());
    let split = text
        .lines()
        .find(|l| l.starts_with("# kernel/user split: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains("# kernel/user split, cpu 0: "), "{text}");
    // 200 rounds: 7.2 M user instructions of ~12.3 M with the firmware's ~6.4 M: ~45% user.
    let pct: f64 = split
        .split("user ")
        .last()
        .unwrap()
        .split('%')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((35.0..55.0).contains(&pct), "{split}");

    let exact = run(
        "raw-user",
        &Options {
            exact: true,
            ..user(OutputFormat::Folded)
        },
    );
    common::golden("example-user-exact.folded", exact.as_bytes());
    // 200 rounds of 30,009 and 6,009 instructions.
    assert!(
        exact.contains("[user] user.elf;user::user_hot 6001800\n"),
        "{exact}"
    );
    assert!(
        exact.contains("[user] user.elf;user::user_cold 1201800\n"),
        "{exact}"
    );
    assert!(
        exact.contains("\nkernel::user::sys_work 4801800\n"),
        "{exact}"
    );

    // Without --user: one [user] frame, and the system calls' user part is unknown.
    let plain = run("raw-user", &in_format(OutputFormat::Folded));
    assert!(plain.lines().any(|l| l.starts_with("[user] ")), "{plain}");
    assert!(!plain.contains("user::user_hot"), "{plain}");
    assert!(
        plain.contains(
            "[unknown];syscall_entry;kernel::user::syscall_dispatch;kernel::user::sys_work "
        ),
        "{plain}"
    );
}
