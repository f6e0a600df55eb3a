//! The C memory functions LLVM may call (no libc here). String instructions rather than Rust
//! loops: LLVM would recognise a copy loop inside `memcpy` and compile it to a call to
//! `memcpy`, i.e. to itself.

use core::arch::asm;

#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    asm!("rep movsb", inout("rsi") src => _, inout("rcx") n => _, inout("rdi") dst => _,
         options(nostack, preserves_flags));
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) <= (src as usize) || (dst as usize) >= (src as usize) + n {
        return memcpy(dst, src, n);
    }
    // Overlapping with dst above src: copy backwards.
    asm!("std", "rep movsb", "cld",
         inout("rsi") src.add(n).wrapping_sub(1) => _, inout("rcx") n => _,
         inout("rdi") dst.add(n).wrapping_sub(1) => _, options(nostack));
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    asm!("rep stosb", inout("rcx") n => _, inout("rdi") dst => _, in("al") c as u8,
         options(nostack, preserves_flags));
    dst
}

// memcmp and bcmp: kernel_common::mem.
