//! Helpers shared by the integration tests: synthetic raw and legacy files against
//! `tests/data/tiny.elf`, temporary directories, golden files, the binary's runs.

#![allow(dead_code)]

mod binary;
pub mod runs;
#[allow(unused_imports)]
pub use binary::{kernel_dir, kp, kp_in_fresh_dir, stderr};
#[allow(unused_imports)]
pub use runs::sorted_lines;

// The builders every test binary shares; each binary uses some of them.
#[allow(unused_imports)]
pub use kern_profile_test_support::memtrace as trace;
#[allow(unused_imports)]
pub use kern_profile_test_support::raw::{header, legacy, sample};
#[allow(unused_imports)]
pub use kern_profile_test_support::recording::Recording;

use std::path::{Path, PathBuf};

use kern_profile_format::{Header, SampleRecord, SamplingMode, StopReason};

pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

pub fn tiny_elf() -> PathBuf {
    data("tiny.elf")
}

/// Addresses in tiny.elf (see tests/data/tiny.c and its disassembly).
pub mod tiny {
    /// `leaf`'s first instruction (`push ebp`).
    pub const LEAF: u64 = 0xc010_0000;
    /// In `leaf`'s loop, inside the inlined `square` (`imul`).
    pub const LEAF_SQUARE: u64 = 0xc010_0019;
    /// `leaf`'s loop, `leaf` itself (`add ecx, eax` after `square`'s result).
    pub const LEAF_LOOP: u64 = 0xc010_0023;
    /// `leaf`'s first `ret`.
    pub const LEAF_RET: u64 = 0xc010_002c;
    /// Return address into `middle` after `call leaf`.
    pub const RET_MIDDLE: u64 = 0xc010_004e;
    /// Return address into `kernel::work` after `call middle`.
    pub const RET_WORK: u64 = 0xc010_006e;
    /// Return address into `_start` after `call kernel::work`.
    pub const RET_START: u64 = 0xc010_008d;
    /// `middle`'s body (after the call, `leave`).
    pub const MIDDLE_BODY: u64 = 0xc010_0051;
    /// `_start`'s endless loop.
    pub const START_LOOP: u64 = 0xc010_0096;
}

/// The synthetic run the golden files are made of: 2 vCPUs, a known mix of stacks, the
/// entry and ret fixes, an unknown address, user samples, exact counts and statistics.
pub fn synthetic_raw(exact: bool) -> Vec<u8> {
    use tiny::*;
    let mut r = Recording::new(&header(2, exact));
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    for i in 0..40u64 {
        let cpu = (i % 2) as u32;
        // 20 in square (inlined in leaf), 10 in leaf itself, 5 in middle, 5 in _start.
        match i % 8 {
            0..=3 => r.sample(cpu, LEAF_SQUARE, &full),
            4 | 5 => r.sample(cpu, LEAF_LOOP, &full),
            6 => r.sample(cpu, MIDDLE_BODY, &full[1..]),
            _ => r.sample(cpu, START_LOOP, &[]),
        };
    }
    // Entry fix: at leaf's first instruction the walk skipped middle.
    let t = r.tick();
    r.record(&SampleRecord {
        sp_word: Some(RET_MIDDLE),
        ..sample(0, t, LEAF, &full[1..])
    });
    // Ret fix: at leaf's `ret` too.
    let t = r.tick();
    r.record(&SampleRecord {
        sp_word: Some(RET_MIDDLE),
        ..sample(1, t, LEAF_RET, &full[1..])
    });
    // An address in no symbol, called from middle, and a stack that hit the depth limit.
    let t = r.tick();
    r.record(&SampleRecord {
        stop: StopReason::Unreadable.into(),
        ..sample(0, t, 0x0000_1234, &[0x0000_5678, RET_WORK, RET_START])
    });
    // Two user-mode samples, 1 ns apart.
    let t = r.tick();
    for k in 0..2 {
        r.record(&SampleRecord {
            user: true,
            ..sample(1, t + k, 0x0804_8000 + k, &[0x0804_9000])
        });
    }
    if exact {
        synthetic_exact_blocks(&mut r);
    }
    r.stats(45, 0, &[44, 0, 0, 1, 0, 0], &[4_500_000, 4_400_000]);
    r.bytes
}

/// The synthetic run's exact block counts (one record).
fn synthetic_exact_blocks(r: &mut Recording) {
    r.exact_blocks(&[
        // leaf's loop: square's instructions and leaf's own.
        (
            1000,
            vec![
                0xc010_0010,
                0xc010_0012,
                0xc010_0014,
                0xc010_0017,
                0xc010_0019,
                0xc010_001c,
                0xc010_001f,
                0xc010_0021,
                0xc010_0023,
                0xc010_0025,
            ],
        ),
        (
            10,
            vec![
                0xc010_0040,
                0xc010_0041,
                0xc010_0043,
                0xc010_0046,
                0xc010_0049,
            ],
        ),
        (1, vec![0xc010_0080, 0xc010_0081]),
        // Retranslated: counts add up.
        (5, vec![0xc010_0040]),
    ]);
}

/// An `exact=only` recording (header sampling mode off): the synthetic run's exact counts,
/// no samples, statistics.
pub fn exact_only_raw() -> Vec<u8> {
    let mut r = Recording::new(&Header {
        sampling: SamplingMode::Off,
        ..header(2, true)
    });
    synthetic_exact_blocks(&mut r);
    r.stats(0, 0, &[0; 6], &[4_500_000, 4_400_000]);
    r.bytes
}

/// A fresh temporary directory for one test, of a unique name. It is kept (the tests return
/// paths into it), under the system's temporary directory.
pub fn temp_dir(name: &str) -> PathBuf {
    tempfile::Builder::new()
        .prefix(&format!("kern-profile-test-{name}-"))
        .tempdir()
        .unwrap()
        .keep()
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A fresh [`temp_dir`] holding `files` (name, contents), and their paths.
pub fn temp_files<const N: usize>(
    name: &str,
    files: [(&str, &[u8]); N],
) -> (PathBuf, [PathBuf; N]) {
    let dir = temp_dir(name);
    let paths = files.map(|(file, bytes)| write(&dir, file, bytes));
    (dir, paths)
}

/// An SVG without its `<script>` element: inferno's JavaScript is inferno's, not ours, and
/// would make every inferno upgrade a golden change.
pub fn without_script(svg: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(svg);
    match (text.find("<script"), text.find("</script>")) {
        (Some(a), Some(b)) if a < b => {
            format!("{}{}", &text[..a], &text[b + "</script>".len()..]).into_bytes()
        }
        _ => svg.to_vec(),
    }
}

/// Compares `actual` with the golden file `tests/golden/<name>`; `KP_BLESS=1` rewrites it.
/// SVGs are compared without their script ([`without_script`]).
pub fn golden(name: &str, actual: &[u8]) {
    let stripped;
    let actual = if name.ends_with(".svg") {
        stripped = without_script(actual);
        &stripped[..]
    } else {
        actual
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("KP_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `KP_BLESS=1 cargo test -p kern-profile` to create it",
            path.display()
        )
    });
    if expected != actual {
        let dump = path.with_extension(format!(
            "{}.actual",
            path.extension().map_or("", |e| e.to_str().unwrap())
        ));
        let _ = std::fs::write(&dump, actual);
        panic!(
            "{} differs from the output (written to {}); if the change is intended, \
             rerun with KP_BLESS=1",
            path.display(),
            dump.display()
        );
    }
}

/// Warnings as the user sees them, one per line.
pub fn joined(warnings: &[kern_profile::Warning]) -> String {
    let lines: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// A symbol map of a kernel below tiny.elf (which then stands for a user program): its entry,
/// `kmain`, and system-call entry code calling `sys_work`.
pub const KERNEL_MAP: &str = "\
00100000 T _start
00100100 T kmain
00100200 T syscall_entry
00100300 T sys_work
";
/// Inside `sys_work`; return addresses into `syscall_entry` and `_start`.
pub const SYS_WORK_PC: u64 = 0x0010_0310;
pub const RET_SYSCALL_ENTRY: u64 = 0x0010_0210;
pub const RET_KSTART: u64 = 0x0010_0010;

/// The allocation command's options for `format` and `view`, without a progress bar.
pub fn alloc_opts(
    format: kern_profile::alloc_cmd::AllocFormat,
    view: kern_profile::alloc_cmd::AllocView,
) -> kern_profile::alloc_cmd::AllocOptions {
    kern_profile::alloc_cmd::AllocOptions {
        format,
        view,
        progress: false,
        ..Default::default()
    }
}

/// The allocation command on `input` against tiny.elf, its files into `out`.
pub fn alloc_tiny(
    input: &Path,
    out: &Path,
    format: kern_profile::alloc_cmd::AllocFormat,
    view: kern_profile::alloc_cmd::AllocView,
    text: Option<&mut dyn std::io::Write>,
) -> Result<kern_profile::alloc_cmd::AllocReport, kern_profile::alloc_cmd::AllocCmdError> {
    kern_profile::alloc_cmd::run_alloc_to(
        input,
        Some(&tiny_elf()),
        out,
        &alloc_opts(format, view),
        text,
    )
}
const ENTRIES_MAP: &str = "\
00100000 T _start
00100100 T kmain
00100200 T timer_irq
00100300 T syscall_entry
00100400 T sys_work
";

/// A delay=100 recording of two vCPUs with kernel entries (format markers) and a symbol map
/// for it: vCPU 0 runs `kmain`, takes a timer interrupt for two samples (at 200 and 300 µs),
/// runs `kmain` again; vCPU 1 spends two samples in a system call. The host timer says vCPU
/// 0 was halted 5 ms, vCPU 1 7 ms. Returns the recording and the map.
pub fn kernel_entries_run(dir: &Path) -> (PathBuf, PathBuf) {
    use kern_profile_format::frame_marker::KERNEL_ENTRY as KE;
    use kern_profile_format::{HostTimerStats, VcpuTime};
    let map = write(dir, "kernel.map", ENTRIES_MAP.as_bytes());
    let mut r = Recording::new(&Header {
        sampling: SamplingMode::DelayMicros(100),
        markers: true,
        ..header(2, false)
    });
    let kmain = [0x0010_0010u64];
    // vCPU 0: kmain, two samples in the timer interrupt that came in kmain, kmain again.
    // vCPU 1: a system call.
    let stacks: [(u32, u64, &[u64]); 6] = [
        (0, 0x0010_0110, &kmain),
        (0, 0x0010_0210, &[KE, 0x0010_0120, 0x0010_0010]),
        (0, 0x0010_0220, &[KE, 0x0010_0120, 0x0010_0010]),
        (0, 0x0010_0110, &kmain),
        (1, 0x0010_0410, &[0x0010_0310, KE, 0x0010_0130, 0x0010_0010]),
        (1, 0x0010_0420, &[0x0010_0310, KE, 0x0010_0130, 0x0010_0010]),
    ];
    for (i, (vcpu, pc, frames)) in stacks.iter().enumerate() {
        let t = 100_000 * (i as u64 % 4 + 1);
        r.record(&sample(*vcpu, t, *pc, frames));
    }
    HostTimerStats {
        interval_ns: 100_000,
        ticks: 10,
        late: 0,
        vcpus: vec![
            VcpuTime {
                idle_ns: 5_000_000,
                ..VcpuTime::default()
            },
            VcpuTime {
                idle_ns: 7_000_000,
                ..VcpuTime::default()
            },
        ],
        interrupts: None,
    }
    .encode(&mut r.bytes);
    r.stats(6, 0, &[6, 0, 0, 0, 0, 0], &[]);
    let raw = write(dir, "raw", &r.bytes);
    (raw, map)
}
