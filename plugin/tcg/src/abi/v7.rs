//! Plugin API 7 (QEMU 11.1 and later): the lifetime callbacks lost the plugin id and gained a
//! trailing `userdata`, and each registration takes that `userdata`. The bindings crate stops
//! at API 5, so the few registrations used are declared here, under QEMU's symbol names.

use std::ffi::{c_int, c_uint, c_void};

use qemu_plugin_sys as sys;

use crate::guard;

type VcpuCb = unsafe extern "C" fn(vcpu: c_uint, userdata: *mut c_void);
type TbTransCb = unsafe extern "C" fn(tb: *mut sys::qemu_plugin_tb, userdata: *mut c_void);
type UdataCb = unsafe extern "C" fn(userdata: *mut c_void);

// The same symbols as the bindings crate's API-4 declarations, with API 7's signatures.
#[allow(clashing_extern_declarations)]
extern "C" {
    #[link_name = "qemu_plugin_register_vcpu_init_cb"]
    fn register_vcpu_init_cb(id: sys::qemu_plugin_id_t, cb: VcpuCb, userdata: *mut c_void);
    #[link_name = "qemu_plugin_register_vcpu_idle_cb"]
    fn register_vcpu_idle_cb(id: sys::qemu_plugin_id_t, cb: VcpuCb, userdata: *mut c_void);
    #[link_name = "qemu_plugin_register_vcpu_resume_cb"]
    fn register_vcpu_resume_cb(id: sys::qemu_plugin_id_t, cb: VcpuCb, userdata: *mut c_void);
    #[link_name = "qemu_plugin_register_vcpu_tb_trans_cb"]
    fn register_vcpu_tb_trans_cb(id: sys::qemu_plugin_id_t, cb: TbTransCb, userdata: *mut c_void);
    #[link_name = "qemu_plugin_register_atexit_cb"]
    fn register_atexit_cb(id: sys::qemu_plugin_id_t, cb: UdataCb, userdata: *mut c_void);
}

unsafe extern "C" fn vcpu_init(vcpu: c_uint, _userdata: *mut c_void) {
    guard(|| crate::vcpu::vcpu_init(vcpu));
}

unsafe extern "C" fn vcpu_idle(vcpu: c_uint, _userdata: *mut c_void) {
    guard(|| crate::vcpu::vcpu_idle(vcpu));
}

unsafe extern "C" fn vcpu_resume(vcpu: c_uint, _userdata: *mut c_void) {
    guard(|| crate::timer::vcpu_resume(vcpu));
}

unsafe extern "C" fn tb_trans(tb: *mut sys::qemu_plugin_tb, _userdata: *mut c_void) {
    // SAFETY: QEMU passes the block being translated.
    guard(|| unsafe { crate::translate::tb_trans(tb) });
}

unsafe extern "C" fn exit(_userdata: *mut c_void) {
    guard(crate::exit::finish);
}

unsafe extern "C" fn discon(
    vcpu: c_uint,
    _kind: c_int,
    from_pc: u64,
    _to_pc: u64,
    _userdata: *mut c_void,
) {
    guard(|| crate::vcpu::at_interrupt(vcpu, from_pc));
}

/// API 7's `qemu_plugin_register_vcpu_discon_cb(id, type, cb, userdata)`.
type RegisterDiscon = unsafe extern "C" fn(
    sys::qemu_plugin_id_t,
    c_int,
    unsafe extern "C" fn(c_uint, c_int, u64, u64, *mut c_void),
    *mut c_void,
);

/// # Safety
/// `f` is QEMU's `qemu_plugin_register_vcpu_discon_cb`, on a QEMU of this ABI; from
/// `qemu_plugin_install`.
pub unsafe fn register_discon(id: sys::qemu_plugin_id_t, f: *mut c_void) {
    let f: RegisterDiscon = std::mem::transmute(f);
    f(id, super::DISCON_INTERRUPT, discon, std::ptr::null_mut());
}

/// # Safety
/// See [`super::Api::register_callbacks`].
pub unsafe fn register(id: sys::qemu_plugin_id_t, translate: bool) {
    let none = std::ptr::null_mut();
    register_vcpu_init_cb(id, vcpu_init, none);
    register_vcpu_idle_cb(id, vcpu_idle, none);
    register_vcpu_resume_cb(id, vcpu_resume, none);
    if translate {
        register_vcpu_tb_trans_cb(id, tb_trans, none);
    }
    register_atexit_cb(id, exit, none);
}
