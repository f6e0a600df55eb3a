//! The workloads' optimisation barrier and leaf loop: those of src/workload.rs, and of the
//! virt kernels' user program (`#[macro_use] extern crate kernel_common`). u32 unless given
//! another word (`opaque!(as u64, x)`, `leaf_loop!(as u64, ROTATE, MUL; seed, iters)`).
//!
//! `collapse_debuginfo(no)`: the expanded code keeps its lines in this file, as when the
//! macros were local to each crate (rustc collapses other crates' macros to the call site).

/// An optimisation barrier on a register value (like `core::hint::black_box` but without a
/// stack round trip and without an inlined `black_box` frame in DWARF).
#[cfg(target_arch = "aarch64")]
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! opaque {
    (as $t:ty, $x:expr) => {{
        let mut v: $t = $x;
        unsafe { core::arch::asm!("/* {0:w} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
    ($x:expr) => {
        $crate::opaque!(as u32, $x)
    };
}
#[cfg(not(target_arch = "aarch64"))]
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! opaque {
    (as $t:ty, $x:expr) => {{
        let mut v: $t = $x;
        unsafe { core::arch::asm!("/* {0} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
    ($x:expr) => {
        $crate::opaque!(as u32, $x)
    };
}

/// The leaves' common loop body (a macro rather than a function: see src/workload.rs): a
/// rotation left by 5 (right by ROTATE = word bits - 5), a xor, a multiplication by MUL.
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! leaf_loop {
    (as $t:ty, $rot:literal, $mul:literal; $seed:expr, $iters:expr) => {{
        let n = $crate::opaque!(as $t, $iters);
        let mut acc: $t = $seed;
        let mut i: $t = 0;
        while i < n {
            acc = $crate::opaque!(as $t, ((acc << 5) | (acc >> $rot)) ^ i) * $mul;
            i += 1;
        }
        acc
    }};
    ($seed:expr, $iters:expr) => {
        $crate::leaf_loop!(as u32, 27, 0x9E37_79B9; $seed, $iters)
    };
}
