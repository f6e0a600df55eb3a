//! The C memory functions LLVM may call (no libc here). Byte loops through volatile
//! accesses, so that LLVM cannot recognise them as copies and call memcpy (itself); they
//! only run in the allocation phase and the user program's loading. memcmp and bcmp are the
//! x86 kernels' (kernel_common::mem).

#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        dst.add(i).write_volatile(src.add(i).read_volatile());
        i += 1;
    }
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) <= (src as usize) || (dst as usize) >= (src as usize) + n {
        return memcpy(dst, src, n);
    }
    // Overlapping with dst above src: copy backwards.
    let mut i = n;
    while i > 0 {
        i -= 1;
        dst.add(i).write_volatile(src.add(i).read_volatile());
    }
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        dst.add(i).write_volatile(c as u8);
        i += 1;
    }
    dst
}

// memcmp and bcmp: kernel_common::mem.
