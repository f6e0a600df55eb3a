//! The leaf and prologue correction of riscv64 samples, against tests/data/tiny-riscv64.elf
//! (call-frame information) and tiny-riscv64-nocfi.elf (the same code: prologue analysis):
//! leaves, prologues, a loop head right after a prologue, a shared `ret` that an early exit
//! jumps to, a function without a record after its call, a register that holds no return
//! address; and the refusal of an ELF of another architecture.

mod common;

use std::path::{Path, PathBuf};

use kern_profile::{run_cpu, Options, OutputFormat, ProfileError};
use kern_profile_format::{
    encode_sample_v2, Arch, CpuMode, Header, Privilege, SampleExtras, SampleRecord, SamplingMode,
    StopReason, VERSION_2,
};

/// Addresses in tiny-riscv64.elf (see tests/data/tiny-riscv64.s and its disassembly).
mod at {
    /// Return addresses into `_start` after `call outer`, `call nofp`, `call epi`.
    pub const RET_START_OUTER: u64 = 0x8000_000a;
    pub const RET_START_NOFP: u64 = 0x8000_0012;
    pub const RET_START_EPI: u64 = 0x8000_001a;
    /// `outer`: its entry, `sd s0` (record not made), `li a1` (made, still the entry's
    /// block), the loop head, `ld s0` after the loop.
    pub const OUTER: u64 = 0x8000_001c;
    pub const OUTER_SAVES: u64 = 0x8000_0020;
    pub const OUTER_LI: u64 = 0x8000_0024;
    pub const OUTER_LOOP: u64 = 0x8000_0026;
    pub const OUTER_TAIL: u64 = 0x8000_0034;
    /// Return address into `outer` after `call leaf`.
    pub const RET_OUTER_LEAF: u64 = 0x8000_0030;
    /// `leaf`'s second instruction.
    pub const LEAF: u64 = 0x8000_003c;
    /// `nofp`: `auipc` of its call (before it), and after it (the return address).
    pub const NOFP_CALL: u64 = 0x8000_0044;
    pub const RET_NOFP_LEAF: u64 = 0x8000_004c;
    /// `epi`'s `ret`, which its early exit jumps to; the return address after its call.
    pub const EPI_RET: u64 = 0x8000_006c;
    pub const RET_EPI_LEAF: u64 = 0x8000_0066;
}
use at::*;

fn elf(cfi: bool) -> PathBuf {
    common::data(if cfi {
        "tiny-riscv64.elf"
    } else {
        "tiny-riscv64-nocfi.elf"
    })
}

/// A v2 raw file of riscv64 samples: (pc, walk from fp, ra).
fn raw(name: &str, samples: &[(u64, &[u64], u64)]) -> PathBuf {
    let mut out = Vec::new();
    Header {
        arch: Arch::Riscv64,
        sampling: SamplingMode::PeriodInstructions(10_000),
        exact: false,
        markers: false,
        at_interrupts: false,
        gdbstub: false,
        vcpus: 1,
        max_depth: 64,
        start_unix_ns: 1_700_000_000_000_000_000,
        qemu_version: "10.0.2".into(),
    }
    .encode_version(VERSION_2, &mut out);
    for (i, &(pc, frames, ra)) in samples.iter().enumerate() {
        let rec = SampleRecord {
            vcpu: 0,
            user: false,
            stop: StopReason::NullFramePointer.into(),
            time_ns: i as u64 * 1000,
            icount: i as u64 * 10_000,
            pc,
            sp: 0x8010_0000,
            sp_word: None,
            frames,
            entry_resolved: false,
        };
        let extras = SampleExtras {
            mode: CpuMode::PagingOff,
            privilege: Privilege::Firmware,
            return_register: Some(ra),
            page_table_base: None,
        };
        encode_sample_v2(&mut out, 8, &rec, &extras);
    }
    common::write(&common::temp_dir(name), "raw", &out)
}

fn run(raw: &Path, elf: &Path, format: OutputFormat) -> Result<String, ProfileError> {
    let opts = Options {
        format,
        progress: false,
        ..Options::default()
    };
    let mut out = Vec::new();
    run_cpu(raw, Some(elf), &opts, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

/// One stack per sample: (pc, walk, ra, the stack the aggregator must name).
const CASES: [(u64, &[u64], u64, &str); 13] = [
    // A leaf: the walk from outer's fp starts at _start.
    (
        LEAF,
        &[RET_START_OUTER],
        RET_OUTER_LEAF,
        "_start;outer;leaf",
    ),
    // outer's prologue, and past it in the entry block: fp is still _start's (0).
    (OUTER_SAVES, &[], RET_START_OUTER, "_start;outer"),
    (OUTER_LI, &[], RET_START_OUTER, "_start;outer"),
    // The loop head may start a block: the registers tell. First pass from the entry (the
    // walk found nothing), first pass from the loop head (the walk found ra), later passes.
    (OUTER_LOOP, &[], RET_START_OUTER, "_start;outer"),
    (
        OUTER_LOOP,
        &[RET_START_OUTER],
        RET_START_OUTER,
        "_start;outer",
    ),
    (
        OUTER_LOOP,
        &[RET_START_OUTER],
        RET_OUTER_LEAF,
        "_start;outer",
    ),
    (
        OUTER_TAIL,
        &[RET_START_OUTER],
        RET_OUTER_LEAF,
        "_start;outer",
    ),
    // nofp before its call (ra still the caller), after it (saved, overwritten: lost).
    (NOFP_CALL, &[], RET_START_NOFP, "_start;nofp"),
    (RET_NOFP_LEAF, &[], RET_NOFP_LEAF, "nofp"),
    // epi's ret: by the early exit (no record yet), or after the body (record up).
    (EPI_RET, &[], RET_START_EPI, "_start;epi"),
    (EPI_RET, &[RET_START_EPI], RET_EPI_LEAF, "_start;epi"),
    // Not a return address: nothing inserted.
    (LEAF, &[RET_START_OUTER], OUTER, "_start;leaf"),
    // At outer's entry.
    (OUTER, &[], RET_START_OUTER, "_start;outer"),
];

fn check_stacks(cfi: bool) {
    let samples: Vec<(u64, &[u64], u64)> = CASES.iter().map(|c| (c.0, c.1, c.2)).collect();
    for (i, (_, _, _, want)) in CASES.iter().enumerate() {
        let r = raw(&format!("ra-{cfi}-{i}"), &samples[i..i + 1]);
        let out = run(&r, &elf(cfi), OutputFormat::Folded).unwrap();
        assert_eq!(out, format!("{want} 1\n"), "case {i} (cfi: {cfi})");
    }
}

#[test]
fn callers_from_call_frame_information() {
    check_stacks(true);
}

#[test]
fn callers_from_prologue_analysis() {
    check_stacks(false);
}

#[test]
fn the_report_counts_corrections_by_source_and_phase() {
    let samples: Vec<(u64, &[u64], u64)> = CASES.iter().map(|c| (c.0, c.1, c.2)).collect();
    let r = raw("ra-report", &samples);
    let want = |source: &str| {
        format!(
            "leaf and prologue correction: 7 of 13 samples took their caller from the \
             return-address register (leaf 1, prologue 5, epilogue 1; {source}, by the \
             registers where the block's start was ambiguous 2); callers lost: 1 (register \
             overwritten), 1 (no return address in it)"
        )
    };
    let text = run(&r, &elf(true), OutputFormat::Text).unwrap();
    let line = want("by call-frame information 7, by prologue analysis 0");
    assert!(text.contains(&line), "{text}");
    let text = run(&r, &elf(false), OutputFormat::Text).unwrap();
    let line = want("by call-frame information 0, by prologue analysis 7");
    assert!(text.contains(&line), "{text}");
}

#[test]
fn an_elf_of_another_architecture_is_refused_by_name() {
    let r = raw("ra-arch", &[(LEAF, &[], RET_OUTER_LEAF)]);
    let err = run(&r, &common::tiny_elf(), OutputFormat::Folded).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("tiny.elf is an ELF for i386, but the samples come from a guest of riscv64"),
        "{msg}"
    );
    // And the other way round: i386 samples against the riscv64 ELF.
    let i386 = common::write(
        &common::temp_dir("ra-arch-i386"),
        "raw",
        &common::synthetic_raw(false),
    );
    let msg = run(&i386, &elf(true), OutputFormat::Folded)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(
            "tiny-riscv64.elf is an ELF for riscv64, but the samples come from a guest of i386"
        ),
        "{msg}"
    );
}
