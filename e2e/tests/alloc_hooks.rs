//! Allocation profiles from the plugin's allocator hooks (`alloc=`) against the ground truth
//! of the same run: the example kernels (i386, x86_64; riscv64 and aarch64 on `virt`) write a
//! Maestro memtrace (COM2; semihosting on `virt`) from inside the very functions
//! examples/kernel-common/alloc.spec hooks (Rust-ABI functions, arguments found through
//! DWARF). Per allocator, both reports must agree on allocations, reallocations,
//! frees, units allocated, peak and live at the end, and on the stacks still holding memory;
//! the flamegraphs of every view must be the same. Bad SPECs stop QEMU with a message.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kern_profile_e2e::*;

/// The counters both reports must agree on, as the text report names them.
const COUNTERS: [&str; 6] = [
    "allocations",
    "reallocations",
    "frees",
    "units allocated",
    "peak live",
    "live at end",
];

fn spec() -> String {
    root()
        .join("examples/kernel-common/alloc.spec")
        .display()
        .to_string()
}

/// One allocator's block of a text report: its counters and its stacks still holding memory
/// (units by stack name).
#[derive(Debug, PartialEq, Eq)]
struct Block {
    counters: BTreeMap<String, u64>,
    live_stacks: BTreeMap<String, u64>,
}

fn blocks(report: &str) -> BTreeMap<String, Block> {
    report
        .split("allocator `")
        .skip(1)
        .map(|b| {
            let name = b.split('`').next().unwrap().to_string();
            let counters = COUNTERS
                .iter()
                .map(|k| {
                    let line = b
                        .lines()
                        .find(|l| l.trim_start().starts_with(k))
                        .unwrap_or_else(|| panic!("no `{k}` for {name} in\n{report}"));
                    let n = line.trim_start()[k.len()..]
                        .split_whitespace()
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap();
                    (k.to_string(), n)
                })
                .collect();
            let live_stacks = b
                .lines()
                .filter(|l| l.contains("%  "))
                .map(|l| {
                    let units = l.split_whitespace().next().unwrap().parse().unwrap();
                    (l.rsplit("%  ").next().unwrap().to_string(), units)
                })
                .collect();
            (
                name,
                Block {
                    counters,
                    live_stacks,
                },
            )
        })
        .collect()
}

fn text_report(input: &Path, kernel: &Path) -> String {
    alloc_of(input, kernel, &["-f", "text", "-o", "-"])
}

/// Collapsed stacks of one allocator in `view`, as a map.
fn folded(
    input: &Path,
    kernel: &Path,
    view: &str,
    dir: &Path,
    allocator: &str,
) -> BTreeMap<String, u64> {
    let out = dir.to_str().unwrap();
    alloc_of(input, kernel, &["-f", "folded", "--view", view, "-o", out]);
    let text = std::fs::read_to_string(dir.join(format!("mem-{allocator}.folded"))).unwrap();
    parse_folded(&text)
        .into_iter()
        .map(|(s, n)| (s.join(";"), n))
        .collect()
}

/// The hooked run of `arch`'s kernel, with a memtrace, both reports compared against each
/// other and against `expected`'s documented totals.
fn hooks_agree_with_memtrace(
    arch: &str,
    kernel: &Path,
    sampling: &str,
    expected: &toml::Table,
) -> Run {
    let args = format!("alloc={},elf={}{sampling}", spec(), kernel.display());
    let run = match arch {
        "i386" | "x86_64" => {
            let dir = scratch(&format!("alloc-hooks-{arch}"));
            run_to_success(qemu_with_memtrace(arch, &dir, Some(&args), ""), dir, arch)
        }
        _ => boot_virt(arch, "alloc-hooks", &args, "", &[]),
    };
    let dir = run.dir.clone();
    // Every call was recorded, and returned.
    assert!(
        run.stderr
            .contains("kern-profile: alloc hooks on 6 functions: 279 events written, 0 dropped"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("never returned"), "{}", run.stderr);

    let memtrace = text_report(&run.memtrace, kernel);
    let hooks = text_report(&run.raw, kernel);
    eprintln!("== {arch}: memtrace ==\n{memtrace}\n== {arch}: alloc hooks ==\n{hooks}");
    assert!(
        memtrace.starts_with("memtrace: 279 records, 2 allocator(s)"),
        "{memtrace}"
    );
    assert!(
        hooks.starts_with("allocation hooks: 279 events, 2 allocator(s)"),
        "{hooks}"
    );
    let (m, h) = (blocks(&memtrace), blocks(&hooks));
    assert_eq!(m.keys().collect::<Vec<_>>(), ["kmalloc", "pages"]);
    assert_eq!(m, h, "{arch}: the two reports differ");

    // The documented totals.
    for (name, want) in expected["memtrace"]["allocator"].as_table().unwrap() {
        let int = |k: &str| want[k].as_integer().unwrap() as u64;
        let c = &h[name].counters;
        assert_eq!(
            (c["allocations"], c["reallocations"], c["frees"]),
            (int("alloc"), int("realloc"), int("free")),
            "{arch} {name}"
        );
        assert_eq!(
            (c["peak live"], c["live at end"]),
            (int("peak_live"), int("live_at_end")),
            "{arch} {name}"
        );
        let leak_fn = want["leak_function"].as_str().unwrap();
        assert!(
            h[name].live_stacks.keys().all(|s| s.contains(leak_fn)),
            "{arch} {name}: memory held outside {leak_fn}: {:?}",
            h[name].live_stacks
        );
    }

    // Every view draws the same flamegraph from both inputs.
    for view in ["live", "allocated", "count", "peak"] {
        for allocator in ["kmalloc", "pages"] {
            let a = folded(&run.memtrace, kernel, view, &dir.join("mt"), allocator);
            let b = folded(&run.raw, kernel, view, &dir.join("hooks"), allocator);
            assert_eq!(a, b, "{arch}: --view {view}, mem-{allocator}.folded");
        }
    }
    run
}

#[test]
fn i386_hooks_agree_with_memtrace_while_sampling() {
    if skip_i386() {
        return;
    }
    let k = kernel();
    let run = hooks_agree_with_memtrace("i386", &k, ",period=1000000", &expected());
    // The same file holds CPU samples (version-2 layout in a version-3 file).
    let c = census(&run.raw);
    assert!(c.samples > 100, "{} samples", c.samples);
    let stacks = folded_of(&run.raw, &k, &[]);
    assert!(
        stacks.iter().any(|(s, _)| s.last().unwrap() == &hottest()),
        "no sample in {}",
        hottest()
    );
}

#[test]
fn x86_64_hooks_agree_with_memtrace() {
    if skip_x86_64() {
        return;
    }
    // The i386 kernel's expected.toml: the same code (kernel-common) on both.
    hooks_agree_with_memtrace("x86_64", &kernel64(), "", &expected());
}

#[test]
fn riscv64_and_aarch64_hooks_agree_with_memtrace() {
    // Arguments in a0../x0.., results in a0/x0, the caller in ra/x30.
    for arch in ["riscv64", "aarch64"] {
        if skip_virt(arch) {
            continue;
        }
        hooks_agree_with_memtrace(arch, &virt_kernel(arch), "", &expected_virt(arch));
    }
}

/// Loads the plugin with `alloc` (SPEC text written to a file, unless a preset) against the
/// i386 kernel; QEMU must stop before the guest runs, with `needle` in its message.
fn refused(spec_text: Option<&str>, alloc: &str, needle: &str) -> String {
    let dir = scratch("alloc-bad-spec");
    let alloc = match spec_text {
        Some(text) => {
            let p = dir.join(alloc);
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        }
        None => alloc.to_string(),
    };
    let args = format!("alloc={alloc},elf={}", kernel().display());
    let c = qemu_with_memtrace("i386", &dir, Some(&args), "");
    let out = output_with_timeout(c, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "`{alloc}` accepted: {stderr}");
    assert_ne!(out.status.code(), Some(33), "the guest ran");
    assert!(stderr.contains(needle), "no `{needle}` in: {stderr}");
    stderr
}

#[test]
fn bad_specs_stop_qemu_naming_the_line() {
    if skip_i386() {
        return;
    }
    for (text, needle) in [
        (
            "kmalloc alloc kalloc::kmalloc size=size\nkmalloc alocc kalloc::kfree ptr=ptr\n",
            "bad.spec, line 2 (`kmalloc alocc kalloc::kfree ptr=ptr`): unknown kind `alocc`: alloc, realloc or free",
        ),
        (
            "kmalloc alloc kalloc::kmallok size=size\n",
            "line 1 (`kmalloc alloc kalloc::kmallok size=size`): `kalloc::kmallok` is not a function of elf=",
        ),
        (
            "kmalloc alloc kalloc::kmalloc size=bytes\n",
            "size=`kernel_common::kalloc::kmalloc` has no parameter `bytes` (its parameters: size)",
        ),
        (
            "kmalloc free kalloc::kfree\n",
            "line 1 (`kmalloc free kalloc::kfree`): a free needs `ptr=WHERE`, the pointer it is given",
        ),
    ] {
        let stderr = refused(Some(text), "bad.spec", needle);
        eprintln!("{}", stderr.trim());
    }
    // A preset of which the kernel has nothing.
    let stderr = refused(
        None,
        "libc",
        "alloc=libc, line 3 (`libc  alloc    malloc   size=arg0`): `malloc` is not a function of elf=",
    );
    eprintln!("{}", stderr.trim());
}
