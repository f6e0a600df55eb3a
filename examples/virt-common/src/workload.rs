//! The CPU workload, the i386 kernel's (examples/kernel/src/workload.rs) line for line: a call
//! tree whose instruction shares are known by construction and measured exactly (each virt
//! kernel's measure-shares.py, numbers in its expected.toml). Built with
//! `-C force-frame-pointers=non-leaf`: the leaves (hot_leaf, cold_leaf, blend) have no frame
//! record, as GCC and clang leave them by default.
//!
//! ```text
//! kmain
//! └─ run_workload                  loop over `rounds`
//!    └─ stage_outer                once per round
//!       ├─ stage_middle
//!       │  └─ hot_leaf             HOT_ITERS  = 10 x COLD_ITERS iterations of LEAF_STEP
//!       ├─ cold_leaf               COLD_ITERS iterations of the same LEAF_STEP
//!       ├─ recurse(7) -> recurse(6) -> ... -> recurse(0)   LEVEL_ITERS per level
//!       └─ blend                   BLEND_ITERS iterations, each with an inlined mix_inlined
//! ```
//!
//! Rules that keep the shares stable and the DWARF clean:
//! - every function is `#[inline(never)]` except `mix_inlined` (`#[inline(always)]`);
//! - iteration counts pass through `opaque!` so LLVM cannot unroll, vectorise or fold the
//!   loops, and identical-looking functions keep distinct constants (rustc merges identical
//!   functions into one address otherwise);
//! - no core methods (`wrapping_mul`, `rotate_left`, ranges, `black_box`) in loop bodies: each
//!   would show in DWARF as an inlined subroutine of its own, so `mix_inlined` would not be
//!   the only inlined frame. Plain operators compile to the same instructions (this crate is
//!   built with overflow checks off).

/// Iterations per round. The hot/cold ratio is exactly 10 by construction: same loop body.
pub const COLD_ITERS: u32 = 1_000;
pub const HOT_ITERS: u32 = 10 * COLD_ITERS;
/// recurse(RECURSE_DEPTH) runs RECURSE_DEPTH + 1 levels, LEVEL_ITERS iterations each.
pub const RECURSE_DEPTH: u32 = 7;
pub const LEVEL_ITERS: u32 = 400;
pub const BLEND_ITERS: u32 = 2_500;

#[inline(never)]
pub fn run_workload(rounds: u32) -> u32 {
    let mut acc: u32 = 0x1234_5678;
    let mut r: u32 = 0;
    while r < rounds {
        acc = stage_outer(acc ^ r);
        r += 1;
    }
    acc
}

#[inline(never)]
pub fn stage_outer(seed: u32) -> u32 {
    let a = stage_middle(seed);
    let b = cold_leaf(a);
    let c = recurse(RECURSE_DEPTH, b);
    // Through opaque! so blend is called, not tail-jumped to: a tail call would make
    // run_workload, not stage_outer, blend's parent in every stack walk.
    opaque!(blend(c))
}

#[inline(never)]
pub fn stage_middle(seed: u32) -> u32 {
    opaque!(hot_leaf(seed ^ 0x5A5A_5A5A))
}

/// The hottest function: about half of all instructions.
#[inline(never)]
pub fn hot_leaf(seed: u32) -> u32 {
    leaf_loop!(seed, HOT_ITERS)
}

/// Same body as `hot_leaf`, a tenth of the iterations.
#[inline(never)]
pub fn cold_leaf(seed: u32) -> u32 {
    leaf_loop!(seed, COLD_ITERS)
}

/// Real (non-tail) recursion: the result of the inner call goes through `opaque!` before
/// being combined, so LLVM cannot turn it into a loop. Each level does its own work first.
#[inline(never)]
pub fn recurse(depth: u32, seed: u32) -> u32 {
    let n = opaque!(LEVEL_ITERS);
    let mut acc = seed;
    let mut i: u32 = 0;
    while i < n {
        acc = opaque!(acc ^ (acc >> 3) ^ i) + 0x7F4A_7C15;
        i += 1;
    }
    if depth == 0 {
        return acc;
    }
    let below = opaque!(recurse(depth - 1, acc));
    acc ^ below
}

/// Calls `mix_inlined` once per iteration; after inlining, its instructions sit inside this
/// function's loop, described in DWARF by a DW_TAG_inlined_subroutine.
#[inline(never)]
pub fn blend(seed: u32) -> u32 {
    let n = opaque!(BLEND_ITERS);
    let mut acc = seed;
    let mut i: u32 = 0;
    while i < n {
        acc = opaque!(acc + i * 3);
        acc = mix_inlined(acc);
        i += 1;
    }
    acc
}

/// Always inlined into `blend`: a murmur-style finaliser step.
#[inline(always)]
fn mix_inlined(x: u32) -> u32 {
    let y = opaque!(x ^ (x >> 15));
    let z = opaque!(y * 0x85EB_CA6B);
    z ^ (z >> 13)
}
