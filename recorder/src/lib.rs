//! What the plugin shares with the reports, left here by the split of the plugin's logic into
//! kern-profile-sampler (source-neutral sampling) and kern-profile-plugin (the TCG source):
//!
//! - [`version`]: which QEMU and plugin API the plugin needs (from `qemu-version.txt`);
//! - [`elf_sections`]: reading ELF sections within a memory budget.
//!
//! Transitional: issue 27 moves them to kern-profile-format (`format::qemu`) and
//! kern-profile-symbols.

pub mod elf_sections;
pub mod version;
