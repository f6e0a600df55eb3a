//! Where the stub listens: `unix:PATH` or `HOST:PORT` (QEMU's `-gdb unix:PATH,server=on`
//! or `-gdb tcp::PORT`).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::GdbError;

/// A connected byte stream to the stub.
#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    /// Connects to `addr` (`unix:PATH` or `HOST:PORT`), waiting at most `timeout`.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self, GdbError> {
        let err = |source| GdbError::Connect {
            addr: addr.to_string(),
            source,
        };
        if let Some(path) = addr.strip_prefix("unix:") {
            return UnixStream::connect(path).map(Stream::Unix).map_err(err);
        }
        let bad = || GdbError::BadAddress {
            addr: addr.to_string(),
        };
        let tcp = addr.strip_prefix("tcp:").unwrap_or(addr);
        if !tcp.contains(':') {
            return Err(bad());
        }
        // `:1234` as QEMU writes it means the local host.
        let tcp = match tcp.strip_prefix(':') {
            Some(port) => format!("localhost:{port}"),
            None => tcp.to_string(),
        };
        let mut last = None;
        for sa in tcp.to_socket_addrs().map_err(|_| bad())? {
            match TcpStream::connect_timeout(&sa, timeout) {
                Ok(s) => {
                    // Small request/reply packets: no Nagle delay.
                    let _ = s.set_nodelay(true);
                    return Ok(Stream::Tcp(s));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(err(last.unwrap_or_else(|| io::ErrorKind::NotFound.into())))
    }

    pub fn set_read_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(Some(t)),
            Stream::Tcp(s) => s.set_read_timeout(Some(t)),
        }
    }

    pub fn set_write_timeout(&self, t: Duration) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(Some(t)),
            Stream::Tcp(s) => s.set_write_timeout(Some(t)),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}
