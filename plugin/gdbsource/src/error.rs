//! The one error type of the crate: every failure names the stub's address and what went
//! wrong, since the peer may be anything (a wrong socket, a QEMU that exited).

use std::io;

/// What went wrong talking to a gdbstub at `addr`.
#[derive(Debug, thiserror::Error)]
pub enum GdbError {
    #[error("{addr}: not an address: give unix:PATH or HOST:PORT")]
    BadAddress { addr: String },
    #[error("{addr}: cannot connect: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("{addr}: not a gdbstub: {detail}")]
    NotGdbstub { addr: String, detail: String },
    #[error("{addr}: no answer to `{request}` within {ms} ms")]
    Timeout {
        addr: String,
        request: String,
        ms: u64,
    },
    #[error("{addr}: the connection closed during `{request}` (did QEMU exit?)")]
    Closed { addr: String, request: String },
    #[error("{addr}: {request}: {source}")]
    Io {
        addr: String,
        request: String,
        source: io::Error,
    },
    #[error("{addr}: packet longer than {limit} bytes in reply to `{request}`")]
    TooLarge {
        addr: String,
        request: String,
        limit: usize,
    },
    #[error("{addr}: malformed reply to `{request}`: {detail}")]
    Malformed {
        addr: String,
        request: String,
        detail: String,
    },
    #[error("{addr}: `{request}` failed: the stub answered {reply}")]
    Refused {
        addr: String,
        request: String,
        reply: String,
    },
    #[error(
        "{addr}: unsupported guest architecture `{arch}` (i386, x86_64, riscv64 and aarch64 are)"
    )]
    UnsupportedArch { addr: String, arch: String },
}
