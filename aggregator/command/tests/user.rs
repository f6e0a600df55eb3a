//! User programs (`--user`): user-mode frames named from the user binaries under
//! `[user] NAME`, system-call stacks that cross from the kernel into the user program, the
//! kernel/user split in the text report, exact counts, Firefox categories, and the CLI.
//!
//! The "kernel" is a symbol map at 1 MiB (so that its addresses and the user binary's
//! cannot be confused); the "user program" is tests/data/tiny.elf (0xc0100000).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::kp;
use common::tiny::*;
use common::Recording;
use kern_profile::{run_cpu, Options, OutputFormat, RunReport};
use kern_profile_format::SampleRecord;

/// Inside kmain (common::KERNEL_MAP).
const KMAIN_PC: u64 = 0x0010_0150;

struct Fixture {
    dir: PathBuf,
    raw: PathBuf,
    map: PathBuf,
}

/// 12 samples: 5 in user mode (4 of them in tiny.elf), 7 in kernel mode (2 of them in a
/// system call whose walk went on into tiny.elf's frames); exact counts on both sides.
fn fixture(name: &str) -> Fixture {
    let dir = common::temp_dir(name);
    let mut r = Recording::new(&common::header(2, true));
    let user_stack = [RET_MIDDLE, RET_WORK, RET_START];
    for _ in 0..3 {
        r.user_sample(1, LEAF_SQUARE, &user_stack);
    }
    // At leaf's first instruction: the walk skipped middle, the word at [SP] has it.
    let t = r.tick();
    r.record(&SampleRecord {
        user: true,
        sp_word: Some(RET_MIDDLE),
        ..common::sample(1, t, LEAF, &user_stack[1..])
    });
    // A user PC in no binary.
    r.user_sample(0, 0x0804_8000, &[]);
    // System calls: sys_work <- syscall_entry <- the user's middle <- work <- _start.
    let syscall = [common::RET_SYSCALL_ENTRY, RET_MIDDLE, RET_WORK, RET_START];
    for _ in 0..2 {
        r.sample(1, common::SYS_WORK_PC, &syscall);
    }
    for _ in 0..5 {
        r.sample(0, KMAIN_PC, &[common::RET_KSTART]);
    }
    r.exact_blocks(&[
        (10, vec![common::SYS_WORK_PC]),
        (7, vec![LEAF_SQUARE]),
        (1, vec![0x0001_2345]),
    ]);
    r.stats(12, 0, &[12, 0, 0, 0, 0, 0], &[600_000, 600_000]);
    let raw = common::write(&dir, "raw", &r.bytes);
    let map = common::write(&dir, "kernel.map", common::KERNEL_MAP.as_bytes());
    Fixture { dir, raw, map }
}

fn run(f: &Fixture, opts: &Options) -> (String, RunReport) {
    let opts = Options {
        symbols: vec![f.map.clone()],
        ..opts.clone()
    };
    let (out, report) = common::runs::cpu(&f.raw, None, &opts).unwrap_or_else(|e| panic!("{e}"));
    (String::from_utf8(out).unwrap(), report)
}

fn with_user(format: OutputFormat) -> Options {
    Options {
        format,
        user_binaries: vec![common::tiny_elf()],
        ..Options::default()
    }
}

fn lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().collect();
    v.sort_unstable();
    v
}

#[test]
fn user_frames_are_named_from_the_user_binary() {
    let f = fixture("user-folded");
    let (out, report) = run(&f, &with_user(OutputFormat::Folded));
    assert_eq!(
        lines(&out),
        [
            "[user] tiny.elf;_start;kernel::work;middle;leaf 1",
            "[user] tiny.elf;_start;kernel::work;middle;leaf;square_[i] 3",
            "[user] tiny.elf;_start;kernel::work;middle;syscall_entry;sys_work 2",
            // A user-mode sample no program holds: its address, never a kernel name.
            "[user];[user 0x8048000] 1",
            "_start;kmain 5",
        ],
        "{out}"
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    // With addresses: the unknown user PC shows.
    let addrs = Options {
        addresses: true,
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &addrs);
    assert!(out.contains("[user];0x8048000 1\n"), "{out}");
    // Inline frames and lines come from the user binary's DWARF, as for the kernel.
    let no_inline = Options {
        inline: false,
        lines: true,
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &no_inline);
    assert!(!out.contains("square"), "{out}");
    assert!(out.contains("tiny.c:20);leaf ("), "{out}");
}

#[test]
fn without_user_binaries_user_samples_stay_one_frame() {
    let f = fixture("user-none");
    let opts = Options {
        format: OutputFormat::Folded,
        ..Options::default()
    };
    let (out, _) = run(&f, &opts);
    assert_eq!(
        lines(&out),
        [
            "[unknown];syscall_entry;sys_work 2",
            "[user] 5",
            "_start;kmain 5"
        ],
        "{out}"
    );
}

#[test]
fn filters_and_per_cpu_roots_apply_to_user_stacks() {
    let f = fixture("user-filters");
    let kernel_only = Options {
        mode: kern_profile::ModeFilter::KernelOnly,
        per_cpu: true,
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &kernel_only);
    assert_eq!(
        lines(&out),
        [
            "cpu 0;_start;kmain 5",
            "cpu 1;[user] tiny.elf;_start;kernel::work;middle;syscall_entry;sys_work 2",
        ],
        "{out}"
    );
    let user_only = Options {
        mode: kern_profile::ModeFilter::UserOnly,
        cpus: Some(kern_profile::CpuList::parse("1").unwrap()),
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &user_only);
    assert!(
        out.lines().all(|l| l.starts_with("[user] tiny.elf;")),
        "{out}"
    );
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[test]
fn text_report_shows_the_kernel_user_split() {
    let f = fixture("user-text");
    let opts = Options {
        per_cpu: true,
        ..with_user(OutputFormat::Text)
    };
    let (out, _) = run(&f, &opts);
    let dir = f.dir.display().to_string();
    common::golden("user.txt", out.replace(&dir, "$DIR").as_bytes());
    assert!(
        out.contains("# kernel/user split: kernel 58.33% (7), user 41.67% (5)\n"),
        "{out}"
    );
    assert!(
        out.contains("# kernel/user split, cpu 0: kernel 83.33% (5), user 16.67% (1)\n"),
        "{out}"
    );
    assert!(
        out.contains("# kernel/user split, cpu 1: kernel 33.33% (2), user 66.67% (4)\n"),
        "{out}"
    );
    // The system call's user frames count in the user program's total, its time in the
    // kernel's (the split is by the mode each sample was taken in).
    assert!(out.contains("  [user] tiny.elf\n"), "{out}");
    // Without --user too: the split is there whenever there are user samples.
    let plain = Options {
        format: OutputFormat::Text,
        ..Options::default()
    };
    let (out, _) = run(&f, &plain);
    assert!(out.contains("# kernel/user split: kernel 58.33% (7), user 41.67% (5)\n"));
    assert!(!out.contains("split, cpu"), "{out}");
}

#[test]
fn exact_counts_of_user_code() {
    let f = fixture("user-exact");
    let opts = Options {
        exact: true,
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &opts);
    assert_eq!(
        lines(&out),
        [
            "[unknown] 1",
            "[user] tiny.elf;leaf;square_[i] 7",
            "sys_work 10"
        ],
        "{out}"
    );
    let plain = Options {
        exact: true,
        format: OutputFormat::Folded,
        ..Options::default()
    };
    let (out, _) = run(&f, &plain);
    assert_eq!(lines(&out), ["[unknown] 8", "sys_work 10"], "{out}");
}

#[test]
fn firefox_puts_user_frames_in_the_user_category() {
    let f = fixture("user-firefox");
    let (out, _) = run(&f, &with_user(OutputFormat::Firefox));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cats: Vec<&str> = v["meta"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let user = cats.iter().position(|c| *c == "User").unwrap() as u64;
    let kernel = cats.iter().position(|c| *c == "Kernel").unwrap() as u64;
    // The frames of thread 1's samples' stacks, through the tables the threads share.
    let shared = &v["shared"];
    let strings = shared["stringArray"].as_array().unwrap();
    let func_names = shared["funcTable"]["name"].as_array().unwrap();
    let (stacks, frames) = (&shared["stackTable"], &shared["frameTable"]);
    let mut seen = 0;
    for stack in v["threads"][1]["samples"]["stack"].as_array().unwrap() {
        let mut at = stack.as_u64();
        while let Some(s) = at.map(|s| s as usize) {
            let i = stacks["frame"][s].as_u64().unwrap() as usize;
            let func = frames["func"][i].as_u64().unwrap() as usize;
            let name = strings[func_names[func].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            let cat = frames["category"][i].as_u64().unwrap();
            at = stacks["prefix"][s].as_u64();
            match name {
                "middle" | "[user] tiny.elf" => assert_eq!(cat, user, "{name}"),
                "sys_work" | "syscall_entry" => assert_eq!(cat, kernel, "{name}"),
                _ => continue,
            }
            seen += 1;
        }
    }
    assert!(seen >= 4, "{seen}");
}

#[test]
fn several_user_binaries_and_errors() {
    let f = fixture("user-several");
    // Two binaries with one file name: the second is named by its path; the first given
    // wins where both hold an address.
    let other = f.dir.join("b");
    std::fs::create_dir_all(&other).unwrap();
    let copy = other.join("tiny.elf");
    std::fs::copy(common::tiny_elf(), &copy).unwrap();
    let opts = Options {
        user_binaries: vec![copy.clone(), common::tiny_elf()],
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &opts);
    assert!(
        out.contains("[user] tiny.elf;_start;kernel::work;middle;leaf 1"),
        "{out}"
    );
    assert!(!out.contains(&copy.display().to_string()), "{out}");

    let bad = Options {
        user_binaries: vec![f.map.clone()],
        symbols: vec![f.map.clone()],
        ..with_user(OutputFormat::Folded)
    };
    let err = run_cpu(&f.raw, None, &bad, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("kernel.map"), "{err}");
    let missing = Options {
        user_binaries: vec![f.dir.join("nope.elf")],
        symbols: vec![f.map.clone()],
        ..with_user(OutputFormat::Folded)
    };
    let err = run_cpu(&f.raw, None, &missing, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("nope.elf"), "{err}");
}

#[test]
fn command_line() {
    let f = fixture("user-cli");
    std::fs::copy(common::tiny_elf(), f.dir.join("u.elf")).unwrap();
    let o = kp(
        &f.dir,
        &[
            "raw",
            "--symbols",
            "kernel.map",
            "--user",
            "u.elf,u.elf",
            "-f",
            "folded",
            "-o",
            "-",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains("[user] u.elf;_start;kernel::work;middle;leaf 1"),
        "{out}"
    );
    // Repeated --user adds binaries too.
    let o = kp(
        &f.dir,
        &[
            "raw",
            "--symbols",
            "kernel.map",
            "--user",
            "u.elf",
            "--user",
            "missing.elf",
            "-f",
            "text",
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.elf"));
    // --user is a CPU-profile option.
    let o = kp(
        &f.dir,
        &[
            "--alloc",
            "raw",
            "--symbols",
            "kernel.map",
            "--user",
            "u.elf",
        ],
    );
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--user"));
    let help = String::from_utf8(kp(&f.dir, &["--help"]).stdout).unwrap();
    assert!(help.contains("--user <ELF[,ELF...]>"), "{help}");
    assert!(help.contains("[user] NAME"), "{help}");
}

/// A stripped program (a distribution's static busybox) names no function, but roots its
/// samples at its name: its segments hold their addresses.
#[test]
fn a_stripped_program_still_names_its_samples() {
    let f = fixture("user-stripped");
    let stripped = f.dir.join("stripped.elf");
    let objcopy = Command::new("objcopy")
        .arg("--strip-all")
        .arg(common::tiny_elf())
        .arg(&stripped)
        .status();
    if !objcopy.is_ok_and(|s| s.success()) {
        println!("skipped: no objcopy (binutils) to strip tiny.elf with");
        return;
    }
    let opts = Options {
        user_binaries: vec![stripped],
        ..with_user(OutputFormat::Folded)
    };
    let (out, _) = run(&f, &opts);
    assert_eq!(
        lines(&out),
        [
            "[user] stripped.elf;[unknown] 4",
            "[user] stripped.elf;[unknown];syscall_entry;sys_work 2",
            // A user-mode sample no program holds: its address, never a kernel name.
            "[user];[user 0x8048000] 1",
            "_start;kmain 5",
        ],
        "{out}"
    );
}
