//! The example kernel of any architecture by name (i386, x86_64, riscv64, aarch64): its
//! frame-pointer build and its build without frame pointers
//! (scripts/guests/build-kernel.sh --no-frame-pointers, target/examples/nofp/), their
//! documented expectations, and a run of either with the plugin.

use std::path::{Path, PathBuf};

use crate::{
    built_kernel, expected, expected64, expected_virt, kernel, kernel64, qemu_command,
    run_to_status, scratch, virt_kernel, Run,
};

/// The example kernels' architectures.
pub const ARCHES: [&str; 4] = ["i386", "x86_64", "riscv64", "aarch64"];

/// `arch`'s example kernel as the other tests boot it (frame pointers; `KP_KERNEL` and
/// `KP_KERNEL64` override i386's and x86_64's).
pub fn example_kernel(arch: &str) -> PathBuf {
    match arch {
        "i386" => kernel(),
        "x86_64" => kernel64(),
        _ => virt_kernel(arch),
    }
}

/// `arch`'s example kernel built without frame pointers, built (or found up to date) by
/// scripts/guests/build-kernel.sh --arch ARCH --no-frame-pointers, once per test process.
pub fn nofp_kernel(arch: &str) -> PathBuf {
    built_kernel(
        "scripts/guests/build-kernel.sh",
        &["--arch", arch, "--no-frame-pointers"],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `arch`'s expected.toml (the same for both builds: they run the same code).
pub fn expected_of(arch: &str) -> toml::Table {
    match arch {
        "i386" => expected(),
        "x86_64" => expected64(),
        _ => expected_virt(arch),
    }
}

/// Boots `kernel` (an example kernel of `arch`) with the plugin (`plugin_args` after `out=`)
/// and `append` on its command line, no memtrace, and waits for its success.
pub fn boot_kernel(arch: &str, kernel: &Path, name: &str, plugin_args: &str, append: &str) -> Run {
    boot_kernel_with(arch, kernel, name, plugin_args, append, &[])
}

/// [`boot_kernel`] with `extra` arguments for QEMU.
pub fn boot_kernel_with(
    arch: &str,
    kernel: &Path,
    name: &str,
    plugin_args: &str,
    append: &str,
    extra: &[&str],
) -> Run {
    let dir = scratch(&format!("{arch}-{name}"));
    let mut c = qemu_command(arch, kernel, false, &dir, Some(plugin_args), append);
    c.args(extra);
    // isa-debug-exit's success on the PCs; QEMU's own 0 on the `virt` boards.
    let success = match arch {
        "i386" | "x86_64" => 33,
        _ => 0,
    };
    run_to_status(
        c,
        dir,
        &format!("the {arch} kernel {}", kernel.display()),
        success,
    )
}
