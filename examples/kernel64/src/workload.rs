//! The CPU workload, examples/kernel-common/src/workload.rs's in 64-bit arithmetic, expanded
//! here so that its functions are this crate's (`kernel64::workload::hot_leaf`, ...: the
//! names of expected.toml). Measured exactly by examples/common/measure-shares.py, numbers
//! in expected.toml.

kernel_common::cpu_workload!(u64);
