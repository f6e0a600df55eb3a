//! A Linux image as the kernel argument: Debian's kernels as `scripts/setup.sh --with-linux`
//! puts them in target/linux/ are named from their kallsyms alone. A missing image skips its
//! test with a printed line, or fails it under KP_REQUIRE_LINUX=1.

use std::path::Path;

use kern_profile_format::Arch;
use kern_profile_linux_image::{open, Options};
use kern_profile_symbols::{kernel_os_of_image, KernelFile, SymbolError, Symbolizer};
use kern_profile_test_support::linux_image::linux_image;
use kern_profile_unwind::KernelOs;

/// The address of function `name` in the kernel's names.
fn address_of(kernel: &KernelFile, name: &str) -> u64 {
    kernel
        .symbols()
        .unwrap()
        .symbols()
        .iter()
        .find(|s| &*s.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .start
}

/// The names at a few functions' insides, through the symbolizer the reports use.
fn names_functions(path: &Path, arch: Arch, other: Arch) {
    let kernel = KernelFile::load(path).unwrap();
    assert!(kernel.is_linux());
    // The stack walks take Linux's layouts on it, from the image alone (the plugin's elf=).
    assert_eq!(kernel.kernel_os(), KernelOs::Linux);
    let image = open(path, &Options::default()).unwrap();
    assert_eq!(kernel_os_of_image(&image), KernelOs::Linux);
    let n = kernel.symbols().unwrap().len();
    assert!(n > 30_000, "{n} code symbols");
    let mut sym = Symbolizer::load(Some(path), &[]).unwrap();
    sym.check_arch(arch).unwrap();
    for f in ["schedule", "do_idle", "vfs_read"] {
        let at = address_of(&kernel, f);
        let frames = sym.frames(at + 2);
        assert_eq!(frames.last().map(|f| &*f.function), Some(f), "at {at:#x}");
        assert!(sym.kernel_holds(at), "{f} at {at:#x} outside the kernel");
    }
    let e = sym.check_arch(other).unwrap_err().to_string();
    assert!(
        e.contains(&format!("is a Linux image for {}", arch.name())),
        "{e}"
    );
}

#[test]
fn a_bzimage_is_named_from_its_kallsyms() {
    let Some(path) = linux_image("x86_64") else {
        return;
    };
    let kernel = KernelFile::load(&path).unwrap();
    assert_eq!(kernel.kallsyms.as_ref().unwrap().container, "bzImage, xz");
    // The vmlinux inside: its code and segments, no symbols (stripped).
    assert!(kernel.elf.as_ref().is_some_and(|e| e.is_stripped()));
    names_functions(&path, Arch::X86_64, Arch::Aarch64);
}

#[test]
fn a_raw_arm64_image_is_named_from_its_kallsyms() {
    let Some(path) = linux_image("aarch64") else {
        return;
    };
    let kernel = KernelFile::load(&path).unwrap();
    assert!(kernel.elf.is_none());
    assert_eq!(kernel.kallsyms.as_ref().unwrap().container, "Image");
    names_functions(&path, Arch::Aarch64, Arch::X86_64);
}

#[test]
fn files_that_are_no_kernel_keep_their_errors() {
    let dir = std::env::temp_dir().join(format!("kp-kernel-image-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let e = KernelFile::load(&junk).err().unwrap();
    assert!(matches!(e, SymbolError::NotElf { .. }), "{e}");
    assert!(e.to_string().contains("no ELF magic"), "{e}");
    // A bzImage header over a payload that is no compressed stream: the image's error.
    let mut bz = vec![0u8; 0x1000];
    bz[0x1f1] = 1; // setup_sects
    bz[0x202..0x206].copy_from_slice(b"HdrS");
    bz[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    let fake = dir.join("bzImage");
    std::fs::write(&fake, &bz).unwrap();
    let e = KernelFile::load(&fake).err().unwrap().to_string();
    assert!(e.starts_with(&fake.display().to_string()), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
