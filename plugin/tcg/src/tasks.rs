//! `tasks=`: where the guest's tasks are, found once at start from `elf=` (Linux: the
//! `task_struct` offsets in its BTF, the per-CPU `current_task` in its kallsyms; another
//! kernel: `tasks=POINTER->ID,NAME` checked against its DWARF), and the line the plugin prints
//! about it.

use std::path::Path;

use kern_profile_format::Arch;
use kern_profile_linux_image::KernelImage;
use kern_profile_sampler::task::dwarf::{resolve, ResolvedTasks};
use kern_profile_sampler::task::{describe_linux_spec, linux_image_spec, LayoutSource, TaskSpec};
use kern_profile_unwind::KernelOs;

use crate::config::{AutoOnOff, TaskArgs};

/// The task spec of the kernel in `image` (at `path`), or why there is none, as the line to
/// print (with `tasks=auto`) or the error that stops QEMU (with `tasks=on`).
pub fn find(
    args: TaskArgs<'_>,
    image: &KernelImage,
    os: KernelOs,
    arch: Arch,
    path: &Path,
) -> Result<Option<TaskSpec>, String> {
    let tasks = args.tasks;
    if tasks == AutoOnOff::Off {
        return Ok(None);
    }
    // A description is `on`: its errors stop QEMU.
    if let Some(desc) = args.description {
        let r = resolve(&image.bytes, desc).map_err(|e| e.to_string())?;
        crate::stderr_line(&described_line(path, &desc.pointer, &r));
        return Ok(Some(r.spec()));
    }
    let found = match os {
        KernelOs::Linux => linux_image_spec(image, arch).map_err(|e| e.to_string()),
        _ => Err("not a Linux kernel (other kernels: not yet)".to_string()),
    };
    match (found, tasks) {
        (Ok((spec, source)), _) => {
            crate::stderr_line(&found_line(path, &spec, source));
            Ok(Some(spec))
        }
        (Err(why), AutoOnOff::On) => Err(format!("tasks=on: elf={}: {why}", path.display())),
        (Err(why), _) => {
            crate::stderr_line(&format!(
                "kern-profile: elf={}: samples carry no task: {why}",
                path.display()
            ));
            Ok(None)
        }
    }
}

/// The line printed at start when samples will carry their task.
fn found_line(path: &Path, s: &TaskSpec, source: LayoutSource) -> String {
    format!(
        "kern-profile: elf={}: samples carry their task ({})",
        path.display(),
        describe_linux_spec(s, source)
    )
}

/// The line printed at start for a described kernel's tasks.
fn described_line(path: &Path, pointer: &str, r: &ResolvedTasks) -> String {
    let truncated = match r.name_array_len > r.name_len as u64 {
        true => format!(", its first {} of {} bytes", r.name_len, r.name_array_len),
        false => String::new(),
    };
    format!(
        "kern-profile: elf={}: samples carry their task (struct {} from DWARF: id +{:#x}, name +{:#x}{truncated}; the current one at {pointer}, {:#x})",
        path.display(),
        r.strukt,
        r.id,
        r.name,
        r.address
    )
}
