//! Raw files as a writer's bytes read back: a header of the architecture, sampling and vCPU
//! count a test names, then the records it encoded.

use std::io::Cursor;

use kern_profile_format::{Arch, Header, RawReader, SamplingMode};

use crate::raw;

/// A header of `arch`, `sampling` and `vcpus` with no flags, started at 0 (the rest as
/// [`raw::header`] has it).
pub fn raw_header(arch: Arch, sampling: SamplingMode, vcpus: u32) -> Header {
    Header {
        arch,
        sampling,
        start_unix_ns: 0,
        ..raw::header(vcpus, false)
    }
}

/// The same, saying that frames may hold boundary markers, as the plugin's files do.
pub fn marked_header(arch: Arch, sampling: SamplingMode, vcpus: u32) -> Header {
    Header {
        markers: true,
        ..raw_header(arch, sampling, vcpus)
    }
}

/// A reader of `records` behind `header` in format `version`.
pub fn read_back(version: u16, header: &Header, records: &[u8]) -> RawReader<Cursor<Vec<u8>>> {
    let mut file = Vec::new();
    header.encode_version(version, &mut file);
    file.extend_from_slice(records);
    RawReader::new(Cursor::new(file)).expect("a readable header")
}
