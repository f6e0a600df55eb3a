//! Allocation mode's options, with their defaults.

use std::path::PathBuf;

use kern_profile_alloc::View as AllocView;

use crate::options::OutputFormat;

/// What allocation mode writes per allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocFormat {
    /// `mem-<allocator>.svg` flamegraphs.
    #[default]
    Svg,
    /// `mem-<allocator>.folded` collapsed stacks.
    Folded,
    /// One report of all allocators: counters and top stacks still holding memory.
    Text,
}

impl TryFrom<OutputFormat> for AllocFormat {
    type Error = OutputFormat;

    /// The allocation counterpart of a CPU format; the format back when there is none. Only
    /// these three have one: a new CPU format is refused by `--alloc` until it gets a line
    /// here, so adding one touches nothing in this file.
    fn try_from(f: OutputFormat) -> Result<Self, OutputFormat> {
        match f {
            OutputFormat::Svg => Ok(AllocFormat::Svg),
            OutputFormat::Folded => Ok(AllocFormat::Folded),
            OutputFormat::Text => Ok(AllocFormat::Text),
            _ => Err(f),
        }
    }
}

/// Options of allocation mode.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocOptions {
    /// What stacks weigh. Default: [`AllocView::Live`] (bytes still allocated at the end).
    pub view: AllocView,
    /// Default: [`AllocFormat::Svg`].
    pub format: AllocFormat,
    /// Also draw `mem-<allocator>-timeline.svg`. Default: false.
    pub timeline: bool,
    /// Skip records with a bad op byte instead of failing. Default: false.
    pub lenient: bool,
    /// Flamegraph title. Default: `None`, "`<allocator>`: `<total>` `<what>`".
    pub title: Option<String>,
    /// Reversed (icicle) flamegraphs. Default: false.
    pub reverse: bool,
    /// Stacks per allocator in the text report. Default: 20.
    pub top: usize,
    /// Expand inlined functions. Default: true.
    pub inline: bool,
    /// Append ` (file:line)`. Default: false.
    pub lines: bool,
    /// Unknown addresses as `0x…`. Default: false.
    pub addresses: bool,
    /// Further symbol sources (text maps or ELFs; see [`crate::Options::symbols`]).
    /// Default: none.
    pub symbols: Vec<PathBuf>,
    /// Allow a progress bar. Default: true.
    pub progress: bool,
}

impl Default for AllocOptions {
    fn default() -> Self {
        AllocOptions {
            view: AllocView::Live,
            format: AllocFormat::Svg,
            timeline: false,
            lenient: false,
            title: None,
            reverse: false,
            top: 20,
            inline: true,
            lines: false,
            addresses: false,
            symbols: Vec::new(),
            progress: true,
        }
    }
}
