//! Entry stubs as hobby kernels write them: the example kernels built without frame pointers
//! (`target/examples/nofp/`) have a system-call stub and a timer stub that push no frame
//! record and carry no CFI (`--cfg bare_entries`): on x86 the CPU's frame is all they leave
//! of the program; on riscv64 and aarch64 they save the trap frame (`sepc`/`ELR_EL1`, the
//! stack pointer, `sstatus`/`SPSR_EL1`) where they choose. The plugin, given the kernel
//! (`elf=`), reads the stubs' instructions for where those are and crosses into the program
//! that made the call (issue 38). The timer's side is
//! `no_frame_pointers::interrupted_stacks_are_whole`.

use kern_profile_e2e::*;

mod system_calls_through_a_bare_stub_are_rooted_at_the_program {
    #[test]
    fn i386() {
        super::system_calls_rooted("i386")
    }
    #[test]
    fn riscv64() {
        super::system_calls_rooted("riscv64")
    }
    #[test]
    fn aarch64() {
        super::system_calls_rooted("aarch64")
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
    let args = format!("period=10007,elf={}", k.display());
    let run = boot_kernel(arch, &k, "bare-syscall", &args, "user=on");
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
    println!("{arch}: {line}");
    assert!(from_user >= 95.0, "{line}");
}
