//! `flight=` and `flight_trigger=`: the QEMU glue of the flight recorder. The writer keeps
//! the ring (kern_profile_sampler::flight); the trigger functions are found once at start
//! (kern_profile_sampler::flight_trigger), an instruction callback goes on each one's first
//! instruction at translation, and the first vCPU to reach one hands over its batch and has
//! the ring written. From then on the recording goes on as a plain one, up to QEMU's exit
//! (or `max_size=`): the panic path after the trigger is in it too.

use std::ffi::{c_uint, c_void};
use std::path::Path;
use std::sync::atomic::Ordering;

use kern_profile_linux_image::KernelImage;
use kern_profile_sampler::flight_trigger::{elf_triggers, wanted, Trigger};
use qemu_plugin_sys as sys;

use crate::{guard, lock_within, stderr_line, EXIT_LOCK_WAIT, PLUGIN};

/// The functions `flight_trigger=` names in the kernel `image` (at `path`): in its ELF
/// symbols, else in its kallsyms (a distribution's bzImage holds a vmlinux without
/// symbols); an error when none of a value's functions is in either.
pub fn find(image: &KernelImage, values: &[String], path: &Path) -> Result<Vec<Trigger>, String> {
    let mut all = Vec::new();
    for value in values {
        let names = wanted(std::slice::from_ref(value));
        let mut found = match image.is_elf() {
            true => elf_triggers(&image.bytes, &names),
            false => Vec::new(),
        };
        if found.is_empty() {
            if let Ok(k) = image.kallsyms() {
                found = names
                    .iter()
                    .filter_map(|n| {
                        k.address_of(n).map(|entry| Trigger {
                            name: n.to_string(),
                            entry,
                        })
                    })
                    .collect();
            }
        }
        if found.is_empty() {
            return Err(format!(
                "flight_trigger={value}: elf={} has no function {}",
                path.display(),
                names.join(", no ")
            ));
        }
        all.extend(found);
    }
    all.sort_by_key(|t| t.entry);
    all.dedup_by_key(|t| t.entry);
    let names: Vec<String> = all
        .iter()
        .map(|t| format!("{} ({:#x})", t.name, t.entry))
        .collect();
    stderr_line(&format!(
        "kern-profile: flight recorder: the ring is written at {}, or at exit",
        names.join(", ")
    ));
    Ok(all)
}

/// At translation: the callback on each trigger function's first instruction.
///
/// # Safety
/// `tb` is the block QEMU is translating, with the instructions at `insns`.
pub unsafe fn instrument(
    triggers: &'static [Trigger],
    tb: *mut sys::qemu_plugin_tb,
    insns: &[u64],
) {
    for (i, a) in insns.iter().enumerate() {
        if let Some(t) = triggers.iter().find(|t| t.entry == *a) {
            sys::qemu_plugin_register_vcpu_insn_exec_cb(
                sys::qemu_plugin_tb_get_insn(tb, i),
                Some(on_trigger),
                sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                t as *const Trigger as *mut c_void,
            );
        }
    }
}

unsafe extern "C" fn on_trigger(vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: userdata is a `&'static Trigger` registered with this callback.
    let t = unsafe { &*(userdata as *const Trigger) };
    guard(|| triggered(vcpu, t));
}

/// vCPU `idx` reached a trigger: the first time, its batch goes into the ring and the ring
/// is written.
fn triggered(idx: u32, t: &Trigger) {
    let Some(p) = PLUGIN.get() else { return };
    if p.exiting.load(Ordering::Relaxed) || p.flight_dumped.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Some(mut v) = p
        .vcpus
        .get(idx as usize)
        .and_then(|s| lock_within(&s.0, EXIT_LOCK_WAIT))
    {
        if !v.buffer.is_empty() {
            let batch = v.buffer.take(p.writer.fresh_buffer());
            p.writer.submit_blocking(batch);
        }
    }
    p.writer.dump();
    stderr_line(&format!(
        "kern-profile: flight recorder: vCPU {idx} reached {} after {:.1} s: the last {} s are written, and the recording goes on to the end",
        t.name,
        p.now_ns() as f64 / 1e9,
        p.cfg.flight_secs.unwrap_or(0)
    ));
}
