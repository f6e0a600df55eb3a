//! Builders the tests of several crates share, so that each test binary does not carry a
//! copy, made with the format crate's own encoders: raw and legacy sample files ([`raw`],
//! headers and read-backs in [`raw_file`]), whole synthetic recordings ([`recording`]),
//! allocation events ([`alloc_event`]) and memtrace traces ([`memtrace`]); seeded damage for
//! hostile-input tests ([`damage`]); Debian's Linux images, found or skipped as the
//! environment says ([`linux_image`]); readers of the command's text outputs ([`reports`]); task records and switches
//! ([`switches`]).

pub mod alloc_event;
pub mod damage;
pub mod linux_image;
pub mod memtrace;
pub mod raw;
pub mod raw_file;
pub mod recording;
pub mod reports;
pub mod switches;
