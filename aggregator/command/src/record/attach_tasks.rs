//! Sampling through the gdbstub names each sample's task as the plugin's `tasks=auto` does:
//! on when the kernel is a Linux image with BTF, or a vmlinux with DWARF (its `task_struct`
//! layout and per-CPU `current_task`), else a line saying why not.

use std::path::Path;

use kern_profile_format::Arch;
use kern_profile_linux_image::{self as image, KernelImage};
use kern_profile_sampler::task::{describe_linux_spec, linux_image_spec, LayoutSource, TaskSpec};
use kern_profile_unwind::KernelOs;

/// The kernel's task spec, or none, and the line to print about it (none without a kernel
/// file, or when tasks were turned off).
pub fn find(
    wanted: bool,
    path: Option<&Path>,
    vmlinux: Option<&[u8]>,
    os: KernelOs,
    arch: Option<Arch>,
) -> (Option<TaskSpec>, Option<String>) {
    let Some(path) = path.filter(|_| wanted) else {
        return (None, None);
    };
    match spec(path, vmlinux, os, arch) {
        Ok((s, source)) => (Some(s), Some(found_line(path, &s, source))),
        Err(why) => (
            None,
            Some(format!(
                "kern-profile: {}: samples carry no task: {why}",
                path.display()
            )),
        ),
    }
}

fn spec(
    path: &Path,
    vmlinux: Option<&[u8]>,
    os: KernelOs,
    arch: Option<Arch>,
) -> Result<(TaskSpec, LayoutSource), String> {
    if os != KernelOs::Linux {
        return Err("not a Linux kernel (other kernels: not yet)".into());
    }
    // The vmlinux inside an image when there is one (x86's bzImage), else the file itself
    // (arm64's raw Image, whose BTF and kallsyms lie in it as they are).
    let image: KernelImage = match vmlinux {
        Some(bytes) => image::parse(path, bytes.to_vec(), &image::Options::default()),
        None => image::open(path, &image::Options::default()),
    }
    .map_err(|e| e.to_string())?;
    let arch = arch
        .or_else(|| image.arch().map(guest_arch))
        .ok_or("its architecture is unknown")?;
    // i386's FS base and x86_64's GS bases are in the stub's `g` reply, riscv64's `tp`
    // too; aarch64's SP_EL0 and riscv64's sscratch are read with `p`. An aarch64 program's
    // samples name no task: in user mode no register holds `current`, and the stub sees no
    // task switch that would.
    linux_image_spec(&image, arch).map_err(|e| e.to_string())
}

/// The guest architecture of an image's.
fn guest_arch(a: image::Arch) -> Arch {
    match a {
        image::Arch::I386 => Arch::I386,
        image::Arch::X86_64 => Arch::X86_64,
        image::Arch::Aarch64 => Arch::Aarch64,
        image::Arch::Riscv64 => Arch::Riscv64,
    }
}

/// The line printed at start when samples will carry their task.
fn found_line(path: &Path, s: &TaskSpec, source: LayoutSource) -> String {
    format!(
        "kern-profile: {}: samples carry their task ({}); --no-tasks turns this off",
        path.display(),
        describe_linux_spec(s, source)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_why_not_or_nothing() {
        let p = Path::new("kernel.elf");
        assert_eq!(
            find(false, Some(p), None, KernelOs::Linux, None),
            (None, None)
        );
        assert_eq!(find(true, None, None, KernelOs::Linux, None), (None, None));
        let (spec, line) = find(true, Some(p), None, KernelOs::Unknown, Some(Arch::X86_64));
        assert!(spec.is_none());
        assert!(line
            .unwrap()
            .contains("samples carry no task: not a Linux kernel"));
        let (spec, line) = find(true, Some(p), None, KernelOs::Linux, Some(Arch::X86_64));
        assert!(spec.is_none());
        // No vmlinux inside: the file itself, which is not there.
        assert!(line.unwrap().contains("kernel.elf"));
        let (spec, line) = find(
            true,
            Some(p),
            Some(b"x"),
            KernelOs::Linux,
            Some(Arch::Aarch64),
        );
        // Not an image: said so, with its path.
        assert!(spec.is_none());
        assert!(line
            .unwrap()
            .starts_with("kern-profile: kernel.elf: samples carry no task: "));
    }
}
