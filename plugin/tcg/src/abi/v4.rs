//! Plugin API 4 (QEMU 9.2 to 11.0): lifetime callbacks take the plugin id first, as the
//! bindings crate declares them.

use std::ffi::{c_int, c_uint, c_void};

use qemu_plugin_sys as sys;

use crate::guard;

unsafe extern "C" fn vcpu_init(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| crate::vcpu::vcpu_init(vcpu));
}

unsafe extern "C" fn vcpu_idle(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| crate::vcpu::vcpu_idle(vcpu));
}

unsafe extern "C" fn vcpu_resume(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| crate::timer::vcpu_resume(vcpu));
}

unsafe extern "C" fn tb_trans(_id: sys::qemu_plugin_id_t, tb: *mut sys::qemu_plugin_tb) {
    // SAFETY: QEMU passes the block being translated.
    guard(|| unsafe { crate::translate::tb_trans(tb) });
}

unsafe extern "C" fn exit(_id: sys::qemu_plugin_id_t, _userdata: *mut c_void) {
    guard(crate::exit::finish);
}

unsafe extern "C" fn discon(
    _id: sys::qemu_plugin_id_t,
    vcpu: c_uint,
    _kind: c_int,
    from_pc: u64,
    _to_pc: u64,
) {
    guard(|| crate::vcpu::at_interrupt(vcpu, from_pc));
}

/// QEMU 10.2 to 11.0's `qemu_plugin_register_vcpu_discon_cb(id, type, cb)`.
type RegisterDiscon = unsafe extern "C" fn(
    sys::qemu_plugin_id_t,
    c_int,
    unsafe extern "C" fn(sys::qemu_plugin_id_t, c_uint, c_int, u64, u64),
);

/// # Safety
/// `f` is QEMU's `qemu_plugin_register_vcpu_discon_cb`, on a QEMU of this ABI; from
/// `qemu_plugin_install`.
pub unsafe fn register_discon(id: sys::qemu_plugin_id_t, f: *mut c_void) {
    let f: RegisterDiscon = std::mem::transmute(f);
    f(id, super::DISCON_INTERRUPT, discon);
}

/// # Safety
/// See [`super::Api::register_callbacks`].
pub unsafe fn register(id: sys::qemu_plugin_id_t, translate: bool) {
    sys::qemu_plugin_register_vcpu_init_cb(id, Some(vcpu_init));
    sys::qemu_plugin_register_vcpu_idle_cb(id, Some(vcpu_idle));
    sys::qemu_plugin_register_vcpu_resume_cb(id, Some(vcpu_resume));
    if translate {
        sys::qemu_plugin_register_vcpu_tb_trans_cb(id, Some(tb_trans));
    }
    sys::qemu_plugin_register_atexit_cb(id, Some(exit), std::ptr::null_mut());
}
