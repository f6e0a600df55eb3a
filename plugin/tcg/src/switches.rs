//! `switches=`: the QEMU glue of the task-switch hook. The kernel's switch function is found
//! once at start (Linux's, by name in its kallsyms; another's, `switches=FUNCTION`, in its
//! ELF's symbols), an instruction callback goes on its first instruction at translation, and
//! the callback hands the vCPU's registers and memory to kern-profile-sampler's
//! [`SwitchReader`](kern_profile_sampler::switch::SwitchReader).

use std::ffi::{c_uint, c_void};
use std::path::Path;
use std::sync::atomic::Ordering;

use kern_profile_arch::Convention;
use kern_profile_format::Arch;
use kern_profile_linux_image::KernelImage;
use kern_profile_sampler::alloc_hooks::args::{convention_arg, Location};
use kern_profile_sampler::switch::function::function_address;
use kern_profile_sampler::switch::SwitchSpec;
use kern_profile_sampler::task::TaskSpec;
use kern_profile_unwind::KernelOs;
use qemu_plugin_sys as sys;

use crate::config::{AutoOnOff, TaskArgs};
use crate::vcpu::send;
use crate::{guard, lock_now, PLUGIN};

/// Linux's switch function per architecture: the assembly one, called with the leaving
/// and the next task while the stack is still the leaving one's.
fn linux_switch_function(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 | Arch::I386 => "__switch_to_asm",
        Arch::Aarch64 => "cpu_switch_to",
        Arch::Riscv64 => "__switch_to",
    }
}

/// The switch hook of the kernel in `image` (at `path`), or why there is none: a line at
/// start with `switches=auto`, the error that stops QEMU with `switches=on`. `tasks` is
/// where the tasks are (switches name tasks, so they need them).
pub fn find(
    args: TaskArgs<'_>,
    tasks: Option<&TaskSpec>,
    image: &KernelImage,
    os: KernelOs,
    arch: Arch,
    path: &Path,
) -> Result<Option<SwitchSpec>, String> {
    let switches = args.switches;
    if switches == AutoOnOff::Off {
        return Ok(None);
    }
    // The hook is an instruction callback placed at translation, and `trigger=interrupt`
    // alone registers no translation callback: QEMU's bookkeeping of one is what the
    // interrupt trigger saves (3 to 6% of Debian's i386 Linux). Asked for, it pays for it.
    if switches == AutoOnOff::Auto && args.at_interrupts {
        crate::stderr_line(&format!(
            "kern-profile: elf={}: task switches not recorded: trigger=interrupt places no hook in translated code (switches=on does, at the cost of a translation callback)",
            path.display()
        ));
        return Ok(None);
    }
    let found = match (os, tasks, args.switch_function) {
        (_, None, _) => Err("samples carry no task".to_string()),
        (_, Some(_), Some(name)) => named_spec(image, arch, name).map(|s| (s, name)),
        (KernelOs::Linux, Some(_), None) => {
            linux_spec(image, arch).map(|s| (s, linux_switch_function(arch)))
        }
        _ => Err("not a Linux kernel (another kernel's: switches=FUNCTION)".to_string()),
    };
    match (found, switches) {
        (Ok((spec, name)), _) => {
            crate::stderr_line(&format!(
                "kern-profile: elf={}: task switches recorded at {name} ({:#x}), with the leaving task's stack",
                path.display(),
                spec.entry
            ));
            Ok(Some(spec))
        }
        (Err(why), AutoOnOff::On) => Err(format!(
            "switches={}: elf={}: {why}",
            args.switch_function.unwrap_or("on"),
            path.display()
        )),
        (Err(why), _) => {
            crate::stderr_line(&format!(
                "kern-profile: elf={}: task switches not recorded: {why}",
                path.display()
            ));
            Ok(None)
        }
    }
}

fn linux_spec(image: &KernelImage, arch: Arch) -> Result<SwitchSpec, String> {
    let name = linux_switch_function(arch);
    let kallsyms = image.kallsyms().map_err(|e| e.to_string())?;
    let entry = kallsyms
        .address_of(name)
        .ok_or_else(|| format!("its kallsyms have no {name}"))?;
    // i386 Linux passes arguments in registers (regparm(3)): eax, edx.
    let convention = match arch {
        Arch::I386 => Convention::Regparm3,
        _ => Convention::C,
    };
    Ok(SwitchSpec {
        entry,
        prev: convention_arg(arch, convention, 0),
        next: convention_arg(arch, convention, 1),
    })
}

/// `switches=FUNCTION`: the function by name (the ELF's symbols, else a Linux image's
/// kallsyms: a distribution's bzImage holds a vmlinux without symbols), its first two
/// arguments by the C convention.
fn named_spec(image: &KernelImage, arch: Arch, name: &str) -> Result<SwitchSpec, String> {
    let entry = image
        .is_elf()
        .then(|| function_address(&image.bytes, name))
        .flatten()
        .or_else(|| image.kallsyms().ok().and_then(|k| k.address_of(name)));
    let entry = entry.ok_or_else(|| format!("it has no function `{name}`"))?;
    Ok(SwitchSpec {
        entry,
        prev: convention_arg(arch, Convention::C, 0),
        next: convention_arg(arch, Convention::C, 1),
    })
}

/// The registers the hook reads by name (its arguments').
pub fn registers(spec: &SwitchSpec) -> Vec<&'static str> {
    [spec.prev, spec.next]
        .into_iter()
        .filter_map(|l| match l {
            Location::Register(r) => Some(r),
            Location::Stack(_) => None,
        })
        .collect()
}

/// At translation: the callback on the switch function's first instruction.
///
/// # Safety
/// `tb` is the block QEMU is translating, with the instructions at `insns`.
pub unsafe fn instrument(spec: &'static SwitchSpec, tb: *mut sys::qemu_plugin_tb, insns: &[u64]) {
    if let Some(i) = insns.iter().position(|&a| a == spec.entry) {
        sys::qemu_plugin_register_vcpu_insn_exec_cb(
            sys::qemu_plugin_tb_get_insn(tb, i),
            Some(on_switch),
            sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
            std::ptr::null_mut(),
        );
    }
}

unsafe extern "C" fn on_switch(vcpu: c_uint, _: *mut c_void) {
    guard(|| switched(vcpu));
}

/// vCPU `idx` is at the switch: its switch record and the next task's go into its batch.
fn switched(idx: u32) {
    let Some(p) = PLUGIN.get() else { return };
    if p.exiting.load(Ordering::Relaxed) {
        return;
    }
    let Some(mut v) = p.vcpus.get(idx as usize).and_then(lock_now) else {
        return;
    };
    if !v.ready {
        return;
    }
    let icount = crate::vcpu::counted_instructions(p, idx, &v);
    let time_ns = p.now_ns();
    let due = v.take_switch(idx, time_ns, icount, p.width.bytes());
    p.switches_seen.fetch_add(1, Ordering::Relaxed);
    if due {
        send(p, &mut v.buffer);
    }
}
