//! Which QEMUs the plugin runs in: a system emulator of a guest architecture it can walk,
//! with one host thread per vCPU when there are several (see [`crate::qemu_args`]).

use kern_profile_format::Arch;

use crate::qemu_args::single_threaded_tcg;

/// A QEMU the plugin refuses to run in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("kern-profile profiles guest kernels: load it into qemu-system-i386, qemu-system-x86_64, qemu-system-riscv64 or qemu-system-aarch64, not user-mode QEMU")]
    UserMode,
    #[error("guest architecture '{0}' is not supported (i386, x86_64, riscv64 and aarch64 are)")]
    Unsupported(String),
    #[error("-smp {smp} with '{option}' runs all vCPUs on one host thread, where QEMU credits each translated block's counters to the vCPU that translated it (wrong counts and stacks per vCPU; guests were seen to crash): use -accel tcg,thread=multi (QEMU's default) and no -icount")]
    SingleThreadedSmp { smp: usize, option: String },
}

/// The guest architecture of a QEMU that reports `system_emulation` and `target_name`.
pub fn guest_arch(system_emulation: bool, target_name: &str) -> Result<Arch, TargetError> {
    if !system_emulation {
        return Err(TargetError::UserMode);
    }
    kern_profile_arch::from_qemu_target(target_name)
        .ok_or_else(|| TargetError::Unsupported(target_name.to_string()))
}

/// Refuses several vCPUs on one host thread; `args` are QEMU's own (`/proc/self/cmdline`).
pub fn check_threading(smp: usize, args: &[&str]) -> Result<(), TargetError> {
    if smp <= 1 {
        return Ok(());
    }
    match single_threaded_tcg(args) {
        Some(opt) => Err(TargetError::SingleThreadedSmp {
            smp,
            option: opt.to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures() {
        assert_eq!(guest_arch(true, "i386"), Ok(Arch::I386));
        assert_eq!(guest_arch(true, "x86_64"), Ok(Arch::X86_64));
        assert_eq!(guest_arch(true, "riscv64"), Ok(Arch::Riscv64));
        assert_eq!(guest_arch(true, "aarch64"), Ok(Arch::Aarch64));
        let e = guest_arch(true, "riscv32").unwrap_err().to_string();
        assert_eq!(
            e,
            "guest architecture 'riscv32' is not supported (i386, x86_64, riscv64 and aarch64 are)"
        );
        let e = guest_arch(false, "x86_64").unwrap_err().to_string();
        assert!(e.contains("not user-mode QEMU"), "{e}");
    }

    #[test]
    fn threading() {
        let single = &["qemu", "-smp", "4", "-accel", "tcg,thread=single"];
        assert_eq!(check_threading(1, single), Ok(()));
        let e = check_threading(4, single).unwrap_err().to_string();
        assert!(
            e.starts_with("-smp 4 with 'tcg,thread=single' runs all vCPUs on one host thread"),
            "{e}"
        );
        assert_eq!(check_threading(4, &["qemu", "-smp", "4"]), Ok(()));
    }
}
