//! Debian's kernels as `scripts/setup.sh --with-linux` fetches them into target/linux/ of the
//! checkout: each unpacks to its kernel, and its kallsyms name tens of thousands of symbols
//! at addresses inside the kernel's code. When a guest's /proc/kallsyms was captured
//! (scripts/run-linux.sh writes target/linux/run-ARCH/kallsyms), the image's agree with it.
//!
//! A missing image skips its test with a printed line, or fails it under KP_REQUIRE_LINUX=1.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kern_profile_linux_image::{
    open, Arch, Compression, Container, Kallsyms, KernelImage, Options,
};
use kern_profile_test_support::linux_image::linux_image;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The image at target/linux/DIR/vmlinuz, or None (after saying why) when it is absent.
fn image(dir: &str) -> Option<KernelImage> {
    let path = linux_image(dir)?;
    let start = Instant::now();
    let image = open(&path, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}: unpacked in {:.2} s",
        path.display(),
        start.elapsed().as_secs_f64()
    );
    Some(image)
}

/// The loaded ranges of an ELF's program headers (little-endian, 32 or 64-bit), executable
/// ones first (i386 keeps .init.text in a writable one).
fn load_segments(elf: &[u8]) -> Vec<(u64, u64)> {
    let u16_at = |at: usize| u64::from(u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()));
    let u32_at = |at: usize| u64::from(u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()));
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    let wide = elf[4] == 2;
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    } else {
        (u32_at(0x1c), u16_at(0x2a), u16_at(0x2c))
    };
    let mut segments: Vec<(bool, u64, u64)> = (0..phnum)
        .filter_map(|i| {
            let ph = (phoff + i * phentsize) as usize;
            let (kind, flags, vaddr, memsz) = if wide {
                (u32_at(ph), u32_at(ph + 4), u64_at(ph + 16), u64_at(ph + 40))
            } else {
                (u32_at(ph), u32_at(ph + 24), u32_at(ph + 8), u32_at(ph + 20))
            };
            (kind == 1).then_some((flags & 1 == 0, vaddr, vaddr + memsz))
        })
        .collect();
    segments.sort();
    segments.into_iter().map(|(_, lo, hi)| (lo, hi)).collect()
}

/// Tens of thousands of symbols, sorted, the wanted text symbols among them inside `code`
/// (the kernel's loaded ranges), `schedule` in the first (its .text).
fn check_symbols(image: &KernelImage, kallsyms: &Kallsyms, wanted: &[&str], code: &[(u64, u64)]) {
    let n = kallsyms.symbols.len();
    assert!(n > 20_000, "{}: only {n} kallsyms", image.path.display());
    assert!(kallsyms
        .symbols
        .windows(2)
        .all(|w| w[0].address <= w[1].address));
    for name in wanted {
        let s = kallsyms
            .symbols
            .iter()
            .find(|s| s.name == *name)
            .unwrap_or_else(|| panic!("{}: no {name} in kallsyms", image.path.display()));
        assert!(s.is_text(), "{name} is {:?}", s.kind);
        assert!(
            code.iter().any(|&(lo, hi)| (lo..hi).contains(&s.address)),
            "{name} at {:#x} is outside the code {code:x?}",
            s.address
        );
        assert_eq!(
            kallsyms.lookup(s.address + 1).map(|s| s.address),
            Some(s.address)
        );
    }
}

/// The guest's /proc/kallsyms, captured by scripts/run-linux.sh, agrees with the image's:
/// every kernel line (modules aside), when the capture is of this kernel.
fn compare_with_guest(arch: &str, kallsyms: &Kallsyms) {
    let path = root()
        .join("target/linux")
        .join(format!("run-{arch}"))
        .join("kallsyms");
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!(
            "no captured guest kallsyms at {}: not compared",
            path.display()
        );
        return;
    };
    let guest: Vec<(u64, char, &str)> = text
        .lines()
        .filter(|l| !l.contains('['))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let address = u64::from_str_radix(f.next()?, 16).ok()?;
            let kind = f.next()?.chars().next()?;
            Some((address, kind, f.next()?))
        })
        .collect();
    let start_kernel = guest.iter().find(|g| g.2 == "start_kernel").map(|g| g.0);
    if start_kernel != kallsyms.address_of("start_kernel") {
        println!(
            "{} is of another kernel (or a KASLR boot): not compared",
            path.display()
        );
        return;
    }
    let ours: Vec<(u64, char, &str)> = kallsyms
        .symbols
        .iter()
        .map(|s| (s.address, s.kind, s.name.as_str()))
        .collect();
    assert_eq!(guest.len(), ours.len(), "{}: line count", path.display());
    let differ: Vec<_> = guest
        .iter()
        .zip(&ours)
        .filter(|(g, o)| g != o)
        .take(5)
        .collect();
    assert!(
        differ.is_empty(),
        "{}: (guest, image) differ: {differ:x?}",
        path.display()
    );
    println!("{}: all {} lines agree", path.display(), guest.len());
}

fn check_x86(dir: &str, arch: Arch, compression: Compression, wanted: &[&str]) {
    let Some(image) = image(dir) else { return };
    assert!(
        matches!(image.container, Container::BzImage { .. }),
        "{:?}",
        image.container
    );
    assert_eq!(image.compression, Some(compression));
    assert!(image.is_elf());
    image.check_arch(arch).unwrap();
    let other = if arch == Arch::I386 {
        Arch::X86_64
    } else {
        Arch::I386
    };
    assert!(image.check_arch(other).is_err());
    let start = Instant::now();
    let kallsyms = image.kallsyms().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{} kallsyms in {:.2} s",
        kallsyms.symbols.len(),
        start.elapsed().as_secs_f64()
    );
    let code = load_segments(&image.bytes);
    check_symbols(&image, &kallsyms, wanted, &code);
    // _text is where the first executable segment starts: the anchor of a KASLR slide.
    assert_eq!(kallsyms.text, Some(code[0].0));
    compare_with_guest(dir, &kallsyms);
}

#[test]
fn debian_amd64_6_1_bzimage_xz() {
    check_x86(
        "x86_64",
        Arch::X86_64,
        Compression::Xz,
        &["start_kernel", "schedule", "do_syscall_64"],
    );
}

#[test]
fn debian_amd64_6_12_bzimage_zstd() {
    check_x86(
        "x86_64-6.12",
        Arch::X86_64,
        Compression::Zstd,
        &["start_kernel", "schedule", "do_syscall_64"],
    );
}

#[test]
fn debian_i386_6_1_bzimage_xz() {
    check_x86(
        "i386",
        Arch::I386,
        Compression::Xz,
        &["start_kernel", "schedule", "do_int80_syscall_32"],
    );
}

#[test]
fn debian_arm64_6_1_image() {
    let Some(image) = image("aarch64") else {
        return;
    };
    assert_eq!(image.container, Container::RawImage);
    assert_eq!(image.compression, None);
    image.check_arch(Arch::Aarch64).unwrap();
    let kallsyms = image.kallsyms().unwrap_or_else(|e| panic!("{e}"));
    // No ELF: the image's own link address comes from the relocation of the kallsyms base.
    let base = image
        .virtual_base(&kallsyms)
        .expect("the image's link address");
    let code = [(base, base + image.bytes.len() as u64)];
    check_symbols(
        &image,
        &kallsyms,
        &["start_kernel", "schedule", "el0_svc"],
        &code,
    );
    assert_eq!(kallsyms.stext.map(|s| s - base), Some(0x1_0000));
    compare_with_guest("aarch64", &kallsyms);
}
