//! The largest values the plugin accepts for its numeric arguments: the plugin refuses more,
//! and `kern-profile record` refuses them before QEMU starts.

/// Largest accepted `depth=`.
pub const MAX_DEPTH: u32 = 1024;
/// Largest accepted `delay=` (one hour).
pub const MAX_DELAY_US: u64 = 3_600_000_000;
/// Largest accepted `period=` (keeps instruction budgets far from counter overflow).
pub const MAX_PERIOD: u64 = 1 << 40;
