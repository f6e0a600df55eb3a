//! The C memory functions LLVM may call (no libc here). String instructions rather than Rust
//! loops: LLVM would recognise a copy loop inside `memcpy` and compile it to a call to
//! `memcpy`, i.e. to itself.

use core::arch::asm;

#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // ESI is reserved by LLVM on i686: swap it in and out around the copy.
    asm!("xchg esi, {s}", "rep movsb", "xchg esi, {s}", s = inout(reg) src => _,
         inout("ecx") n => _, inout("edi") dst => _, options(nostack, preserves_flags));
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) <= (src as usize) || (dst as usize) >= (src as usize) + n {
        return memcpy(dst, src, n);
    }
    // Overlapping with dst above src: copy backwards.
    asm!("xchg esi, {s}", "std", "rep movsb", "cld", "xchg esi, {s}",
         s = inout(reg) src.add(n).wrapping_sub(1) => _,
         inout("ecx") n => _, inout("edi") dst.add(n).wrapping_sub(1) => _, options(nostack));
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    asm!("rep stosb", inout("ecx") n => _, inout("edi") dst => _, in("al") c as u8,
         options(nostack, preserves_flags));
    dst
}

// memcmp and bcmp: kernel_common::mem.
