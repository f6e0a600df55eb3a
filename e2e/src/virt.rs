//! The riscv64 and aarch64 example kernels (examples/kernel-riscv64, examples/kernel-aarch64)
//! on QEMU's `virt` boards: the built kernels and user programs, runs with the real plugin,
//! and their documented expectations (`examples/kernel-ARCH/expected.toml`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{built_kernel, qemu_command, root, run_to_status, scratch, skip_unless, Need, Run};

/// QEMU's exit status when a `virt` kernel finished (the SiFive test device, semihosting
/// `SYS_EXIT`).
const VIRT_SUCCESS: i32 = 0;

/// `arch`'s example kernel, built (or found up to date) by scripts/guests/build-kernel.sh --arch
/// ARCH, once per test process.
pub fn virt_kernel(arch: &str) -> PathBuf {
    built_kernel("scripts/guests/build-kernel.sh", &["--arch", arch])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `arch`'s user program with its symbols (for `--user`), built with the kernel.
pub fn virt_user_elf(arch: &str) -> PathBuf {
    virt_kernel(arch).with_file_name(format!("user-{arch}.elf"))
}

/// examples/kernel-ARCH/expected.toml.
pub fn expected_virt(arch: &str) -> toml::Table {
    let path = root().join(format!("examples/kernel-{arch}/expected.toml"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether a test of `arch`'s kernel with the plugin should return at once: its QEMU, the
/// kernel, the plugin or the aggregator is missing.
pub fn skip_virt(arch: &'static str) -> bool {
    skip_unless(&[
        Need::Qemu(arch),
        Need::Plugin,
        Need::Bin,
        Need::VirtKernel(arch),
    ])
}

/// The QEMU command booting `arch`'s kernel as scripts/guests/run-kernel.sh --arch ARCH does: the
/// UART to `dir/com1`, the memtrace (semihosting, `memtrace=FILE`) to `dir/memtrace`, the
/// plugin writing `dir/raw` when `plugin_args` is given.
pub fn qemu_virt(arch: &str, dir: &Path, plugin_args: Option<&str>, append: &str) -> Command {
    qemu_command(arch, &virt_kernel(arch), true, dir, plugin_args, append)
}

/// Boots `arch`'s kernel with the plugin (`plugin_args` after `out=`), `append` on its
/// command line and `extra` QEMU arguments (`-smp 4 -accel tcg,thread=multi`); it must exit
/// with success.
pub fn boot_virt(arch: &str, name: &str, plugin_args: &str, append: &str, extra: &[&str]) -> Run {
    let dir = scratch(&format!("{arch}-{name}"));
    let mut c = qemu_virt(arch, &dir, Some(plugin_args), append);
    c.args(extra);
    run_to_status(c, dir, &format!("the {arch} kernel"), VIRT_SUCCESS)
}
