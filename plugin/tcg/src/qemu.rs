//! Thin wrappers over QEMU's plugin API and the few GLib functions it needs.
//!
//! GLib is resolved from the QEMU process at load time (QEMU links it); the plugin links
//! nothing else.

use std::ffi::{c_char, c_int, c_uint, CStr};
use std::ptr::NonNull;

use qemu_plugin_sys as sys;

pub use sys::qemu_plugin_register;

extern "C" {
    fn g_byte_array_new() -> *mut sys::GByteArray;
    fn g_byte_array_set_size(array: *mut sys::GByteArray, length: c_uint) -> *mut sys::GByteArray;
    fn g_array_free(array: *mut sys::GArray, free_segment: c_int) -> *mut c_char;
    fn g_array_get_element_size(array: *mut sys::GArray) -> c_uint;
}

/// A scoreboard pointer, shared between threads (QEMU synchronises its own accesses; the
/// plugin only reads and writes its own vCPU's counters, or reads at exit).
#[derive(Clone, Copy)]
pub struct U64Entry(pub sys::qemu_plugin_u64);

// SAFETY: a scoreboard lives until freed (never, here); QEMU's API may be called from any
// vCPU thread with any scoreboard.
unsafe impl Send for U64Entry {}
unsafe impl Sync for U64Entry {}

impl U64Entry {
    /// A new scoreboard with elements of `element_size` bytes; the entry at offset 0.
    pub fn new_scoreboard(element_size: usize) -> Option<U64Entry> {
        // SAFETY: plain API call.
        let score = unsafe { sys::qemu_plugin_scoreboard_new(element_size) };
        (!score.is_null()).then_some(U64Entry(sys::qemu_plugin_u64 { score, offset: 0 }))
    }

    pub fn at_offset(self, offset: usize) -> U64Entry {
        U64Entry(sys::qemu_plugin_u64 {
            score: self.0.score,
            offset,
        })
    }

    /// The counter of vCPU `vcpu`, which must have been initialised.
    pub fn get(self, vcpu: u32) -> u64 {
        // SAFETY: callers pass initialised vCPU indexes.
        unsafe { sys::qemu_plugin_u64_get(self.0, vcpu) }
    }

    pub fn set(self, vcpu: u32, v: u64) {
        // SAFETY: as for `get`.
        unsafe { sys::qemu_plugin_u64_set(self.0, vcpu, v) }
    }

    /// The start of vCPU `vcpu`'s element.
    pub fn element(self, vcpu: u32) -> *mut u8 {
        // SAFETY: as for `get`.
        unsafe { sys::qemu_plugin_scoreboard_find(self.0.score, vcpu) as *mut u8 }
    }
}

/// A GLib byte array that QEMU fills (and may resize), owned by one vCPU's state.
pub struct ByteArray(NonNull<sys::GByteArray>);

// SAFETY: only used under the owning vCPU's lock.
unsafe impl Send for ByteArray {}

impl ByteArray {
    pub fn new() -> Option<ByteArray> {
        // SAFETY: GLib allocation.
        NonNull::new(unsafe { g_byte_array_new() }).map(ByteArray)
    }

    fn as_ptr(&self) -> *mut sys::GByteArray {
        self.0.as_ptr()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: a live GByteArray holds `len` bytes at `data` (data may be null when empty).
        unsafe {
            let a = &*self.as_ptr();
            if a.data.is_null() || a.len == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(a.data, a.len as usize)
            }
        }
    }

    fn clear(&mut self) {
        // SAFETY: live array.
        unsafe {
            g_byte_array_set_size(self.as_ptr(), 0);
        }
    }

    /// Reads a register (only inside callbacks registered with register access) as a
    /// little-endian value of up to 8 bytes.
    pub fn read_register(&mut self, reg: Register) -> Option<u64> {
        self.clear();
        // SAFETY: called from a vCPU callback registered with QEMU_PLUGIN_CB_R_REGS. API 4
        // returns the bytes read (-1 on failure) as an int, API 6 a bool, whose upper bits
        // are undefined: the result is read from the array's length instead.
        unsafe { sys::qemu_plugin_read_register(reg.0, self.as_ptr()) };
        let b = self.bytes();
        if b.is_empty() {
            return None;
        }
        let mut w = [0u8; 8];
        let k = b.len().min(8);
        w[..k].copy_from_slice(&b[..k]);
        Some(u64::from_le_bytes(w))
    }

    /// Reads guest virtual memory of the current vCPU into `out`.
    pub fn read_memory(&mut self, addr: u64, out: &mut [u8]) -> bool {
        // SAFETY: called from a vCPU callback (QEMU asserts current_cpu).
        if !unsafe { sys::qemu_plugin_read_memory_vaddr(addr, self.as_ptr(), out.len()) } {
            return false;
        }
        let b = self.bytes();
        if b.len() < out.len() {
            return false;
        }
        out.copy_from_slice(&b[..out.len()]);
        true
    }
}

/// A register handle (an opaque token from QEMU).
#[derive(Clone, Copy)]
pub struct Register(*mut qemu_plugin_register);

// SAFETY: handles are tokens valid for the whole run, in any thread.
unsafe impl Send for Register {}

/// The current vCPU's registers as `(name, handle)`; only in a vCPU callback.
pub fn registers() -> Vec<(String, Register)> {
    let mut out = Vec::new();
    // SAFETY: called from the vCPU-init callback; QEMU returns a GArray of descriptors that
    // the caller frees (the interned names and the handles stay valid).
    unsafe {
        let arr = sys::qemu_plugin_get_registers();
        if arr.is_null() {
            return out;
        }
        let a = &*arr;
        // QEMU 11.0 (API 6) added a field to the descriptor: step by the array's own element
        // size. Every version starts with the handle and the name.
        let size = g_array_get_element_size(arr) as usize;
        let first = std::mem::offset_of!(sys::qemu_plugin_reg_descriptor, name)
            + std::mem::size_of::<*const c_char>();
        if !a.data.is_null() && size >= first {
            for i in 0..a.len as usize {
                let d = a.data.add(i * size) as *const sys::qemu_plugin_reg_descriptor;
                let (handle, name) = (
                    std::ptr::addr_of!((*d).handle).read_unaligned(),
                    std::ptr::addr_of!((*d).name).read_unaligned(),
                );
                if name.is_null() {
                    continue;
                }
                let name = CStr::from_ptr(name).to_string_lossy().into_owned();
                out.push((name, Register(handle)));
            }
        }
        g_array_free(arr, 1);
    }
    out
}
