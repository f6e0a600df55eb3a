//! `procs=on`: two user programs linked at the same addresses (user.elf and user-b.elf), each
//! in its own address space, run in turns under the real plugin; the aggregator must name
//! each program's samples from its own ELF whatever the order of `--user`, and keep the
//! address spaces apart with `--per-process`.

use std::path::Path;
use std::sync::OnceLock;

use kern_profile_e2e::*;

/// As in user.rs: prime, far from any divisor of a round.
const PERIOD: u64 = 7_919;
const HOT: &str = "user::user_hot";
const B_ONLY: &str = "user::b_only";
const A_ROOT: &str = "[user] user.elf";
const B_ROOT: &str = "[user] user-b.elf";

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| boot("procs", &format!("period={PERIOD}"), "procs=on"))
}

fn skip() -> bool {
    skip_i386() || skip_unless(&[Need::UserElf, Need::UserBElf])
}

/// `kern-profile RAW kernel.elf -f folded -o - ARGS`: its stacks and its warnings.
fn folded(args: &[&str]) -> (Vec<(Vec<String>, u64)>, String) {
    folded_and_warnings(&run().raw, &kernel(), args)
}

fn users(first: &Path, second: &Path) -> String {
    format!("{},{}", first.display(), second.display())
}

/// Samples whose stack starts with `root` and ends in `leaf`.
fn count(stacks: &[(Vec<String>, u64)], root: &str, leaf: &str) -> u64 {
    stacks
        .iter()
        .filter(|(s, _)| s.first().map(String::as_str) == Some(root))
        .filter(|(s, _)| s.last().map(String::as_str) == Some(leaf))
        .map(|(_, n)| n)
        .sum()
}

/// The CR3 `program` ran under, from COM1.
fn cr3_of(com1: &str, program: &str) -> String {
    cr3_on_com1(com1, "procs", program)
}

#[test]
fn both_programs_run_in_turns_in_their_own_address_spaces() {
    if skip() {
        return;
    }
    let com1 = &run().com1;
    assert!(com1.contains("phase procs: done, exit code 0"), "{com1}");
    assert_eq!(com1.matches("user: done, checksum").count(), 8, "{com1}");
    assert_ne!(cr3_of(com1, "user.elf"), cr3_of(com1, "user-b.elf"));
    // The recording holds both address spaces, samples of both interleaved in time, and
    // code bytes of each.
    use kern_profile_format::{RawReader, Record};
    let mut r = RawReader::new(std::fs::File::open(&run().raw).unwrap()).unwrap();
    let (mut turns, mut last, mut code) = (0, None, Vec::new());
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Sample(s) if s.user() => {
                let base = s.page_table_base().expect("user samples carry CR3");
                if last != Some(base) {
                    turns += 1;
                    last = Some(base);
                }
            }
            Record::CodeBytes(c) => code.push(c.page_table_base),
            _ => {}
        }
    }
    assert_eq!(
        turns, 8,
        "user samples should switch address spaces at each turn"
    );
    code.sort_unstable();
    code.dedup();
    assert_eq!(
        code.len(),
        2,
        "code bytes of both address spaces: {code:x?}"
    );
}

#[test]
fn each_program_is_named_from_its_own_elf_in_either_order() {
    if skip() {
        return;
    }
    let (a, b) = (user_elf(), user_b_elf());
    let (ab, warn_ab) = folded(&["--user", &users(&a, &b)]);
    let (ba, warn_ba) = folded(&["--user", &users(&b, &a)]);
    // No address space left undecided.
    assert!(!warn_ab.contains("address space"), "{warn_ab}");
    assert!(!warn_ba.contains("overlap"), "{warn_ba}");
    for stacks in [&ab, &ba] {
        // B's own function: under B's root, never under A's.
        let b_only = count(stacks, B_ROOT, B_ONLY);
        assert!(b_only > 1000, "{b_only} samples in b_only under {B_ROOT}");
        assert!(
            stacks
                .iter()
                .all(|(s, _)| s[0] != A_ROOT || !s.iter().any(|f| f == B_ONLY)),
            "b_only named under {A_ROOT}"
        );
        // Both run user_hot the same number of rounds.
        let (hot_a, hot_b) = (count(stacks, A_ROOT, HOT), count(stacks, B_ROOT, HOT));
        assert!(hot_a > 1000, "{hot_a} samples of {HOT} under {A_ROOT}");
        assert!(
            (hot_a as f64 - hot_b as f64).abs() < 0.1 * hot_a as f64,
            "{HOT}: {hot_a} under {A_ROOT}, {hot_b} under {B_ROOT}"
        );
        // Each program's system calls sampled in the kernel join its own stack.
        for root in [A_ROOT, B_ROOT] {
            let chain = [
                root,
                "_start",
                "user_main",
                "user::run",
                "user::round",
                "user::syscall",
                "[syscall]",
                "syscall_entry",
                "kernel::user::syscall_dispatch",
                "kernel::user::sys_work",
            ];
            let all = count(stacks, root, "kernel::user::sys_work");
            let full: u64 = stacks
                .iter()
                .filter(|(s, _)| s.iter().map(String::as_str).eq(chain))
                .map(|(_, n)| n)
                .sum();
            assert!(
                all > 1000 && full as f64 > 0.95 * all as f64,
                "{full} of {all} sys_work samples under {root} have the whole chain"
            );
        }
    }
    // The same result whatever the order.
    let sorted = |s: &[(Vec<String>, u64)]| {
        let mut v: Vec<String> = s
            .iter()
            .map(|(f, n)| format!("{} {n}", f.join(";")))
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(sorted(&ab), sorted(&ba));
}

#[test]
fn per_process_keeps_the_address_spaces_apart() {
    if skip() {
        return;
    }
    let com1 = &run().com1;
    let (a_cr3, b_cr3) = (cr3_of(com1, "user.elf"), cr3_of(com1, "user-b.elf"));
    let (a, b) = (user_elf(), user_b_elf());
    let (stacks, _) = folded(&["--user", &users(&b, &a), "--per-process"]);
    let a_root = format!("{A_ROOT} (cr3 {a_cr3})");
    let b_root = format!("{B_ROOT} (cr3 {b_cr3})");
    assert!(count(&stacks, &a_root, HOT) > 1000, "{stacks:?}");
    assert!(count(&stacks, &b_root, HOT) > 1000, "{stacks:?}");
    assert!(count(&stacks, &b_root, B_ONLY) > 1000, "{stacks:?}");
    assert_eq!(count(&stacks, &a_root, B_ONLY), 0);
    // User samples have an address space (none is left without a root).
    assert!(stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| f.starts_with("user::")))
        .all(|(s, _)| s[0] == a_root || s[0] == b_root));
    // Without --user: one root per address space all the same.
    let (plain, _) = folded(&["--per-process"]);
    for cr3 in [&a_cr3, &b_cr3] {
        let root = format!("[as cr3 {cr3}]");
        let n: u64 = plain
            .iter()
            .filter(|(s, _)| s[0] == root)
            .map(|(_, n)| n)
            .sum();
        assert!(n > 5000, "{n} samples under {root}");
    }
}

/// Each program's system calls are rooted at that program, in its address space: both start
/// the classic way (a fake return address at the top of the stack, EBP the kernel's), and
/// no user frame is named with a kernel symbol.
#[test]
fn system_calls_are_rooted_at_the_program_that_made_them() {
    if skip() {
        return;
    }
    let com1 = &run().com1;
    let (a_cr3, b_cr3) = (cr3_of(com1, "user.elf"), cr3_of(com1, "user-b.elf"));
    let (a, b) = (user_elf(), user_b_elf());
    let (stacks, _) = folded(&["--user", &users(&a, &b), "--per-process"]);
    let a_root = format!("{A_ROOT} (cr3 {a_cr3})");
    let b_root = format!("{B_ROOT} (cr3 {b_cr3})");
    let kernel = elf_names(&kernel());
    let (a_names, b_names) = (elf_names(&a), elf_names(&b));
    let both: std::collections::BTreeSet<String> = a_names.union(&b_names).cloned().collect();
    let code = &["syscall_entry", "kernel::user::syscall_dispatch"];
    let all = syscall_roots(&stacks, code, &[&a_root, &b_root], &both, &kernel);
    let of_a = syscall_roots(&stacks, code, &[&a_root], &a_names, &kernel);
    let of_b = syscall_roots(&stacks, code, &[&b_root], &b_names, &kernel);
    let rooted = of_a.rooted + of_b.rooted;
    println!(
        "system-call samples rooted at their own program: {rooted} of {} ({:.2}%: user.elf \
         {}, user-b.elf {}); user frames named with kernel symbols: {}",
        all.syscalls,
        100.0 * rooted as f64 / all.syscalls.max(1) as f64,
        of_a.rooted,
        of_b.rooted,
        all.kernel_named
    );
    assert!(
        of_a.rooted > 1000 && of_b.rooted > 1000,
        "{of_a:?} {of_b:?}"
    );
    assert!(
        rooted as f64 >= 0.95 * all.syscalls as f64,
        "{all:?}\n{stacks:?}"
    );
    assert_eq!(all.kernel_named, 0, "{stacks:?}");
    // Without --per-process: rooted at the program's own name.
    let (plain, _) = folded(&["--user", &users(&b, &a)]);
    let r = syscall_roots(&plain, code, &[A_ROOT, B_ROOT], &both, &kernel);
    assert!(r.share() >= 0.95, "{r:?}");
    assert_eq!(r.kernel_named, 0);
}
