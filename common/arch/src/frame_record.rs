/// Where the frame record `{saved frame pointer, return address}` is, relative to the frame
/// pointer, for kern-profile-unwind's walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRecord {
    /// Bytes from the frame pointer down to its record: 0 where the frame pointer points at
    /// it (x86, aarch64), 16 where it points just above it (riscv64).
    pub below: u64,
    /// Every frame pointer's alignment.
    pub align: u64,
}
