//! The crate's one error type: every variant names the file, and the byte offset where one
//! applies, so that a user can look at the image with a hex editor.

use std::path::PathBuf;

use crate::{Arch, Compression};

/// What went wrong reading a kernel image, its kallsyms tables or its BTF.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {size} bytes, more than the {cap} byte cap (Options::max_payload)", path.display())]
    FileTooLarge { path: PathBuf, size: u64, cap: u64 },
    #[error("{}: truncated image at offset {offset:#x}: {what}", path.display())]
    Truncated {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error(
        "{}: not a kernel image: no ELF, bzImage, arm64/riscv64 Image or EFI zboot header, \
         and no compressed payload at offset {offset:#x} (magics tried: {tried})",
        path.display()
    )]
    UnknownCompression {
        path: PathBuf,
        offset: u64,
        tried: String,
    },
    #[error("{}: the {compression} payload at offset {offset:#x} does not decompress: {reason}", path.display())]
    Decompress {
        path: PathBuf,
        compression: Compression,
        offset: u64,
        reason: String,
    },
    #[error(
        "{}: the {compression} payload at offset {offset:#x} unpacks to (or asks for a \
         dictionary of) more than {cap} bytes (Options::max_payload; a larger kernel needs a \
         larger cap)",
        path.display()
    )]
    TooLarge {
        path: PathBuf,
        compression: Compression,
        offset: u64,
        cap: u64,
    },
    #[error("{}: the payload at offset {offset:#x} is {compression}, which this build cannot unpack: {why}", path.display())]
    Unsupported {
        path: PathBuf,
        compression: Compression,
        offset: u64,
        why: &'static str,
    },
    #[error(
        "{}: the payload at offset {offset:#x} unpacks ({compression}) to something other than \
         the kernel its container holds (a vmlinux ELF, or an arm64/riscv64 Image)",
        path.display()
    )]
    PayloadNotElf {
        path: PathBuf,
        compression: Compression,
        offset: u64,
    },
    #[error("{}: a kernel for {found}, not {expected}", path.display())]
    WrongArch {
        path: PathBuf,
        expected: Arch,
        found: String,
    },
    #[error("{}: no kallsyms tables found: {why}", path.display())]
    NoKallsyms { path: PathBuf, why: String },
    #[error("{}: the kallsyms table {table} at offset {offset:#x} is malformed: {why}", path.display())]
    BadKallsyms {
        path: PathBuf,
        table: &'static str,
        offset: u64,
        why: String,
    },
    #[error(
        "no BTF in {} ({why}; Debian's 686 kernels have none: give the -dbg package's vmlinux)",
        path.display()
    )]
    NoBtf { path: PathBuf, why: String },
    #[error("{}: the BTF at offset {offset:#x} is malformed: {why}", path.display())]
    BadBtf {
        path: PathBuf,
        offset: u64,
        why: String,
    },
    #[error("BTF of {} has no struct {name}", path.display())]
    NoBtfStruct { path: PathBuf, name: &'static str },
    #[error("BTF of {} has no {strukt} member {member}", path.display())]
    NoBtfMember {
        path: PathBuf,
        strukt: &'static str,
        member: &'static str,
    },
    /// A member the BTF describes otherwise than every Linux has it: read through, it would
    /// label samples with garbage, so it is refused.
    #[error("BTF of {}: {strukt}.{member} {why}", path.display())]
    BadBtfMember {
        path: PathBuf,
        strukt: &'static str,
        member: &'static str,
        why: String,
    },
    #[error("kallsyms of {} has no current_task or pcpu_hot", path.display())]
    NoCurrentTask { path: PathBuf },
}
