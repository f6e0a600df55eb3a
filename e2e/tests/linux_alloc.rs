//! `alloc=linux` on a real kernel: Debian 12's Linux 6.1 (i386, built with regparm(3), amd64,
//! System V, and arm64) booted by scripts/guests/run-linux.sh with the plugin hooking the
//! preset's functions, `elf=` naming the distribution's image: the hooks' addresses come
//! from the kallsyms tables compiled into it, and so do the report's names. The slab
//! allocator's calls must be recorded, none lost, its reallocations' implementations not
//! recorded twice, and the stacks named. And Debian 12's Linux 6.12 amd64, whose allocator
//! entry points carry 6.10's `_noprof` names.
//!
//! The guest comes from `scripts/setup.sh --with-linux` (target/linux/). Without it these
//! tests print why and pass, unless `KP_E2E=required`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kern_profile_e2e::*;

/// The guest kernels: Debian 12's 6.1 per architecture, and its 6.12 amd64.
#[derive(Clone, Copy)]
enum Kernel {
    Debian61,
    Debian612,
}

fn linux_present(arch: &str, kernel: Kernel) -> bool {
    let dir = root().join("target/linux").join(arch);
    let mut files = vec![dir.join("vmlinuz"), dir.join("busybox")];
    files.extend(kernel_path(arch, kernel));
    linux_guest_present(&dir, &files)
}

/// The kernel to give run-linux.sh, None for its default (6.1).
fn kernel_path(arch: &str, kernel: Kernel) -> Option<PathBuf> {
    match kernel {
        Kernel::Debian61 => None,
        Kernel::Debian612 => Some(root().join(format!("target/linux/{arch}-6.12/vmlinuz"))),
    }
}

/// Boots Linux into `dir`; returns run-linux.sh's stderr.
fn boot(dir: &Path, arch: &str, kernel: Kernel, plugin_args: Option<&str>) -> String {
    let mut c = Command::new("bash");
    c.arg(root().join("scripts/guests/run-linux.sh"))
        .args(["--arch", arch, "--timeout", "1200", "--out"])
        .arg(dir);
    if let Some(k) = kernel_path(arch, kernel) {
        c.arg("--kernel").arg(k);
    }
    if let Some(a) = plugin_args {
        c.args(["--plugin", a]).env("KP_PLUGIN", plugin());
    }
    let out = output_with_timeout(c, Duration::from_secs(1300));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "Linux ({arch}) failed: {stderr}");
    stderr
}

/// The counters of allocator `name` in a text report.
fn counters(report: &str, name: &str) -> BTreeMap<String, u64> {
    allocator_block(report, name)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let at = l.find(|c: char| c.is_ascii_digit())?;
            let n = l[at..].split_whitespace().next()?.parse().ok()?;
            Some((l[..at].trim().to_string(), n))
        })
        .collect()
}

/// Boots `kernel` with `alloc=linux`, `elf=` naming its image (the hooks' addresses from the
/// image's kallsyms); the hooks' exit line and the text report, named from the image too.
fn hooked_run(arch: &'static str, kernel: Kernel, name: &str) -> Option<(String, String)> {
    if !linux_present(arch, kernel) || skip_unless(&[Need::Qemu(arch), Need::Plugin, Need::Bin]) {
        return None;
    }
    let image = kernel_path(arch, kernel)
        .unwrap_or_else(|| root().join(format!("target/linux/{arch}/vmlinuz")));
    let dir = scratch(&format!("linux-alloc-{name}"));
    let raw: PathBuf = dir.join("alloc.raw");
    let args = format!("out={},alloc=linux,elf={}", raw.display(), image.display());
    let stderr = boot(&dir, arch, kernel, Some(&args));
    let line = stderr
        .lines()
        .find(|l| l.contains("alloc hooks on"))
        .unwrap_or_else(|| panic!("no alloc hooks line: {stderr}"))
        .to_string();
    println!("{name}: {line}");
    assert!(line.contains(" events written, 0 dropped"), "{line}");

    let report = alloc_of(&raw, &image, &["-f", "text", "--top", "5", "-o", "-"]);
    println!("{report}");
    Some((line, report))
}

fn hooked_linux(arch: &'static str) {
    let Some((_, report)) = hooked_run(arch, Kernel::Debian61, arch) else {
        return;
    };
    let slab = counters(&report, "slab");
    assert!(slab["allocations"] > 10_000, "{slab:?}");
    assert!(slab["frees"] > 1_000, "{slab:?}");
    assert!(slab["units allocated"] > 100_000, "{slab:?}");
    assert!(slab["reallocations"] > 0, "{slab:?}");
    // krealloc's own kmalloc and kfree calls are not recorded twice: every reallocation acts
    // on a live block, and no allocation returns a live pointer.
    let block = report.split("allocator `slab`").nth(1).unwrap();
    assert!(!block.contains("of a pointer not live"), "{block}");
    assert!(
        slab.get("allocs at a live pointer").copied().unwrap_or(0) < 10,
        "{slab:?}"
    );
    assert_pages_and_leaves(&report, &["__kmalloc", "kmalloc_trace", "kmem_cache_alloc"]);
}

/// Both page allocators allocated, and some slab stack still holding memory ends in one of
/// `leaves` (hooked functions, named from kallsyms).
fn assert_pages_and_leaves(report: &str, leaves: &[&str]) {
    for name in ["pages", "page"] {
        assert!(counters(report, name)["allocations"] > 0, "{name}");
    }
    let block = report.split("allocator `slab`").nth(1).unwrap();
    assert!(
        block
            .lines()
            .filter(|l| l.contains("%  "))
            .any(|l| leaves.iter().any(|f| l.ends_with(&format!(";{f}")))),
        "{block}"
    );
}

#[test]
fn linux_i386_slab_through_the_preset() {
    hooked_linux("i386");
}

#[test]
fn linux_x86_64_slab_through_the_preset() {
    hooked_linux("x86_64");
}

/// arm64: arguments in x0..x7, results in x0, the caller in x30.
#[test]
fn linux_aarch64_slab_through_the_preset() {
    hooked_linux("aarch64");
}

/// Linux 6.10 renamed the allocators' entry points (`__kmalloc_noprof`, ...; the old names
/// became macros): the preset must find them, on Debian 12's 6.12 amd64.
#[test]
fn linux_6_12_noprof_names_through_the_preset() {
    // Alone: the guest's timers (and so, likely, its RCU batches and the frees the trace
    // misses with them) follow host time. Beside this binary's three other Linux guests, one
    // of six runs on 2026-11-29 (sid's QEMU) counted 570 double frees of 30,923, over the
    // bound, against the 17 to 19 the bound was set on.
    let Some((line, report)) = alone(|| hooked_run("x86_64", Kernel::Debian612, "x86_64-6.12"))
    else {
        return;
    };
    const PRESET: &str = include_str!("../../plugin/sampler/src/alloc_hooks/presets/linux.spec");
    let absent = line.split("not in the kernel: ").nth(1).unwrap_or("");
    for f in [
        "__kmalloc_noprof",
        "__kmalloc_cache_noprof",
        "__kmalloc_node_noprof",
        "kmem_cache_alloc_noprof",
        "krealloc_noprof",
        "get_free_pages_noprof",
        "__alloc_pages_noprof",
    ] {
        let in_preset = PRESET
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(&format!("?{f}")));
        assert!(in_preset, "{f} is not in the linux preset");
        assert!(!absent.split(", ").any(|a| a == f), "{f} not found: {line}");
    }
    let slab = counters(&report, "slab");
    assert!(slab["allocations"] > 10_000, "{slab:?}");
    assert!(slab["frees"] > 1_000, "{slab:?}");
    assert!(slab["reallocations"] > 0, "{slab:?}");
    // A few frees and allocations still meet a block the trace missed (17 to 19 double
    // frees of 31,000 on 6.12 here, 27 allocations at a live pointer of 59,000). Before the
    // bulk calls were hooked, merged caches' objects freed, handed out by
    // kmem_cache_alloc_bulk unseen and freed again made 7 to 546 double frees from run to
    // run, once over the bound.
    let at_live = slab.get("allocs at a live pointer").copied().unwrap_or(0);
    assert!(at_live * 100 < slab["allocations"], "{slab:?}");
    let doubles = slab.get("double frees").copied().unwrap_or(0);
    assert!(doubles * 100 < slab["frees"], "{slab:?}");
    let leaves = [
        "__kmalloc_cache_noprof",
        "__kmalloc_noprof",
        "kmem_cache_alloc_noprof",
    ];
    assert_pages_and_leaves(&report, &leaves);
}
