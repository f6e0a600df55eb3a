//! Programs linked at the same addresses, told apart by address space (`--user` with
//! several ELFs, format version 2's page-table bases and code-bytes records), whatever the
//! order of `--user`; `--per-process`; recordings without code bytes named as before, with a
//! warning.
//!
//! The programs are tests/data/tiny.elf ("a.elf") and a copy whose `leaf` loop has other
//! bytes ("b.elf"): the same symbols at the same addresses, other code. The kernel is the
//! symbol map of tests/user.rs.

mod common;

use std::path::{Path, PathBuf};

use common::tiny::*;
use kern_profile::{run_cpu, Options, OutputFormat, RunReport, Warning};
use kern_profile_format::{
    encode_sample, encode_sample_v2, encode_stats, CodeBytes, CpuMode, Privilege, SampleExtras,
    SampleRecord, VERSION_2,
};
use object::{Object, ObjectSection};

/// Address spaces: A's and B's programs, one running code of neither, one whose code was
/// recorded only where A and B agree.
const SPACE_A: u64 = 0x0010_f000;
const SPACE_B: u64 = 0x0011_0000;
const SPACE_OTHER: u64 = 0x0011_1000;
const SPACE_COMMON: u64 = 0x0011_2000;

struct Fixture {
    raw: PathBuf,
    v1: PathBuf,
    nocode: PathBuf,
    map: PathBuf,
    a: PathBuf,
    b: PathBuf,
}

/// tiny.elf with its bytes at `LEAF_SQUARE`.. (16 of them) inverted.
fn patched_tiny() -> Vec<u8> {
    let mut elf = std::fs::read(common::tiny_elf()).unwrap();
    let file = object::File::parse(&elf[..]).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let (offset, _) = text.file_range().unwrap();
    let at = (offset + (LEAF_SQUARE - text.address())) as usize;
    drop(file);
    for b in &mut elf[at..at + 16] {
        *b = !*b;
    }
    elf
}

fn code_at(elf: &[u8], vaddr: u64, n: usize) -> Vec<u8> {
    let file = object::File::parse(elf).unwrap();
    let text = file.section_by_name(".text").unwrap();
    let data = text.data().unwrap();
    let at = (vaddr - text.address()) as usize;
    data[at..at + n].to_vec()
}

fn fixture(name: &str) -> Fixture {
    let dir = common::temp_dir(name);
    let a_bytes = std::fs::read(common::tiny_elf()).unwrap();
    let b_bytes = patched_tiny();
    let a = common::write(&dir, "a.elf", &a_bytes);
    let b = common::write(&dir, "b.elf", &b_bytes);
    let map = common::write(&dir, "kernel.map", common::KERNEL_MAP.as_bytes());

    let mut out = Vec::new();
    let mut v1 = Vec::new();
    // Version 2 without code records: address spaces, nothing to tell their programs by.
    let mut nocode = Vec::new();
    common::header(1, false).encode_version(VERSION_2, &mut out);
    common::header(1, false).encode_version(VERSION_2, &mut nocode);
    common::header(1, false).encode(&mut v1);
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    let syscall = [common::RET_SYSCALL_ENTRY, RET_MIDDLE, RET_WORK, RET_START];
    let code = |out: &mut Vec<u8>, space: u64, vaddr: u64, bytes: &[u8]| {
        CodeBytes {
            vcpu: 0,
            page_table_base: space,
            vaddr,
            bytes,
        }
        .encode(out, 4)
    };
    let mut t = 0;
    let mut push = |out: &mut Vec<u8>,
                    v1: &mut Vec<u8>,
                    nocode: &mut Vec<u8>,
                    space: Option<u64>,
                    user: bool,
                    pc,
                    frames| {
        t += 1000;
        let mut s: SampleRecord<'_> = common::sample(0, t, pc, frames);
        s.user = user;
        let x = SampleExtras {
            mode: CpuMode::Paging,
            privilege: if user {
                Privilege::User
            } else {
                Privilege::Kernel
            },
            return_register: None,
            // The low bits (a PCID) do not make another address space.
            page_table_base: space.map(|s| s | 0x7),
        };
        encode_sample_v2(out, 4, &s, &x);
        encode_sample_v2(nocode, 4, &s, &x);
        encode_sample(v1, 4, &s);
    };
    code(
        &mut out,
        SPACE_A,
        LEAF_SQUARE,
        &code_at(&a_bytes, LEAF_SQUARE, 16),
    );
    for _ in 0..3 {
        push(
            &mut out,
            &mut v1,
            &mut nocode,
            Some(SPACE_A),
            true,
            LEAF_SQUARE,
            &full[..],
        );
    }
    code(
        &mut out,
        SPACE_B,
        LEAF_SQUARE - 2,
        &code_at(&b_bytes, LEAF_SQUARE - 2, 32),
    );
    for _ in 0..2 {
        push(
            &mut out,
            &mut v1,
            &mut nocode,
            Some(SPACE_B),
            true,
            LEAF_SQUARE,
            &full[..],
        );
    }
    // A system call of B's program, sampled in the kernel.
    push(
        &mut out,
        &mut v1,
        &mut nocode,
        Some(SPACE_B),
        false,
        common::SYS_WORK_PC,
        &syscall[..],
    );
    code(&mut out, SPACE_OTHER, LEAF_SQUARE, &[0x90; 16]);
    push(
        &mut out,
        &mut v1,
        &mut nocode,
        Some(SPACE_OTHER),
        true,
        LEAF_SQUARE,
        &full[..],
    );
    code(
        &mut out,
        SPACE_COMMON,
        START_LOOP,
        &code_at(&a_bytes, START_LOOP, 2),
    );
    push(
        &mut out,
        &mut v1,
        &mut nocode,
        Some(SPACE_COMMON),
        true,
        START_LOOP,
        &[],
    );
    // The kernel without an address space (paging off: the recorder's CR3 means nothing).
    push(
        &mut out,
        &mut v1,
        &mut nocode,
        None,
        false,
        0x0010_0150,
        &[0x0010_0010],
    );
    for f in [&mut out, &mut v1, &mut nocode] {
        encode_stats(f, 9, 0, &[9, 0, 0, 0, 0, 0], &[900_000]);
    }
    Fixture {
        raw: common::write(&dir, "raw", &out),
        v1: common::write(&dir, "v1.raw", &v1),
        nocode: common::write(&dir, "nocode.raw", &nocode),
        map,
        a,
        b,
    }
}

fn run(f: &Fixture, raw: &Path, users: &[&PathBuf], per_process: bool) -> (Vec<String>, RunReport) {
    let opts = Options {
        format: OutputFormat::Folded,
        symbols: vec![f.map.clone()],
        user_binaries: users.iter().map(|p| (*p).clone()).collect(),
        per_process,
        progress: false,
        ..Options::default()
    };
    let (out, report) = common::runs::cpu(raw, None, &opts).unwrap_or_else(|e| panic!("{e}"));
    (common::sorted_lines(&out), report)
}

fn sorted<const N: usize>(mut lines: [String; N]) -> [String; N] {
    lines.sort_unstable();
    lines
}

const SQUARE: &str = "_start;kernel::work;middle;leaf;square_[i]";

#[test]
fn each_address_space_is_named_by_its_program_in_either_order() {
    let f = fixture("spaces-order");
    for (users, common_root) in [
        (vec![&f.a, &f.b], "[user] a.elf"),
        (vec![&f.b, &f.a], "[user] b.elf"),
    ] {
        let (lines, report) = run(&f, &f.raw, &users, false);
        assert_eq!(
            lines,
            sorted([
                format!("[user] a.elf;{SQUARE} 3"),
                "[user] b.elf;_start;kernel::work;middle;syscall_entry;sys_work 1".to_string(),
                format!("[user] b.elf;{SQUARE} 2"),
                // Recorded only where both agree: the first given, with a warning.
                format!("{common_root};_start 1"),
                // A user-mode sample no program names: its addresses, never a kernel name.
                "[user];[user 0xc010008d];[user 0xc010006e];[user 0xc010004e];[user 0xc0100019] 1"
                    .into(),
                "_start;kmain 1".into(),
            ]),
            "--user {users:?}"
        );
        let names: Vec<&str> = users
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(
            report.warnings,
            [
                Warning::SpaceMatchesNoProgram {
                    space: "cr3 0x111000".into()
                },
                Warning::SpaceMatchesSeveral {
                    space: "cr3 0x112000".into(),
                    programs: names.iter().map(|n| n.to_string()).collect(),
                },
            ]
        );
        assert!(report.warnings[0]
            .to_string()
            .contains("none of the --user programs"));
    }
}

#[test]
fn per_process_roots_each_address_space() {
    let f = fixture("spaces-per-process");
    let (lines, _) = run(&f, &f.raw, &[&f.b, &f.a], true);
    assert_eq!(
        lines,
        sorted([
            "[as cr3 0x111000];[user];[user 0xc010008d];[user 0xc010006e];[user 0xc010004e];[user 0xc0100019] 1".to_string(),
            format!("[user] a.elf (cr3 0x10f000);{SQUARE} 3"),
            "[user] b.elf (cr3 0x110000);_start;kernel::work;middle;syscall_entry;sys_work 1"
                .to_string(),
            format!("[user] b.elf (cr3 0x110000);{SQUARE} 2"),
            "[user] b.elf (cr3 0x112000);_start 1".into(),
            "_start;kmain 1".into(),
        ])
    );
    // Without --user: the address spaces alone.
    let (lines, _) = run(&f, &f.raw, &[], true);
    assert!(
        lines.contains(&"[as cr3 0x10f000];[user] 3".to_string()),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with("[as cr3 0x110000];") && l.ends_with(";syscall_entry;sys_work 1")
        ),
        "{lines:?}"
    );
    assert!(lines.contains(&"_start;kmain 1".to_string()), "{lines:?}");
}

#[test]
fn recordings_without_code_bytes_name_from_the_first_program_and_warn() {
    let f = fixture("spaces-v1");
    let (lines, report) = run(&f, &f.v1, &[&f.a, &f.b], false);
    assert!(
        lines.iter().all(|l| !l.starts_with("[user] b.elf")),
        "{lines:?}"
    );
    assert!(
        lines.contains(&format!("[user] a.elf;{SQUARE} 6")),
        "{lines:?}"
    );
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    match &report.warnings[0] {
        Warning::ProgramsOverlap {
            programs,
            addresses,
            why,
        } => {
            assert_eq!(programs, &["a.elf", "b.elf"]);
            assert!(*addresses > 0);
            // A version-1 recording: no address space at all.
            assert!(why.contains("recorded no address space"), "{why}");
        }
        w => panic!("{w:?}"),
    }
    // Address spaces recorded, but no code in them: the warning names them.
    let (_, report) = run(&f, &f.nocode, &[&f.a, &f.b], false);
    match &report.warnings[..] {
        [Warning::ProgramsOverlap { why, .. }] => {
            assert!(
                why.contains("no code was recorded in address spaces cr3 "),
                "{why}"
            );
            assert!(!why.contains("older plugin"), "{why}");
        }
        w => panic!("{w:?}"),
    }
    // One program alone overlaps nothing: no warning.
    let (_, report) = run(&f, &f.v1, &[&f.a], false);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn firefox_profiles_name_address_spaces_too() {
    let f = fixture("spaces-firefox");
    let opts = Options {
        format: OutputFormat::Firefox,
        symbols: vec![f.map.clone()],
        user_binaries: vec![f.b.clone(), f.a.clone()],
        progress: false,
        ..Options::default()
    };
    let mut out = Vec::new();
    let report = run_cpu(&f.raw, None, &opts, &mut out).unwrap();
    let json = String::from_utf8(out).unwrap();
    assert!(json.contains("\"[user] a.elf\""), "{json}");
    assert!(json.contains("\"[user] b.elf\""), "{json}");
    assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    // Address-space roots, with and without programs.
    for users in [vec![f.a.clone()], vec![]] {
        let opts = Options {
            per_process: true,
            user_binaries: users,
            ..opts.clone()
        };
        let mut out = Vec::new();
        run_cpu(&f.raw, None, &opts, &mut out).unwrap();
        let json = String::from_utf8(out).unwrap();
        assert!(json.contains("\"[as cr3 0x110000]\""), "{json}");
    }
}

/// A page directory reused: A runs in SPACE_A, then B in the same one (an exec that got the
/// same page back). B's code record, other bytes where A's was, starts the space's second
/// program: B's samples are B's in either order of `--user`, and `--per-process` roots them
/// apart (`cr3 0x10f000 #2`).
#[test]
fn programs_run_one_after_another_in_one_address_space_are_told_apart() {
    let f = fixture("spaces-reused");
    let a_bytes = std::fs::read(&f.a).unwrap();
    let b_bytes = std::fs::read(&f.b).unwrap();
    let mut out = Vec::new();
    common::header(1, false).encode_version(VERSION_2, &mut out);
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    let mut t = 0;
    for (bytes, n) in [(&a_bytes, 3), (&b_bytes, 2)] {
        CodeBytes {
            vcpu: 0,
            page_table_base: SPACE_A,
            vaddr: LEAF_SQUARE,
            bytes: &code_at(bytes, LEAF_SQUARE, 16),
        }
        .encode(&mut out, 4);
        for _ in 0..n {
            t += 1000;
            let mut s: SampleRecord<'_> = common::sample(0, t, LEAF_SQUARE, &full[..]);
            s.user = true;
            let x = SampleExtras {
                mode: CpuMode::Paging,
                privilege: Privilege::User,
                return_register: None,
                page_table_base: Some(SPACE_A),
            };
            encode_sample_v2(&mut out, 4, &s, &x);
        }
    }
    encode_stats(&mut out, 5, 0, &[5, 0, 0, 0, 0, 0], &[500_000]);
    let raw = common::write(f.raw.parent().unwrap(), "reused.raw", &out);
    for users in [vec![&f.a, &f.b], vec![&f.b, &f.a]] {
        let (lines, report) = run(&f, &raw, &users, false);
        assert_eq!(
            lines,
            sorted([
                format!("[user] a.elf;{SQUARE} 3"),
                format!("[user] b.elf;{SQUARE} 2"),
            ]),
            "--user {users:?}"
        );
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        let (lines, _) = run(&f, &raw, &users, true);
        assert_eq!(
            lines,
            sorted([
                format!("[user] a.elf (cr3 0x10f000);{SQUARE} 3"),
                format!("[user] b.elf (cr3 0x10f000 #2);{SQUARE} 2"),
            ]),
            "--user {users:?} --per-process"
        );
    }
}
