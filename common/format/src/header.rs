use crate::error::FormatError;
use crate::source::{u16_at, u32_at, u64_at};

/// The first bytes of every raw file.
pub const MAGIC: &[u8; 8] = b"KPROFRAW";
/// The raw format version the recorder writes (see [`Header::encode`]).
pub const VERSION: u16 = 1;
/// Version 2: samples also carry the CPU mode, the privilege level, the return-address
/// register and the page-table base (see FORMAT.md).
pub const VERSION_2: u16 = 2;
/// Version 3: version 2 plus the allocation-hook records (kinds 5, 7 and 8), written when
/// the plugin hooks allocators (`alloc=`). A reader of version 2 refuses such a file rather
/// than skip its allocation events unseen.
pub const VERSION_3: u16 = 3;
/// Version 4: version 3 plus the stack table (kinds 11 and 12, [`crate::stack_table`]),
/// written with the plugin's `stacks=on`. A reader of version 3 refuses such a file rather
/// than read it without its samples.
pub const VERSION_4: u16 = 4;
/// The newest version this crate reads; it reads every version from 1.
pub const MAX_VERSION: u16 = VERSION_4;
/// Header bytes before the QEMU version string.
pub const HEADER_FIXED_LEN: usize = 41;

/// Guest architecture of the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    I386,
    X86_64,
    /// Written only in format version 2 and later.
    Riscv64,
    /// Written only in format version 2 and later.
    Aarch64,
}

impl Arch {
    pub fn code(self) -> u8 {
        match self {
            Arch::I386 => 1,
            Arch::X86_64 => 2,
            Arch::Riscv64 => 3,
            Arch::Aarch64 => 4,
        }
    }

    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Arch::I386),
            2 => Some(Arch::X86_64),
            3 => Some(Arch::Riscv64),
            4 => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// Pointer width in bytes.
    pub fn ptr_width(self) -> u8 {
        match self {
            Arch::I386 => 4,
            Arch::X86_64 | Arch::Riscv64 | Arch::Aarch64 => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::I386 => "i386",
            Arch::X86_64 => "x86_64",
            Arch::Riscv64 => "riscv64",
            Arch::Aarch64 => "aarch64",
        }
    }
}

/// How samples are triggered: the plugin's `delay=`/`period=` setting, as the header
/// stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingMode {
    /// Every `n` microseconds of host time per vCPU (`delay=n`).
    DelayMicros(u64),
    /// Every `n` guest instructions per vCPU (`period=n`).
    PeriodInstructions(u64),
    /// No sampling: exact block counts only (`exact=only`).
    Off,
}

impl SamplingMode {
    /// The header's mode byte.
    pub fn code(self) -> u8 {
        match self {
            SamplingMode::DelayMicros(_) => 1,
            SamplingMode::PeriodInstructions(_) => 2,
            SamplingMode::Off => 0,
        }
    }

    /// Microseconds (`delay`) or instructions (`period`).
    pub fn value(self) -> u64 {
        match self {
            SamplingMode::DelayMicros(v) | SamplingMode::PeriodInstructions(v) => v,
            SamplingMode::Off => 0,
        }
    }

    pub fn from_code(code: u8, value: u64) -> Option<Self> {
        match code {
            1 => Some(SamplingMode::DelayMicros(value)),
            2 => Some(SamplingMode::PeriodInstructions(value)),
            0 => Some(SamplingMode::Off),
            _ => None,
        }
    }
}

/// The raw file header (see FORMAT.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub arch: Arch,
    pub sampling: SamplingMode,
    /// `exact=on`: exact block counts follow at exit.
    pub exact: bool,
    /// Frames may hold boundary markers ([`crate::frame_marker`]); files without this flag
    /// hold return addresses only, whatever their value.
    pub markers: bool,
    /// `delay=` samples were taken at the vCPU's next interrupt after each tick
    /// (`trigger=interrupt`), at the interrupted PC, rather than at its next block entry.
    pub at_interrupts: bool,
    /// Taken through QEMU's gdbstub (`record --attach`), not the plugin: the whole VM stopped
    /// for each look, every vCPU sampled at it.
    pub gdbstub: bool,
    pub vcpus: u32,
    pub max_depth: u32,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    pub qemu_version: String,
}

impl Header {
    pub fn ptr_width(&self) -> usize {
        self.arch.ptr_width() as usize
    }

    /// Appends the encoded header, format [`VERSION`], to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_version(VERSION, out);
    }

    /// Appends the header of a file of format `version` (1 to 4: the same layout) to `out`.
    pub fn encode_version(&self, version: u16, out: &mut Vec<u8>) {
        let format_version = version;
        let version = self.qemu_version.as_bytes();
        let vlen = version.len().min(255);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&format_version.to_le_bytes());
        out.extend_from_slice(&((HEADER_FIXED_LEN + vlen) as u16).to_le_bytes());
        out.push(self.arch.code());
        out.push(self.arch.ptr_width());
        out.push(self.sampling.code());
        out.push(
            self.exact as u8
                | (self.markers as u8) << 1
                | (self.at_interrupts as u8) << 2
                | (self.gdbstub as u8) << 3,
        );
        out.extend_from_slice(&self.sampling.value().to_le_bytes());
        out.extend_from_slice(&self.vcpus.to_le_bytes());
        out.extend_from_slice(&self.max_depth.to_le_bytes());
        out.extend_from_slice(&self.start_unix_ns.to_le_bytes());
        out.push(vlen as u8);
        out.extend_from_slice(&version[..vlen]);
    }

    /// Decodes a header from the first `b.len()` bytes of a file; returns it, its length and
    /// the file's format version. `b` must hold at least [`HEADER_FIXED_LEN`] bytes; the
    /// caller re-calls with more bytes when `Ok(None)` says the header is longer.
    pub(crate) fn decode(b: &[u8]) -> Result<Option<(Header, usize, u16)>, FormatError> {
        if b.len() < HEADER_FIXED_LEN {
            return Err(FormatError::ShortHeader(b.len()));
        }
        if &b[..8] != MAGIC {
            return Err(FormatError::BadMagic);
        }
        let version = u16_at(b, 8);
        if !(VERSION..=MAX_VERSION).contains(&version) {
            return Err(FormatError::UnsupportedVersion(version));
        }
        let len = u16_at(b, 10) as usize;
        let vlen = b[40] as usize;
        if len < HEADER_FIXED_LEN + vlen {
            return Err(FormatError::BadHeader(format!(
                "header length {len} is shorter than its fields ({})",
                HEADER_FIXED_LEN + vlen
            )));
        }
        if b.len() < len {
            return Ok(None);
        }
        let arch = Arch::from_code(b[12]).ok_or_else(|| {
            FormatError::BadHeader(format!("unknown architecture code {}", b[12]))
        })?;
        if b[13] != arch.ptr_width() {
            return Err(FormatError::BadHeader(format!(
                "pointer width {} does not fit architecture {}",
                b[13],
                arch.name()
            )));
        }
        let sampling = SamplingMode::from_code(b[14], u64_at(b, 16))
            .ok_or_else(|| FormatError::BadHeader(format!("unknown sampling mode {}", b[14])))?;
        let qemu_version =
            String::from_utf8_lossy(&b[HEADER_FIXED_LEN..HEADER_FIXED_LEN + vlen]).into_owned();
        Ok(Some((
            Header {
                arch,
                sampling,
                exact: b[15] & 1 != 0,
                markers: b[15] & 2 != 0,
                at_interrupts: b[15] & 4 != 0,
                gdbstub: b[15] & 8 != 0,
                vcpus: u32_at(b, 24),
                max_depth: u32_at(b, 28),
                start_unix_ns: u64_at(b, 32),
                qemu_version,
            },
            len,
            version,
        )))
    }
}
