//! The measured workloads, written once for every example kernel: the CPU phase
//! (`cpu_workload!`) and the `smp=on` rounds (`smp_workload!`). Each kernel expands them in
//! its own module (`mod workload { kernel_common::cpu_workload!(u32); }`), so that the
//! functions are that crate's, with the names expected.toml, the measuring scripts and the
//! linker scripts (`.text._ZN6kernel8workload*`) know: `kernel::workload::hot_leaf`,
//! `kernel64::workload::hot_leaf`, `kernel::smp::smp_run`. The instruction counts of each
//! kernel's expected.toml hold because the expansion is token for token the code that was
//! measured (and is compiled with the kernel's flags, in its codegen unit).
//!
//! CPU phase: a call tree whose instruction shares are known by construction and measured
//! exactly (examples/common/measure-shares.py, numbers in each kernel's expected.toml):
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
//! The word is u32 (i386, riscv64, aarch64) or u64 (x86_64: the same shape in 64-bit
//! arithmetic, with 64-bit mixing constants). The virt kernels are built with
//! `-C force-frame-pointers=non-leaf`: their leaves (hot_leaf, cold_leaf, blend) have no
//! frame record, as GCC and clang leave them by default.
//!
//! Rules that keep the shares stable and the DWARF clean:
//! - every function is `#[inline(never)]` except `mix_inlined` (`#[inline(always)]`);
//! - iteration counts pass through `opaque!` so LLVM cannot unroll, vectorise or fold the
//!   loops, and identical-looking functions keep distinct constants (rustc merges identical
//!   functions into one address otherwise);
//! - no core methods (`wrapping_mul`, `rotate_left`, ranges, `black_box`) in loop bodies: each
//!   would show in DWARF as an inlined subroutine of its own, so `mix_inlined` would not be
//!   the only inlined frame. Plain operators compile to the same instructions (the kernels are
//!   built with overflow checks off).
//!
//! `smp=on`: every CPU n runs `smp_run` (from the kernel's own `run` and `ap_main`, which
//! start and wait for the CPUs):
//!
//! ```text
//! smp_run                  loop over `rounds`
//! └─ smp_round(n)          once per round: ROUND_ITERS leaf iterations in all
//!    ├─ cpu_work_n         OWN_ITERS[n] iterations: CPU n's own function
//!    └─ smp_shared         ROUND_ITERS - OWN_ITERS[n] iterations: common to every CPU
//! ```
//!
//! so CPU n's profile is dominated by `cpu_work_n`, with a share that differs from CPU to
//! CPU (0.80, 0.72, 0.64, 0.56: examples/kernel/expected.toml, `[smp]`).

/// The CPU phase's constants and functions, in the word `u32` or `u64` (see the module doc).
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! cpu_workload {
    (u32) => {
        $crate::cpu_workload!(@word u32, seed 0x1234_5678, rotate 27, leaf_mul 0x9E37_79B9,
            middle_xor 0x5A5A_5A5A, recurse_add 0x7F4A_7C15, mix (15, 0x85EB_CA6B, 13));
    };
    (u64) => {
        $crate::cpu_workload!(@word u64, seed 0x1234_5678_9ABC_DEF0, rotate 59,
            leaf_mul 0x9E37_79B9_7F4A_7C15, middle_xor 0x5A5A_5A5A_5A5A_5A5A,
            recurse_add 0x7F4A_7C15_9E37_79B9, mix (33, 0xFF51_AFD7_ED55_8CCD, 29));
    };
    (@word $w:ident, seed $seed:literal, rotate $rot:literal, leaf_mul $leaf_mul:literal,
     middle_xor $middle_xor:literal, recurse_add $recurse_add:literal,
     mix ($mix_shr1:literal, $mix_mul:literal, $mix_shr2:literal)) => {
        /// Iterations per round. The hot/cold ratio is exactly 10 by construction: same loop
        /// body.
        pub const COLD_ITERS: $w = 1_000;
        pub const HOT_ITERS: $w = 10 * COLD_ITERS;
        /// recurse(RECURSE_DEPTH) runs RECURSE_DEPTH + 1 levels, LEVEL_ITERS iterations each.
        pub const RECURSE_DEPTH: $w = 7;
        pub const LEVEL_ITERS: $w = 400;
        pub const BLEND_ITERS: $w = 2_500;

        #[inline(never)]
        pub fn run_workload(rounds: u32) -> $w {
            let mut acc: $w = $seed;
            let mut r: u32 = 0;
            while r < rounds {
                acc = stage_outer(acc ^ r as $w);
                r += 1;
            }
            acc
        }

        #[inline(never)]
        pub fn stage_outer(seed: $w) -> $w {
            let a = stage_middle(seed);
            let b = cold_leaf(a);
            let c = recurse(RECURSE_DEPTH, b);
            // Through opaque! so blend is called, not tail-jumped to: a tail call would make
            // run_workload, not stage_outer, blend's parent in every stack walk.
            $crate::opaque!(as $w, blend(c))
        }

        #[inline(never)]
        pub fn stage_middle(seed: $w) -> $w {
            $crate::opaque!(as $w, hot_leaf(seed ^ $middle_xor))
        }

        /// The hottest function: about half of all instructions.
        #[inline(never)]
        pub fn hot_leaf(seed: $w) -> $w {
            $crate::leaf_loop!(as $w, $rot, $leaf_mul; seed, HOT_ITERS)
        }

        /// Same body as `hot_leaf`, a tenth of the iterations.
        #[inline(never)]
        pub fn cold_leaf(seed: $w) -> $w {
            $crate::leaf_loop!(as $w, $rot, $leaf_mul; seed, COLD_ITERS)
        }

        /// Real (non-tail) recursion: the result of the inner call goes through `opaque!`
        /// before being combined, so LLVM cannot turn it into a loop. Each level does its own
        /// work first.
        #[inline(never)]
        pub fn recurse(depth: $w, seed: $w) -> $w {
            let n = $crate::opaque!(as $w, LEVEL_ITERS);
            let mut acc = seed;
            let mut i: $w = 0;
            while i < n {
                acc = $crate::opaque!(as $w, acc ^ (acc >> 3) ^ i) + $recurse_add;
                i += 1;
            }
            if depth == 0 {
                return acc;
            }
            let below = $crate::opaque!(as $w, recurse(depth - 1, acc));
            acc ^ below
        }

        /// Calls `mix_inlined` once per iteration; after inlining, its instructions sit
        /// inside this function's loop, described in DWARF by a DW_TAG_inlined_subroutine.
        #[inline(never)]
        pub fn blend(seed: $w) -> $w {
            let n = $crate::opaque!(as $w, BLEND_ITERS);
            let mut acc = seed;
            let mut i: $w = 0;
            while i < n {
                acc = $crate::opaque!(as $w, acc + i * 3);
                acc = mix_inlined(acc);
                i += 1;
            }
            acc
        }

        /// Always inlined into `blend`: a murmur3-style finaliser step (fmix32 or fmix64).
        #[inline(always)]
        fn mix_inlined(x: $w) -> $w {
            let y = $crate::opaque!(as $w, x ^ (x >> $mix_shr1));
            let z = $crate::opaque!(as $w, y * $mix_mul);
            z ^ (z >> $mix_shr2)
        }
    };
}

/// The `smp=on` rounds' constants and functions: `smp_run(cpu, rounds)` and what it calls
/// (see the module doc). u32 on every kernel. `$cpus`: CPUs with a workload, 4 or more;
/// CPUs 4 and up run CPU 3's function (the i386 kernel takes 8, for the plugin's cost at
/// `-smp 8`).
#[macro_export]
#[collapse_debuginfo(no)]
macro_rules! smp_workload {
    ($cpus:literal) => {
        /// CPUs with a workload (0..MAX_CPUS).
        pub const MAX_CPUS: u32 = $cpus;
        /// Leaf iterations per round, on every CPU.
        pub const ROUND_ITERS: u32 = 5_000;
        /// Iterations of CPU n's own function per round (CPUs 4 and up: CPU 3's);
        /// `smp_shared` does the rest.
        pub const OWN_ITERS: [u32; 4] = [4_000, 3_600, 3_200, 2_800];

        /// CPU `cpu`'s workload: `rounds` rounds of `smp_round`.
        #[inline(never)]
        pub fn smp_run(cpu: u32, rounds: u32) -> u32 {
            let mut acc: u32 = 0x1234_5678 ^ cpu;
            let mut r: u32 = 0;
            while r < rounds {
                acc = smp_round(cpu, acc ^ r);
                r += 1;
            }
            acc
        }

        /// One round on CPU `cpu`: its own function, then the common one; ROUND_ITERS
        /// iterations.
        #[inline(never)]
        pub fn smp_round(cpu: u32, seed: u32) -> u32 {
            let a = match cpu {
                0 => cpu_work_0(seed),
                1 => cpu_work_1(seed),
                2 => cpu_work_2(seed),
                _ => cpu_work_3(seed),
            };
            let own = OWN_ITERS[cpu.min(3) as usize];
            $crate::opaque!(smp_shared(a, ROUND_ITERS - own))
        }

        /// CPU 0's own function.
        #[inline(never)]
        pub fn cpu_work_0(seed: u32) -> u32 {
            $crate::leaf_loop!(seed, 4_000)
        }

        /// CPU 1's own function.
        #[inline(never)]
        pub fn cpu_work_1(seed: u32) -> u32 {
            $crate::leaf_loop!(seed, 3_600)
        }

        /// CPU 2's own function.
        #[inline(never)]
        pub fn cpu_work_2(seed: u32) -> u32 {
            $crate::leaf_loop!(seed, 3_200)
        }

        /// CPU 3's own function.
        #[inline(never)]
        pub fn cpu_work_3(seed: u32) -> u32 {
            $crate::leaf_loop!(seed, 2_800)
        }

        /// The part of every round common to all CPUs.
        #[inline(never)]
        pub fn smp_shared(seed: u32, iters: u32) -> u32 {
            $crate::leaf_loop!(seed, iters)
        }
    };
}
