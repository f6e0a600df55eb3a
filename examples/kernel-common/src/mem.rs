//! The C memory functions LLVM may call (no libc here), for every example kernel.
//!
//! The copies and the fill: x86's string instructions, byte loops through volatile accesses
//! on the virt boards (they only run in the allocation phase and the user program's
//! loading); never plain Rust loops, which LLVM would recognise as copies and compile to a
//! call to `memcpy`, i.e. to itself.

#[cfg(target_arch = "x86")]
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // ESI is reserved by LLVM on i686: swap it in and out around the copy.
    core::arch::asm!("xchg esi, {s}", "rep movsb", "xchg esi, {s}", s = inout(reg) src => _,
         inout("ecx") n => _, inout("edi") dst => _, options(nostack, preserves_flags));
    dst
}

#[cfg(target_arch = "x86_64")]
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    core::arch::asm!("rep movsb", inout("rsi") src => _, inout("rcx") n => _, inout("rdi") dst => _,
         options(nostack, preserves_flags));
    dst
}

#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
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
    #[cfg(target_arch = "x86")]
    core::arch::asm!("xchg esi, {s}", "std", "rep movsb", "cld", "xchg esi, {s}",
         s = inout(reg) src.add(n).wrapping_sub(1) => _,
         inout("ecx") n => _, inout("edi") dst.add(n).wrapping_sub(1) => _, options(nostack));
    #[cfg(target_arch = "x86_64")]
    core::arch::asm!("std", "rep movsb", "cld",
         inout("rsi") src.add(n).wrapping_sub(1) => _, inout("rcx") n => _,
         inout("rdi") dst.add(n).wrapping_sub(1) => _, options(nostack));
    #[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
    {
        let mut i = n;
        while i > 0 {
            i -= 1;
            dst.add(i).write_volatile(src.add(i).read_volatile());
        }
    }
    dst
}

#[cfg(target_arch = "x86")]
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    core::arch::asm!("rep stosb", inout("ecx") n => _, inout("edi") dst => _, in("al") c as u8,
         options(nostack, preserves_flags));
    dst
}

#[cfg(target_arch = "x86_64")]
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    core::arch::asm!("rep stosb", inout("rcx") n => _, inout("rdi") dst => _, in("al") c as u8,
         options(nostack, preserves_flags));
    dst
}

#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        dst.add(i).write_volatile(c as u8);
        i += 1;
    }
    dst
}

#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        let (x, y) = (a.add(i).read_volatile(), b.add(i).read_volatile());
        if x != y {
            return x as i32 - y as i32;
        }
        i += 1;
    }
    0
}

#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    memcmp(a, b, n)
}
