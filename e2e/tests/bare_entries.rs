//! Entry stubs as hobby kernels write them: the example kernels built without frame pointers
//! (`target/examples/nofp/`) have a system-call stub and a timer stub that push no frame
//! record and carry no CFI (`--cfg bare_entries`): on x86 the CPU's frame is all they leave
//! of the program; on riscv64 and aarch64 they save the trap frame (`sepc`/`ELR_EL1`, the
//! stack pointer, `sstatus`/`SPSR_EL1`) where they choose. The plugin, given the kernel
//! (`elf=`), reads the stubs' instructions for where those are and crosses into the program
//! that made the call (issue 38). The programs have no frame pointers either: given to the
//! plugin (`user=`), their own `.eh_frame` walks them to `_start`. The timer's side is
//! `no_frame_pointers::interrupted_stacks_are_whole`.

use kern_profile_e2e::*;

mod system_calls_through_a_bare_stub_are_rooted_at_the_program {
    #[test]
    fn i386() {
        super::system_calls_rooted("i386")
    }
    #[test]
    fn x86_64() {
        super::system_calls_rooted("x86_64")
    }
    #[test]
    fn riscv64() {
        super::system_calls_rooted("riscv64")
    }
    #[test]
    fn aarch64() {
        super::system_calls_rooted("aarch64")
    }
    /// x86_64's `SYSCALL` instruction: it pushes nothing; the kernel's stub switches to its
    /// stack and pushes the frame `int 0x80` would have (as Linux and Redox do).
    #[test]
    fn x86_64_by_the_syscall_instruction() {
        super::system_calls_rooted_by("x86_64", "user=on syscall=on")
    }
}

/// `arch`'s kernel code of system calls (its stub, the dispatcher): samples there are the
/// program's system calls; and the program's file.
fn syscall_code(arch: &str) -> (&'static [&'static str], String) {
    match arch {
        "i386" => (
            &["syscall_entry", "kernel::user::syscall_dispatch"],
            "user.elf".into(),
        ),
        // The x86_64 kernel's crate is `kernel64`; `syscall_instr_entry` is the `SYSCALL`
        // instruction's stub (`syscall=on`), which goes on into `syscall_entry`.
        "x86_64" => (
            &[
                "syscall_instr_entry",
                "syscall_entry",
                "kernel64::user::syscall_dispatch",
            ],
            format!("user-{arch}.elf"),
        ),
        "riscv64" => (
            &["trap_vector", "kernel::user::syscall_dispatch"],
            format!("user-{arch}.elf"),
        ),
        _ => (
            &["svc_entry", "kernel::user::syscall_dispatch"],
            format!("user-{arch}.elf"),
        ),
    }
}

/// `user=on` without frame pointers: >= 95% of the system-call samples are rooted at the
/// program (`[user] USER.elf;…;[syscall];STUB;…`), through its system-call wrapper, and the
/// report counts those stacks whole, entered from user space.
fn system_calls_rooted(arch: &'static str) {
    system_calls_rooted_by(arch, "user=on")
}

/// The same, with the kernel's command line `append`.
fn system_calls_rooted_by(arch: &'static str, append: &str) {
    if skip_unless(&[
        Need::Qemu(arch),
        Need::Plugin,
        Need::Bin,
        Need::NoFpKernel(arch),
    ]) {
        return;
    }
    let (code, user_name) = syscall_code(arch);
    let k = nofp_kernel(arch);
    let user = k.with_file_name(&user_name);
    let args = format!("period=10007,elf={},user={}", k.display(), user.display());
    // A scratch directory per command line: the tests run at once.
    let name = format!("bare-{}", append.replace(['=', ' '], "-"));
    let run = boot_kernel(arch, &k, &name, &args, append);
    let extra = ["--user", user.to_str().unwrap()];
    let stacks = folded_of(&run.raw, &k, &extra);
    let root = format!("[user] {user_name}");
    let r = syscall_roots(
        &stacks,
        code,
        &[root.as_str()],
        &elf_names(&user),
        &elf_names(&k),
    );
    r.assert_rooted(
        &format!("{arch} bare stub: system-call samples rooted at {root}"),
        &stacks,
    );
    // The interrupted pc of each is the program's system-call wrapper.
    let through_wrapper: u64 = stacks
        .iter()
        .filter(|(s, _)| s.windows(2).any(|w| w == ["user::syscall", "[syscall]"]))
        .map(|(_, n)| n)
        .sum();
    assert!(
        through_wrapper as f64 >= 0.95 * r.syscalls as f64,
        "{through_wrapper} of {}: {stacks:?}",
        r.syscalls
    );
    // Past the wrapper, the program's callers by its CFI, up to `_start`.
    let whole_calls = weight(&stacks, &root, &WHOLE_SYSCALL);
    assert!(
        whole_calls as f64 >= 0.95 * r.syscalls as f64,
        "{whole_calls} of {} system-call samples under {root};{}: {stacks:?}",
        r.syscalls,
        WHOLE_SYSCALL.join(";")
    );
    user_samples_whole(&stacks, &root);
    // The report: the kernel's stacks whole, nearly all entered from user space.
    let text = kern_profile(&[
        run.raw.to_str().unwrap(),
        k.to_str().unwrap(),
        "--user",
        user.to_str().unwrap(),
        "-f",
        "text",
        "-o",
        "-",
    ]);
    let line = text
        .lines()
        .find(|l| l.starts_with("# stacks of ") && l.contains("kernel samples"))
        .unwrap_or_else(|| panic!("no stacks line: {text}"));
    let from_user = line
        .split("entered from user space ")
        .nth(1)
        .and_then(|t| t.split('%').next())
        .and_then(|p| p.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{line}"));
    println!("{arch} {append}: {line}");
    assert!(from_user >= 95.0, "{line}");
}

/// A system call's user part, whole: the program's callers from `_start` by its CFI.
const WHOLE_SYSCALL: [&str; 6] = [
    "_start",
    "user_main",
    "user::run",
    "user::round",
    "user::syscall",
    "[syscall]",
];
/// A user-mode sample's callers, whole.
const WHOLE_ROUND: [&str; 4] = ["_start", "user_main", "user::run", "user::round"];

/// Samples whose stack is `root` then `chain`.
fn weight(stacks: &[(Vec<String>, u64)], root: &str, chain: &[&str]) -> u64 {
    stacks
        .iter()
        .filter(|(s, _)| s.len() > chain.len() && s[0] == root && s[1..=chain.len()] == *chain)
        .map(|(_, n)| n)
        .sum()
}

/// At least 95% of the samples in the program's leaves (`user_hot`, `user_cold`, and variant B's
/// `b_only`) under `root` reach `_start` through its callers.
fn user_samples_whole(stacks: &[(Vec<String>, u64)], root: &str) -> u64 {
    let leaves = ["user::user_hot", "user::user_cold", "user::b_only"];
    let in_leaves =
        |s: &Vec<String>| s[0] == root && s.last().is_some_and(|l| leaves.contains(&l.as_str()));
    let all: u64 = stacks
        .iter()
        .filter(|(s, _)| in_leaves(s))
        .map(|(_, n)| n)
        .sum();
    let whole: u64 = stacks
        .iter()
        .filter(|(s, _)| {
            in_leaves(s) && s.len() == WHOLE_ROUND.len() + 2 && s[1..=4] == WHOLE_ROUND
        })
        .map(|(_, n)| n)
        .sum();
    assert!(all > 0, "no user-mode samples under {root}: {stacks:?}");
    assert!(
        whole as f64 >= 0.95 * all as f64,
        "{whole} of {all} user-mode samples under {root} reach _start: {stacks:?}"
    );
    all
}

/// i386's `procs=on` without frame pointers: two programs linked at the same addresses
/// (variant B's `b_only` moves every function after it; the functions before it are the
/// same bytes at the same addresses), each in its own page directory: user.elf without frame
/// pointers, user-b.elf with them (one program of each kind, as the issue asks). Given both
/// (`user=`), each frame is walked by the table of the program whose code is there; given
/// user.elf alone, user-b.elf is walked by its frame pointers. Either way both programs'
/// stacks reach `_start`, and `b_only` is only under user-b.elf: a table taken by address
/// alone would walk one program with the other's rows.
#[test]
fn two_programs_at_one_address_are_each_walked_by_their_own_rule() {
    if skip_unless(&[
        Need::Qemu("i386"),
        Need::Plugin,
        Need::Bin,
        Need::NoFpKernel("i386"),
    ]) {
        return;
    }
    let k = nofp_kernel("i386");
    let (a, b) = (k.with_file_name("user.elf"), k.with_file_name("user-b.elf"));
    let both = format!("{},{}", a.display(), b.display());
    for (name, given) in [
        ("bare-procs-both", vec![&a, &b]),
        ("bare-procs-one", vec![&a]),
    ] {
        let user: String = given
            .iter()
            .map(|p| format!(",user={}", p.display()))
            .collect();
        let args = format!("period=10007,elf={}{user}", k.display());
        let run = boot_kernel("i386", &k, name, &args, "procs=on");
        let stacks = folded_of(&run.raw, &k, &["--user", &both]);
        for root in ["[user] user.elf", "[user] user-b.elf"] {
            let n = user_samples_whole(&stacks, root);
            println!("{name}: {root}: {n} user-mode samples");
            assert!(
                weight(&stacks, root, &WHOLE_SYSCALL) > 0,
                "{root}: {stacks:?}"
            );
        }
        let b_only = |root: &str| -> u64 {
            stacks
                .iter()
                .filter(|(s, _)| s[0] == root && s.iter().any(|f| f == "user::b_only"))
                .map(|(_, n)| n)
                .sum()
        };
        assert_eq!(b_only("[user] user.elf"), 0, "{stacks:?}");
        assert!(b_only("[user] user-b.elf") > 0, "{stacks:?}");
    }
}

/// `record --user`: the program goes to the plugin (`user=`) and to the reports. On riscv64
/// without frame pointers, the hottest functions are the program's own, named, and its
/// user-mode stacks whole (reaching `_start`) in DIR/report.txt.
#[test]
fn record_passes_the_user_program_to_the_plugin_and_the_reports() {
    if skip_unless(&[
        Need::Qemu("riscv64"),
        Need::Plugin,
        Need::Bin,
        Need::NoFpKernel("riscv64"),
    ]) {
        return;
    }
    let k = nofp_kernel("riscv64");
    let user = k.with_file_name("user-riscv64.elf");
    let dir = scratch("bare-record-user");
    let qemu = run_kernel_command(&[
        "--arch".into(),
        "riscv64".into(),
        "--kernel".into(),
        k.display().to_string(),
        "--com1".into(),
        dir.join("com1").display().to_string(),
        "--memtrace".into(),
        "none".into(),
        "-append".into(),
        "user=on".into(),
    ]);
    let mut c = std::process::Command::new(bin());
    c.current_dir(&dir)
        .args(["record", "--period", "10007", "--user"])
        .arg(&user)
        .args(["-o", "out", "--"])
        .arg(qemu.get_program())
        .args(qemu.get_args())
        .stdin(std::process::Stdio::null());
    let out = output_with_timeout(c, std::time::Duration::from_secs(300));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(",user={}", user.display())),
        "user= not passed: {stderr}"
    );
    let top: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("kern-profile: hottest functions"))
        .skip(2)
        .take(3)
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert_eq!(
        top,
        [
            "user::user_hot",
            "kernel::user::sys_work",
            "user::user_cold"
        ],
        "{stderr}"
    );
    let report = std::fs::read_to_string(dir.join("out/report.txt")).unwrap();
    let line = report
        .lines()
        .find(|l| l.starts_with("# stacks of ") && l.contains("user samples"))
        .unwrap_or_else(|| panic!("{report}"));
    let whole = line
        .split("% whole")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|p| p.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(whole >= 95.0, "{line}");
}
