//! The workloads' optimisation barrier and leaf loop, for the riscv64 and aarch64 kernels
//! (examples/virt-common) and their user program (`#[macro_use] extern crate kernel_common`).
//! Same as the i386 kernel's (examples/kernel/src/workload.rs), which keeps its own copies.
//!
//! `collapse_debuginfo(no)`: the expanded code keeps its lines in this file, as when the
//! macros were local to each crate (rustc collapses other crates' macros to the call site).

/// An optimisation barrier on a register value (like `core::hint::black_box` but without a
/// stack round trip and without an inlined `black_box` frame in DWARF).
#[cfg(target_arch = "aarch64")]
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! opaque {
    ($x:expr) => {{
        let mut v: u32 = $x;
        unsafe { core::arch::asm!("/* {0:w} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}
#[cfg(not(target_arch = "aarch64"))]
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! opaque {
    ($x:expr) => {{
        let mut v: u32 = $x;
        unsafe { core::arch::asm!("/* {0} */", inout(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}

/// The leaves' common loop body (a macro rather than a function: see
/// examples/virt-common/src/workload.rs).
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! leaf_loop {
    ($seed:expr, $iters:expr) => {{
        let n = $crate::opaque!($iters);
        let mut acc: u32 = $seed;
        let mut i: u32 = 0;
        while i < n {
            acc = $crate::opaque!(((acc << 5) | (acc >> 27)) ^ i) * 0x9E37_79B9;
            i += 1;
        }
        acc
    }};
}
