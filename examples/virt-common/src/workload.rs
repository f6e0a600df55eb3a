//! The CPU workload, examples/kernel-common/src/workload.rs's in 32-bit arithmetic (the i386
//! kernel's), expanded here so that its functions are this crate's
//! (`kernel::workload::hot_leaf`, ...: the names of expected.toml and linker.ld). Measured
//! exactly by examples/common/measure-shares.py, numbers in each kernel's expected.toml.

kernel_common::cpu_workload!(u32);
