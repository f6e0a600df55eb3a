//! The x86 boot protocol's setup header (Linux's Documentation/arch/x86/boot.rst): where a
//! bzImage's compressed kernel lies.

/// The fields of a bzImage's setup header that locate its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetupHeader {
    /// Boot protocol version, e.g. 0x020f.
    pub protocol: u16,
    /// File offset of the protected-mode code (the decompressor): (setup_sects + 1) * 512.
    pub protected_mode_offset: u64,
    /// File offset and length of the compressed kernel, when the protocol (2.08+) gives them;
    /// the length includes the 4-byte unpacked size Linux appends.
    pub payload: Option<(u64, u64)>,
}

/// "HdrS" at 0x202 and the 0xaa55 boot flag at 0x1fe mark a bzImage (or zImage).
pub fn is_bzimage(data: &[u8]) -> bool {
    data.get(0x202..0x206) == Some(b"HdrS") && data.get(0x1fe..0x200) == Some(&[0x55, 0xaa])
}

fn u16_at(data: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([data[at], data[at + 1]])
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"))
}

/// The setup header of a file that `is_bzimage` accepted, or None when the header itself
/// is cut (the file ends before 0x250).
pub fn setup_header(data: &[u8]) -> Option<SetupHeader> {
    if data.len() < 0x250 {
        return None;
    }
    let protocol = u16_at(data, 0x206);
    // setup_sects 0 means 4, for the oldest boot sectors.
    let setup_sects = match data[0x1f1] {
        0 => 4,
        n => u64::from(n),
    };
    let protected_mode_offset = (setup_sects + 1) * 512;
    let payload = (protocol >= 0x0208).then(|| {
        (
            protected_mode_offset + u64::from(u32_at(data, 0x248)),
            u64::from(u32_at(data, 0x24c)),
        )
    });
    Some(SetupHeader {
        protocol,
        protected_mode_offset,
        payload,
    })
}
