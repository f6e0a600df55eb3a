//! The fuzz targets' bodies, one module each, so that `cargo test` can replay the seed
//! corpus through them without libFuzzer (tests/replay.rs).

pub mod alloc_analyze;
pub mod alloc_spec;
pub mod cpu_e2e;
pub mod elf;
pub mod entry_stubs;
pub mod legacy;
pub mod linux_image;
pub mod memtrace;
pub mod plugin_args;
pub mod raw;
pub mod symbol_map;
pub mod unwind_cfi;
pub mod unwind_orc;

/// A target: one input through a parser and whatever uses what it read.
pub type Target = fn(&[u8]);

/// Every target by its name (the folder of its seeds in `fuzz/corpus/`).
pub const ALL: &[(&str, Target)] = &[
    ("raw", raw::run),
    ("legacy", legacy::run),
    ("memtrace", memtrace::run),
    ("alloc_analyze", alloc_analyze::run),
    ("symbol_map", symbol_map::run),
    ("elf", elf::run),
    ("plugin_args", plugin_args::run),
    ("alloc_spec", alloc_spec::run),
    ("cpu_e2e", cpu_e2e::run),
    ("unwind_orc", unwind_orc::run),
    ("unwind_cfi", unwind_cfi::run),
    ("linux_image", linux_image::run),
    ("entry_stubs", entry_stubs::run),
];
