use std::fmt;
use std::str::FromStr;

/// What the weight of a stack means in [`AllocatorProfile::stacks`](crate::AllocatorProfile).
/// Weights are in the trace's units (bytes for a heap, pages for a page allocator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum View {
    /// Units still live at the end of the trace, by the stack that allocated (or last
    /// reallocated) them: the leak view, and the original tool's only one.
    #[default]
    Live,
    /// Units ever asked for: the sizes of allocations plus the new sizes of reallocations.
    Allocated,
    /// Number of allocations plus reallocations.
    Count,
    /// Units live at the operation where the allocator's live total first reached its peak.
    Peak,
}

impl View {
    pub const ALL: [View; 4] = [View::Live, View::Allocated, View::Count, View::Peak];

    /// The name used on the command line (`--view`).
    pub fn name(self) -> &'static str {
        match self {
            View::Live => "live",
            View::Allocated => "allocated",
            View::Count => "count",
            View::Peak => "peak",
        }
    }
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for View {
    type Err = String;

    fn from_str(s: &str) -> Result<View, String> {
        View::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("unknown view `{s}` (expected live, allocated, count or peak)"))
    }
}

/// How to analyse a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// What [`AllocatorProfile::stacks`](crate::AllocatorProfile) weighs. Default: [`View::Live`].
    pub view: View,
    /// Skip a record with a bad op byte to the next plausible record (counted in
    /// [`Analysis::skips`](crate::Analysis)) instead of failing. Default: false.
    pub lenient: bool,
    /// About how many points each allocator's timeline keeps (min and max of each bucket of
    /// operations, so the peak is always among them); 0 keeps none. Default: 2000.
    pub timeline_points: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            view: View::Live,
            lenient: false,
            timeline_points: 2000,
        }
    }
}
