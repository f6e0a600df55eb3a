//! Raw sample files (the plugin's format) and legacy ones (the original C plugin's), record
//! by record.

use kern_profile_format::{Arch, Header, SampleRecord, SamplingMode, StopReason};

/// An i386 header of `period=100000` sampling over `vcpus` vCPUs, with exact counts or not.
pub fn header(vcpus: u32, exact: bool) -> Header {
    Header {
        arch: Arch::I386,
        sampling: SamplingMode::PeriodInstructions(100_000),
        exact,
        markers: false,
        at_interrupts: false,
        gdbstub: false,
        vcpus,
        max_depth: 64,
        start_unix_ns: 1_700_000_000_000_000_000,
        qemu_version: "10.0.2".into(),
    }
}

/// A sample with the defaults tests rarely change.
pub fn sample(vcpu: u32, t: u64, pc: u64, frames: &[u64]) -> SampleRecord<'_> {
    SampleRecord {
        vcpu,
        user: false,
        stop: StopReason::NullFramePointer.into(),
        time_ns: t,
        icount: t * 10,
        pc,
        sp: 0xc020_0000,
        sp_word: None,
        frames,
        entry_resolved: false,
    }
}

/// A legacy (original C plugin) file: `u8 n`, then n u64 addresses.
pub fn legacy(samples: &[&[u64]]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in samples {
        out.push(s.len() as u8);
        for a in *s {
            out.extend_from_slice(&a.to_le_bytes());
        }
    }
    out
}
