//! Where the stub listens: `unix:PATH` or `HOST:PORT` (QEMU's `-gdb unix:PATH,server=on`
//! or `-gdb tcp::PORT`).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

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
            return connect_unix(Path::new(path), timeout)
                .map(Stream::Unix)
                .map_err(err);
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

/// Connects to the Unix socket at `path`, waiting at most `timeout` while it refuses: QEMU
/// creates the socket file when it binds and listens a moment later, so a client that saw
/// the file appear (`record --gdb`) can be refused in between (seen on a loaded machine). A
/// missing file, or a socket still refusing at the deadline, is the error as it is.
fn connect_unix(path: &Path, timeout: Duration) -> io::Result<UnixStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match UnixStream::connect(path) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            done => return done,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kp-stream-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_socket_that_listens_after_its_file_appears_is_connected() {
        let dir = temp_dir("late");
        let path = dir.join("gdb.sock");
        // A socket file nobody listens on: connecting is refused, as between QEMU's bind and
        // its listen.
        drop(UnixListener::bind(&path).unwrap());
        assert_eq!(
            UnixStream::connect(&path).unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused
        );
        let late = dir.join("late.sock");
        let (p, l) = (path.clone(), late.clone());
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let listener = UnixListener::bind(&l).unwrap();
            // Atomically in the refusing socket's place: no moment without a file.
            std::fs::rename(&l, &p).unwrap();
            listener.accept().unwrap();
        });
        let s = Stream::connect(&format!("unix:{}", path.display()), Duration::from_secs(5));
        assert!(s.is_ok(), "{s:?}");
        server.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_socket_that_keeps_refusing_is_an_error_at_the_deadline() {
        let dir = temp_dir("refusing");
        let path = dir.join("gdb.sock");
        drop(UnixListener::bind(&path).unwrap());
        let t = Instant::now();
        let e = Stream::connect(
            &format!("unix:{}", path.display()),
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(200));
        assert!(e.to_string().contains("cannot connect"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_socket_is_an_error_at_once() {
        let dir = temp_dir("missing");
        let t = Instant::now();
        let e = Stream::connect(
            &format!("unix:{}", dir.join("none.sock").display()),
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(e.to_string().contains("cannot connect"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
