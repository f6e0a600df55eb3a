//! Builders the tests of several crates share, so that each test binary does not carry a
//! copy: raw and legacy sample files ([`raw`]) and memtrace traces ([`memtrace`]), made
//! with the format crate's own encoders.

pub mod memtrace;
pub mod raw;
pub mod recording;
