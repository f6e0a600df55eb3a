//! `exec=on`: the two user programs linked at the same addresses (user.elf and user-b.elf) run
//! one after another in one address space, each turn loading its program over the other's
//! under the same CR3, as a kernel whose exec reuses the page directory. The plugin re-reads
//! the code of the pages it sampled and records it again when it changed; the aggregator then
//! names each turn's samples from its own program, whatever the order of `--user`, and
//! `--per-process` roots each turn's program apart (`cr3 0x… #2`, `#3`, …).

use std::sync::OnceLock;

use kern_profile_e2e::*;

/// As in procs.rs: prime, far from any divisor of a round.
const PERIOD: u64 = 7_919;
const HOT: &str = "user::user_hot";
const B_ONLY: &str = "user::b_only";
const A_ROOT: &str = "[user] user.elf";
const B_ROOT: &str = "[user] user-b.elf";
/// Turns of each program (examples/kernel/src/procs.rs, SLICES).
const TURNS: usize = 4;

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| boot("exec", &format!("period={PERIOD}"), "exec=on"))
}

fn skip() -> bool {
    skip_i386() || skip_unless(&[Need::UserElf, Need::UserBElf])
}

/// `kern-profile RAW kernel.elf -f folded -o - ARGS`: its stacks and its warnings.
fn folded(args: &[&str]) -> (Vec<(Vec<String>, u64)>, String) {
    folded_and_warnings(&run().raw, &kernel(), args)
}

/// Samples whose stack starts with a root `root` begins with and ends in `leaf`.
fn count(stacks: &[(Vec<String>, u64)], root: &str, leaf: &str) -> u64 {
    stacks
        .iter()
        .filter(|(s, _)| s.first().is_some_and(|r| r.starts_with(root)))
        .filter(|(s, _)| s.last().map(String::as_str) == Some(leaf))
        .map(|(_, n)| n)
        .sum()
}

/// The CR3 `program` ran under, from COM1.
fn cr3_of(com1: &str, program: &str) -> String {
    cr3_on_com1(com1, "exec", program)
}

#[test]
fn both_programs_run_in_one_address_space_and_each_turn_is_recorded() {
    if skip() {
        return;
    }
    let com1 = &run().com1;
    assert!(com1.contains("phase exec: done, exit code 0"), "{com1}");
    assert_eq!(
        com1.matches("user: done, checksum").count(),
        2 * TURNS,
        "{com1}"
    );
    let cr3 = cr3_of(com1, "user.elf");
    assert_eq!(cr3, cr3_of(com1, "user-b.elf"), "one page directory");
    // Every user sample carries that one CR3, and each turn after the first starts with a
    // code record of the program loaded anew.
    use kern_profile_format::{RawReader, Record};
    let mut r = RawReader::new(std::fs::File::open(&run().raw).unwrap()).unwrap();
    let (mut bases, mut code) = (Vec::new(), 0);
    while let Some(rec) = r.next_record().unwrap() {
        match rec {
            Record::Sample(s) if s.user() => {
                bases.push(s.page_table_base().expect("user samples carry CR3"));
            }
            Record::CodeBytes(_) => code += 1,
            _ => {}
        }
    }
    bases.sort_unstable();
    bases.dedup();
    assert_eq!(bases.len(), 1, "{bases:x?}");
    assert!(code >= 2 * TURNS, "{code} code records");
}

#[test]
fn each_turn_is_named_from_its_own_program_in_either_order() {
    if skip() {
        return;
    }
    let (a, b) = (user_elf(), user_b_elf());
    let ab_users = format!("{},{}", a.display(), b.display());
    let ba_users = format!("{},{}", b.display(), a.display());
    let (ab, warn_ab) = folded(&["--user", &ab_users]);
    let (ba, warn_ba) = folded(&["--user", &ba_users]);
    for warn in [&warn_ab, &warn_ba] {
        assert!(!warn.contains("address space"), "{warn}");
        assert!(!warn.contains("overlap"), "{warn}");
    }
    for stacks in [&ab, &ba] {
        let b_only = count(stacks, B_ROOT, B_ONLY);
        assert!(b_only > 1000, "{b_only} samples in b_only under {B_ROOT}");
        assert_eq!(count(stacks, A_ROOT, B_ONLY), 0, "b_only under {A_ROOT}");
        // Both run user_hot the same number of rounds.
        let (hot_a, hot_b) = (count(stacks, A_ROOT, HOT), count(stacks, B_ROOT, HOT));
        assert!(hot_a > 1000, "{hot_a} samples of {HOT} under {A_ROOT}");
        assert!(
            (hot_a as f64 - hot_b as f64).abs() < 0.1 * hot_a as f64,
            "{HOT}: {hot_a} under {A_ROOT}, {hot_b} under {B_ROOT}"
        );
        // Every user-mode sample is one program's or the other's.
        let unnamed: u64 = stacks
            .iter()
            .filter(|(s, _)| s[0] == "[user]")
            .map(|(_, n)| n)
            .sum();
        assert_eq!(unnamed, 0, "user samples no program names");
    }
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
fn per_process_roots_each_turns_program() {
    if skip() {
        return;
    }
    let cr3 = cr3_of(&run().com1, "user.elf");
    let users = format!("{},{}", user_b_elf().display(), user_elf().display());
    let (stacks, _) = folded(&["--user", &users, "--per-process"]);
    // Turn k (A, B, A, B, ...) is the address space's program k.
    for k in 0..2 * TURNS {
        let program = if k % 2 == 0 { A_ROOT } else { B_ROOT };
        let space = match k {
            0 => format!("cr3 {cr3}"),
            _ => format!("cr3 {cr3} #{}", k + 1),
        };
        let root = format!("{program} ({space})");
        let hot = count(&stacks, &root, HOT);
        assert!(hot > 100, "{hot} samples of {HOT} under {root}");
        let other = if k % 2 == 0 { B_ROOT } else { A_ROOT };
        assert_eq!(count(&stacks, &format!("{other} ({space})"), HOT), 0);
    }
}
