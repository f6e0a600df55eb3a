//! `user=on`: the example kernel's ring-3 program, profiled with the real plugin and named
//! with `--user target/examples/user.elf`, against examples/kernel/expected.toml (`[user]`);
//! and the x86_64 kernel's (`user-x86_64.elf`, examples/kernel64/expected.toml).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use kern_profile_e2e::*;

/// Prime, and far from any divisor of a round (~30,050 instructions in smp=on, ~60,100 in
/// user=on), so that samples fall evenly over the round's instructions. (10,007, close to a
/// third of an smp=on round, walks through a round only ~4 times in a run: the own share of
/// vCPU 0 came out 0.5 points high.)
const PERIOD: u64 = 7_919;

/// One exact=on period run of `user=on` at the documented rounds, shared by the tests.
fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| boot("user", &format!("period={PERIOD},exact=on"), "user=on"))
}

fn profile(raw: &Path, extra: &[&str]) -> String {
    let (k, u) = (kernel(), user_elf());
    let mut args = vec![raw.to_str().unwrap(), k.to_str().unwrap()];
    args.extend_from_slice(extra);
    let with_user = ["--user", u.to_str().unwrap()];
    if !extra.contains(&"--no-user") {
        args.extend_from_slice(&with_user);
    }
    args.retain(|a| *a != "--no-user");
    kern_profile(&args)
}

fn folded(extra: &[&str]) -> Vec<(Vec<String>, u64)> {
    let mut args = vec!["-f", "folded", "-o", "-"];
    args.extend_from_slice(extra);
    parse_folded(&profile(&run().raw, &args))
}

struct Doc {
    rounds: u64,
    user_share: f64,
    user_share_all: f64,
    /// symbol -> (self_share, per_round, fixed)
    functions: BTreeMap<String, (f64, u64, u64)>,
}

fn documented() -> Doc {
    let e = expected();
    let u = &e["user"];
    let functions = u["function"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["symbol"].as_str().unwrap().to_string(),
                (
                    f["self_share"].as_float().unwrap(),
                    f["per_round"].as_integer().unwrap() as u64,
                    f["fixed"].as_integer().unwrap() as u64,
                ),
            )
        })
        .collect();
    Doc {
        rounds: u["rounds"].as_integer().unwrap() as u64,
        user_share: u["user_share"].as_float().unwrap(),
        user_share_all: u["user_share_all"].as_float().unwrap(),
        functions,
    }
}

#[test]
fn user_functions_are_symbolized_with_documented_shares() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let doc = documented();
    let stacks = folded(&[]);
    // The documented shares are of the instructions in kernel.elf and user.elf: samples
    // in the firmware ([firmware], or [unknown] in older files) are left out.
    let counts = kernel_self_counts(&stacks);
    for name in [
        "user::user_hot",
        "user::user_cold",
        "kernel::user::sys_work",
    ] {
        let (want, _, _) = doc.functions[name];
        let got = share(&counts, name);
        assert!(
            (got - want).abs() < 0.02,
            "{name}: {got:.4} sampled, {want:.4} documented"
        );
    }
    let top = counts.iter().max_by_key(|(_, n)| **n).unwrap().0;
    assert_eq!(top, "user::user_hot");
    // Named from user.elf, under its root, with the program's call chain.
    let hot = [
        "[user] user.elf",
        "_start",
        "user_main",
        "user::run",
        "user::round",
        "user::user_hot",
    ];
    let n: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().map(String::as_str).eq(hot))
        .map(|(_, n)| n)
        .sum();
    assert!(
        n as f64 > 0.9 * counts["user::user_hot"] as f64,
        "{n} samples with the full stack {}",
        hot.join(";")
    );
    // The user-mode share of the kernel-and-user samples, as documented.
    let user: u64 = stacks
        .iter()
        .filter(|(s, _)| s.last().is_some_and(|l| l.starts_with("user::")))
        .map(|(_, n)| n)
        .sum();
    let all: u64 = counts.values().sum();
    let got = user as f64 / all as f64;
    assert!(
        (got - doc.user_share).abs() < 0.02,
        "{got:.4} vs {:.4}",
        doc.user_share
    );
}

/// `kernel 41.31% (…), user 58.69% (…)` → the user percentage.
fn split_user_pct(line: &str) -> f64 {
    let user = line.split("user ").last().unwrap();
    user.split('%').next().unwrap().trim().parse().unwrap()
}

#[test]
fn text_split_matches_documentation() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let doc = documented();
    let text = profile(&run().raw, &["-f", "text", "--per-cpu"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("# kernel/user split: "))
        .unwrap_or_else(|| panic!("no split line in\n{text}"));
    let pct = split_user_pct(line);
    assert!(
        (pct / 100.0 - doc.user_share_all).abs() < 0.02,
        "{line}: documented user share {:.4} (firmware counted as kernel)",
        doc.user_share_all
    );
    let cpu0 = text
        .lines()
        .find(|l| l.starts_with("# kernel/user split, cpu 0: "))
        .unwrap_or_else(|| panic!("no per-vCPU split line in\n{text}"));
    assert!((split_user_pct(cpu0) - pct).abs() < 1e-9, "{cpu0}");
    // The table names user functions.
    assert!(text.contains("  user::user_hot\n"), "{text}");
    // Without --user the split is shown all the same.
    let plain = profile(&run().raw, &["-f", "text", "--no-user"]);
    assert!(plain.contains(line), "{plain}");
}

#[test]
fn without_user_binaries_user_samples_are_one_frame() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let stacks = folded(&["--no-user"]);
    // User-mode samples: one `[user]` frame. Kernel stacks of system calls go on into the
    // program beyond `[syscall]`, whose frames, unnamed, are `[user]` too.
    let (user, kernel): (Vec<_>, Vec<_>) = stacks
        .iter()
        .filter(|(s, _)| s[0] == "[user]")
        .partition(|(s, _)| s.len() == 1);
    assert_eq!(user.len(), 1, "{user:?}");
    assert!(
        kernel.iter().all(|(s, _)| s[1] == "[syscall]"),
        "{kernel:?}"
    );
    let sys_work: u64 = kernel
        .iter()
        .filter(|(s, _)| s.last().map(String::as_str) == Some("kernel::user::sys_work"))
        .map(|(_, n)| n)
        .sum();
    assert!(sys_work > 1000, "{kernel:?}");
    assert!(stacks
        .iter()
        .all(|(s, _)| s.iter().all(|f| !f.starts_with("user::"))));
}

#[test]
fn system_calls_are_shown_inside_the_user_program() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let stacks = folded(&[]);
    let e = expected();
    let chain = syscall_chain(&e);
    assert_eq!(chain.last(), Some(&"kernel::user::sys_work"));
    assert_sys_work_has_the_chain(&stacks, &chain);
    // They are kernel time: --kernel-only keeps them, --user-only drops them.
    let kernel_only = folded(&["--kernel-only"]);
    assert!(kernel_only
        .iter()
        .any(|(s, _)| s.iter().map(String::as_str).eq(chain.iter().copied())));
    let user_only = folded(&["--user-only"]);
    assert!(user_only
        .iter()
        .all(|(s, _)| s.iter().all(|f| f != "kernel::user::sys_work")));
}

/// The kernel's system-call code: samples there are the program's system calls.
const SYSCALL_CODE: &[&str] = &["syscall_entry", "kernel::user::syscall_dispatch"];

/// The kernel starts the program the classic way (a fake return address 0xffffffff at the
/// top of its stack, EBP left as the kernel had it: src/user.rs): the walks end at the
/// program's first frame, so system calls are rooted at the program, and no user frame is
/// named with a kernel symbol.
#[test]
fn system_calls_are_rooted_at_the_classically_started_program() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let stacks = folded(&[]);
    let (user, kernel) = (elf_names(&user_elf()), elf_names(&kernel()));
    let r = syscall_roots(&stacks, SYSCALL_CODE, &["[user] user.elf"], &user, &kernel);
    r.assert_rooted("system-call samples rooted at [user] user.elf", &stacks);
    // The kernel's absolute symbol below its image names nothing (firmware stays itself).
    assert!(
        stacks
            .iter()
            .all(|(s, _)| !s.iter().any(|f| f == "_entry_phys")),
        "{stacks:?}"
    );
    // Nothing goes on past the program's first frame: no stack switch back into the kernel.
    assert!(
        stacks
            .iter()
            .filter(|(s, _)| s[0].starts_with("[user]"))
            .all(|(s, _)| !s.iter().any(|f| f == "[stack switch]")),
        "{stacks:?}"
    );
    // The plugin's walks themselves end there: no sample holds the fake return address.
    let fake = frames_equal_to(&run().raw, 0xffff_ffff);
    assert_eq!(fake, 0, "frames of the fake return address 0xffffffff");
}

/// The system-call chain `expected.toml` documents (`[kernel.user] syscall_chain`).
fn syscall_chain(e: &toml::Table) -> Vec<&str> {
    e["kernel"]["user"]["syscall_chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect()
}

/// More than 1000 samples in the chain's last function (`sys_work`), and more than 95% of
/// them with the whole `chain` as their stack.
fn assert_sys_work_has_the_chain(stacks: &[(Vec<String>, u64)], chain: &[&str]) {
    let leaf = chain.last().copied();
    let sys_work: u64 = stacks
        .iter()
        .filter(|(s, _)| s.last().map(String::as_str) == leaf)
        .map(|(_, n)| n)
        .sum();
    let full: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().map(String::as_str).eq(chain.iter().copied()))
        .map(|(_, n)| n)
        .sum();
    assert!(sys_work > 1000, "{sys_work}: {stacks:?}");
    assert!(
        full as f64 > 0.95 * sys_work as f64,
        "{full} of {sys_work} sys_work samples have the stack {}",
        chain.join(";")
    );
}

/// Frames equal to `addr` in every sample of the recording `raw`.
fn frames_equal_to(raw: &Path, addr: u64) -> usize {
    use kern_profile_format::{RawReader, Record};
    let mut raw = RawReader::new(std::fs::File::open(raw).unwrap()).unwrap();
    let mut n = 0;
    while let Some(rec) = raw.next_record().unwrap() {
        if let Record::Sample(s) = rec {
            n += s.frames().filter(|&a| a == addr).count();
        }
    }
    n
}

#[test]
fn exact_counts_of_the_user_program_match_documentation() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let doc = documented();
    let exact = folded(&["--exact"]);
    let counts = self_counts(&exact);
    for (name, (_, per_round, fixed)) in &doc.functions {
        assert_eq!(
            counts.get(name).copied().unwrap_or(0),
            per_round * doc.rounds + fixed,
            "{name}"
        );
    }
    // User code's exact counts sit under the program's root.
    assert!(exact
        .iter()
        .any(|(s, _)| s == &["[user] user.elf", "user::user_hot"]));
}

#[test]
fn samples_follow_the_instructions_and_the_modes() {
    if skip_i386() || skip_unless(&[Need::UserElf]) {
        return;
    }
    let c = census(&run().raw);
    instructions_over_period(&c, PERIOD);
    let user = c.user;
    let e = expected();
    let user_insns = e["user"]["user_insns"].as_integer().unwrap() as f64;
    let want_user = user_insns / PERIOD as f64;
    assert!(
        (user as f64 - want_user).abs() / want_user < 0.01,
        "{user} user-mode samples vs {want_user:.0}"
    );
    assert!(
        run().com1.contains("phase user: done, exit code 0"),
        "{}",
        run().com1
    );
    let sum = e["kernel"]["user"]["checksum"].as_str().unwrap();
    assert!(
        run()
            .com1
            .contains(&format!("user: done, checksum {sum}\r\n")),
        "{}",
        run().com1
    );
}

/// The x86_64 kernel's `user=on` (frame pointers, walked without `elf=`): the same program in
/// ring 3, started the classic way (a fake return address of all ones, RBP left as the kernel
/// had it: examples/kernel64/src/user.rs). Its system calls are rooted at the program through
/// `syscall_entry`'s frame record, with the documented chain; no walk holds the fake return
/// address; the program's own functions have their documented shares
/// (examples/kernel64/expected.toml, `[user]`).
#[test]
fn x86_64_system_calls_are_rooted_at_the_classically_started_program() {
    if skip_x86_64() {
        return;
    }
    let k = kernel64();
    let user = k.with_file_name("user-x86_64.elf");
    let run = boot_kernel("x86_64", &k, "user", &format!("period={PERIOD}"), "user=on");
    let e = expected64();
    let sum = e["kernel"]["user"]["checksum"].as_str().unwrap();
    assert!(
        run.com1
            .contains(&format!("user: done, checksum {sum}\r\n"))
            && run.com1.contains("phase user: done, exit code 0"),
        "{}",
        run.com1
    );
    let stacks = folded_of(&run.raw, &k, &["--user", user.to_str().unwrap()]);
    let code = &["syscall_entry", "kernel64::user::syscall_dispatch"];
    let r = syscall_roots(
        &stacks,
        code,
        &["[user] user-x86_64.elf"],
        &elf_names(&user),
        &elf_names(&k),
    );
    r.assert_rooted(
        "x86_64 system-call samples rooted at [user] user-x86_64.elf",
        &stacks,
    );
    let chain = syscall_chain(&e);
    assert_eq!(chain.last(), Some(&"kernel64::user::sys_work"));
    assert_sys_work_has_the_chain(&stacks, &chain);
    // The documented shares (DWARF inline view, firmware left out).
    let counts = kernel_self_counts(&stacks);
    for f in e["user"]["function"].as_array().unwrap() {
        let name = f["symbol"].as_str().unwrap();
        let want = f["self_share"].as_float().unwrap();
        if want < 0.05 {
            continue;
        }
        let got = share(&counts, name);
        assert!(
            (got - want).abs() < 0.02,
            "{name}: {got:.4} sampled, {want:.4} documented"
        );
    }
    let fake = frames_equal_to(&run.raw, u64::MAX);
    assert_eq!(
        fake, 0,
        "frames of the fake return address 0xffffffffffffffff"
    );
}
