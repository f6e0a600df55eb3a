//! `task_layout()` on Debian's kernels as `scripts/setup.sh --with-linux` fetches them: the
//! amd64 6.1 (BTF in the vmlinux ELF, kallsyms `current_task`), amd64 6.12 (`pcpu_hot`),
//! arm64 6.1 (a raw Image: its BTF found by scanning) and i386 686 (no BTF: refused).
//! The values are printed so they can be checked against `pahole task_struct`.
//!
//! A missing image skips its test with a printed line, or fails it under KP_REQUIRE_LINUX=1.

use std::time::Instant;

use kern_profile_linux_image::{open, ImageError, KernelImage, Options, TaskLayout};
use kern_profile_test_support::linux_image::linux_image;

fn image(dir: &str) -> Option<KernelImage> {
    let path = linux_image(dir)?;
    Some(open(&path, &Options::default()).unwrap_or_else(|e| panic!("{e}")))
}

/// The layout of target/linux/DIR/vmlinuz, printed and checked for what every Linux has.
fn layout(dir: &str) -> Option<TaskLayout> {
    let image = image(dir)?;
    let blob = image.btf().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}: BTF at offset {:#x}, {} bytes",
        image.path.display(),
        blob.offset,
        blob.bytes.len()
    );
    let start = Instant::now();
    let layout = image.task_layout().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}: {layout:#x?} in {:.2} s",
        image.path.display(),
        start.elapsed().as_secs_f64()
    );
    // In every build: tgid right after pid, a 16-byte comm, the fields apart, in a
    // task_struct of some kilobytes (the largest offset is under 16 KiB).
    assert_eq!(layout.pid + 4, layout.tgid);
    assert_eq!(layout.comm_len, 16);
    let mut offsets = [
        layout.pid,
        layout.tgid,
        layout.comm,
        layout.group_leader,
        layout.flags,
        layout.mm,
        // Every kernel since 5.14 calls the run state `__state` (Debian's are 6.x).
        layout.state.expect("a __state member"),
    ];
    offsets.sort();
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    assert!(offsets[6] < 16 << 10, "{offsets:?}");
    Some(layout)
}

/// x86_64's layout of target/linux/DIR/vmlinuz: a per-CPU offset, inside the zero-based
/// per-CPU area (some hundred KiB).
fn x86_64_slot(dir: &str) {
    let Some(layout) = layout(dir) else {
        return;
    };
    let slot = layout
        .per_cpu_current
        .expect("x86_64 keeps current per CPU");
    assert!(slot > 0 && slot < 1 << 20, "{slot:#x}");
}

#[test]
fn debian_amd64_6_1_current_task() {
    x86_64_slot("x86_64");
}

#[test]
fn debian_amd64_6_12_pcpu_hot() {
    x86_64_slot("x86_64-6.12");
}

#[test]
fn debian_arm64_6_1_raw_image_scanned() {
    let Some(layout) = layout("aarch64") else {
        return;
    };
    // arm64 keeps current in sp_el0 in kernel mode; in user mode it is the per-CPU
    // `__entry_task`, found in the entry code (kallsyms lists no data symbols): a link
    // address in the kernel's data, past its code.
    let image = image("aarch64").unwrap();
    let kallsyms = image.kallsyms().unwrap();
    let slot = layout
        .per_cpu_current
        .expect("__entry_task from the entry code");
    let etext = kallsyms.etext.expect("_etext");
    let end = image.virtual_base(&kallsyms).unwrap() + image.bytes.len() as u64;
    assert!(slot > etext && slot < end && slot % 8 == 0, "{slot:#x}");
    println!("__entry_task at {slot:#x}");
}

#[test]
fn debian_i386_686_has_no_btf() {
    let Some(image) = image("i386") else {
        return;
    };
    let e = image.task_layout().unwrap_err();
    println!("{e}");
    assert!(matches!(e, ImageError::NoBtf { .. }), "{e:?}");
    assert!(e.to_string().contains("no BTF in"), "{e}");
    assert!(
        e.to_string().contains(&*image.path.to_string_lossy()),
        "{e}"
    );
}
