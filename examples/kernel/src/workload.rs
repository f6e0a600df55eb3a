//! The CPU workload, examples/kernel-common/src/workload.rs's in 32-bit arithmetic, expanded
//! here so that its functions are this crate's (`kernel::workload::hot_leaf`, ...: the names
//! of expected.toml and linker.ld). Measured exactly by examples/common/measure-shares.py,
//! numbers in expected.toml.

kernel_common::cpu_workload!(u32);
