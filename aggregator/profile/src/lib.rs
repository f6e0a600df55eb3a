//! kern-profile's CPU profiles, between a sample file and an output: decoding (either
//! format, [`input`]), naming frames ([`stacks`]: symbols, boundaries, address spaces, user
//! stacks), filtering ([`filter`]), counting distinct address stacks ([`counts`],
//! [`profile::CpuProfile`]) and naming them once ([`folded::Folded`]); what went wrong is a
//! [`Warning`], a failure a [`ProfileError`]. Renderers draw from a [`collect::Run`].

pub mod address_space;
pub mod boundary;
pub mod collect;
pub mod counts;
pub mod cpu_list;
mod error;
pub mod exact;
pub mod filter;
pub mod folded;
pub mod input;
pub mod key_memo;
pub mod off_cpu;
pub mod options;
pub mod percent;
pub mod place;
pub mod profile;
pub mod progress;
pub mod run_groups;
pub mod stacks;
pub mod stuck;
pub mod tasks;
pub mod timed;
pub mod unnamed;
pub mod user_stack;
pub mod vcpu_counts;
pub mod walk_tally;
pub mod warning;

pub use cpu_list::{CpuList, CpuListError};
pub use error::ProfileError;
pub use folded::Folded;
pub use options::{ModeFilter, Options, OutputFormat, ReportBy};
pub use warning::Warning;

/// The symbols crate, as this crate's modules name it.
pub use kern_profile_symbols as symbolize;
