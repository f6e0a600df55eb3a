/// Why a frame-pointer walk stopped. Stored as one byte in each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum StopReason {
    /// The frame pointer was null: the normal end of a chain.
    NullFramePointer = 0,
    /// The frame pointer was not aligned to the pointer width.
    Misaligned = 1,
    /// The next frame pointer was not above the current one (a loop, or garbage).
    NotIncreasing = 2,
    /// Guest memory at the frame pointer could not be read.
    Unreadable = 3,
    /// The configured maximum depth was reached.
    DepthLimit = 4,
    /// A frame held a null return address.
    NullReturnAddress = 5,
}

impl StopReason {
    /// All reasons, indexed by their byte value.
    pub const ALL: [StopReason; 6] = [
        StopReason::NullFramePointer,
        StopReason::Misaligned,
        StopReason::NotIncreasing,
        StopReason::Unreadable,
        StopReason::DepthLimit,
        StopReason::NullReturnAddress,
    ];

    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::NullFramePointer => "null frame pointer",
            StopReason::Misaligned => "misaligned frame pointer",
            StopReason::NotIncreasing => "frame pointer not increasing",
            StopReason::Unreadable => "unreadable memory",
            StopReason::DepthLimit => "depth limit",
            StopReason::NullReturnAddress => "null return address",
        }
    }
}
