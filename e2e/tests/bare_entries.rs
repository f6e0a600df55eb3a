//! Entry stubs as hobby kernels write them: the example kernels built without frame pointers
//! (`target/examples/nofp/`) have a system-call stub and a timer stub that push no frame
//! record and carry no CFI (`--cfg bare_entries`). The plugin, given the kernel (`elf=`),
//! reads the stubs' instructions for where the CPU's frame lies and crosses it into the
//! program that made the call (issue 38). The timer's side is
//! `no_frame_pointers::interrupted_stacks_are_whole`.

use kern_profile_e2e::*;

/// The kernel's system-call code: samples there are the program's system calls.
const SYSCALL_CODE: &[&str] = &["syscall_entry", "kernel::user::syscall_dispatch"];

/// i386 `user=on` without frame pointers: >= 95% of the system-call samples are rooted at
/// the program (`[user] user.elf;…;[syscall];syscall_entry;…`), and the report counts those
/// stacks whole, entered from user space.
#[test]
fn system_calls_through_a_bare_stub_are_rooted_at_the_program() {
    if skip_unless(&[
        Need::Qemu("i386"),
        Need::Plugin,
        Need::Bin,
        Need::NoFpKernel("i386"),
    ]) {
        return;
    }
    let k = nofp_kernel("i386");
    let user = k.with_file_name("user.elf");
    let args = format!("period=10007,elf={}", k.display());
    let run = boot_kernel("i386", &k, "bare-syscall", &args, "user=on");
    let extra = ["--user", user.to_str().unwrap()];
    let stacks = folded_of(&run.raw, &k, &extra);
    let r = syscall_roots(
        &stacks,
        SYSCALL_CODE,
        &["[user] user.elf"],
        &elf_names(&user),
        &elf_names(&k),
    );
    r.assert_rooted(
        "i386 bare stub: system-call samples rooted at [user] user.elf",
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
    println!("{line}");
    assert!(from_user >= 95.0, "{line}");
}
