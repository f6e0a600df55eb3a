//! The aggregator's whole CPU path on any sample file (raw or legacy) against the committed
//! test ELF `aggregator/command/tests/data/tiny.elf`: folded stacks, the text report, a Firefox
//! profile, a pprof profile and a trace, each as `run_cpu` writes it.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{bounded, scratch_file};
use kern_profile::{run_cpu, Options, OutputFormat};

fn tiny_elf() -> &'static Path {
    static ELF: OnceLock<PathBuf> = OnceLock::new();
    ELF.get_or_init(|| {
        scratch_file(
            "tiny.elf",
            include_bytes!("../../../aggregator/command/tests/data/tiny.elf"),
        )
    })
}

/// One input through the target.
pub fn run(data: &[u8]) {
    let elf = tiny_elf();
    let raw = scratch_file("samples.raw", data);
    bounded(data.len(), || {
        for format in [
            OutputFormat::Folded,
            OutputFormat::Text,
            OutputFormat::Firefox,
            OutputFormat::Pprof,
            OutputFormat::Trace,
        ] {
            let opts = Options {
                format,
                progress: false,
                ..Options::default()
            };
            let mut out = Vec::new();
            match run_cpu(&raw, Some(elf), &opts, &mut out) {
                Ok(report) => black_box((report, out)),
                Err(e) => black_box((Default::default(), e.to_string().into_bytes())),
            };
        }
    });
}
