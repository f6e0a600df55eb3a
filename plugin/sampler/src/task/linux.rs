//! Linux's [`TaskSpec`] from its `task_struct` layout (`KernelImage::task_layout`: BTF and
//! kallsyms; else a vmlinux's DWARF, [`super::dwarf::linux_layout`]), for every source that
//! names tasks (the TCG plugin's `tasks=`, the gdbstub's).

use kern_profile_format::Arch;
use kern_profile_linux_image::{KernelImage, TaskLayout};

use super::dwarf::{linux_layout, LinuxDwarfError};
use super::{Current, TaskSpec, PF_KTHREAD};

/// Why a Linux image gives no spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinuxSpecError {
    #[error("its symbols give no per-CPU current_task")]
    NoPerCpuCurrent,
    /// No BTF, and no DWARF either: the BTF's message says what to give.
    #[error("{0}")]
    NoLayout(String),
    #[error("{path}: {why}")]
    Dwarf { path: String, why: LinuxDwarfError },
}

/// Where a layout's offsets were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutSource {
    Btf,
    Dwarf,
}

/// Linux's spec from `image`: its BTF, or, lacking one, its DWARF (the vmlinux of a
/// `-dbg` package: Debian's 686 kernels carry no BTF).
pub fn linux_image_spec(
    image: &KernelImage,
    arch: Arch,
) -> Result<(TaskSpec, LayoutSource), LinuxSpecError> {
    let btf = match image.task_layout() {
        Ok(l) => return Ok((linux_spec(&l, arch)?, LayoutSource::Btf)),
        Err(e) => e,
    };
    let per_cpu = matches!(arch, Arch::X86_64 | Arch::I386);
    // A vmlinux with DWARF has its symbol table; kallsyms lacks data symbols where the
    // kernel is built without KALLSYMS_ALL (Debian's 686 kernels).
    let elf = object::File::parse(&image.bytes[..]).ok();
    let symbol = |name: &str| {
        use object::{Object, ObjectSymbol};
        elf.as_ref()?
            .symbols()
            .find(|s| s.name() == Ok(name))
            .map(|s| s.address())
    };
    match linux_layout(&image.bytes, per_cpu, symbol) {
        Ok(l) => Ok((linux_spec(&l, arch)?, LayoutSource::Dwarf)),
        Err(LinuxDwarfError::NoDwarf(_)) => Err(LinuxSpecError::NoLayout(btf.to_string())),
        Err(why) => Err(LinuxSpecError::Dwarf {
            path: image.path.display().to_string(),
            why,
        }),
    }
}

/// Linux's spec from its layout: x86 finds `current` in its per-CPU area, riscv64 in a
/// register, arm64 in a register in kernel mode and in its per-CPU area in user mode.
pub fn linux_spec(l: &TaskLayout, arch: Arch) -> Result<TaskSpec, LinuxSpecError> {
    let current = match arch {
        Arch::X86_64 | Arch::I386 => Current::PerCpu {
            offset: l.per_cpu_current.ok_or(LinuxSpecError::NoPerCpuCurrent)?,
        },
        Arch::Aarch64 => match l.per_cpu_current {
            Some(offset) => Current::RegisterElsePerCpu { offset },
            None => Current::InRegister,
        },
        Arch::Riscv64 => Current::InRegister,
    };
    Ok(TaskSpec {
        current,
        tid: l.pid,
        pid: l.tgid,
        name: l.comm,
        name_len: l.comm_len,
        leader: l.group_leader,
        flags: l.flags,
        kernel_thread_flag: PF_KTHREAD,
        state: l.state,
    })
}

/// What a start line says of a Linux spec: the offsets, where they were read, and where
/// `current` is.
pub fn describe_linux_spec(s: &TaskSpec, source: LayoutSource) -> String {
    let source = match source {
        LayoutSource::Btf => "BTF",
        LayoutSource::Dwarf => "DWARF",
    };
    let current = match s.current {
        Current::PerCpu { offset } => format!("per-CPU current_task at +{offset:#x}"),
        Current::InRegister => "the current-task register".to_string(),
        Current::RegisterElsePerCpu { offset } => {
            format!(
                "the current-task register, in user mode the per-CPU __entry_task at {offset:#x}"
            )
        }
        Current::Global { address } => format!("the global pointer at {address:#x}"),
    };
    format!(
        "task_struct from {source}: pid +{:#x}, tgid +{:#x}, comm +{:#x}; {current}",
        s.tid, s.pid, s.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(per_cpu_current: Option<u64>) -> TaskLayout {
        TaskLayout {
            per_cpu_current,
            pid: 0x5c8,
            tgid: 0x5cc,
            comm: 0x7a0,
            comm_len: 16,
            group_leader: 0x5e8,
            flags: 0x2c,
            mm: 0x520,
            state: Some(0x18),
        }
    }

    #[test]
    fn x86_needs_the_per_cpu_slot_the_others_a_register() {
        let s = linux_spec(&layout(Some(0x1fb80)), Arch::X86_64).unwrap();
        assert_eq!(s.current, Current::PerCpu { offset: 0x1fb80 });
        assert_eq!(
            (s.tid, s.pid, s.name, s.leader),
            (0x5c8, 0x5cc, 0x7a0, 0x5e8)
        );
        assert_eq!(s.kernel_thread_flag, PF_KTHREAD);
        assert_eq!(
            linux_spec(&layout(None), Arch::X86_64),
            Err(LinuxSpecError::NoPerCpuCurrent)
        );
        let arm = linux_spec(&layout(None), Arch::Aarch64).unwrap();
        assert_eq!(arm.current, Current::InRegister);
        // arm64 with `__entry_task` in its kallsyms: the slot for user mode.
        let arm = linux_spec(&layout(Some(0xffff_8000_0a2d_7b48)), Arch::Aarch64).unwrap();
        assert_eq!(
            arm.current,
            Current::RegisterElsePerCpu {
                offset: 0xffff_8000_0a2d_7b48
            }
        );
    }
}
