//! The remote-protocol client: one request, one reply, each within a deadline and a size
//! bound, whatever the peer sends.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use crate::packet::{self, DecodeError};
use crate::stream::Stream;
use crate::GdbError;

/// Bounds on what a peer can cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The longest wait for one reply.
    pub reply_timeout: Duration,
    /// The longest wait for the first reply: a socket that is no gdbstub stays silent.
    pub hello_timeout: Duration,
    /// The most bytes one packet may carry, framed or decoded.
    pub max_packet: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            reply_timeout: Duration::from_secs(5),
            hello_timeout: Duration::from_secs(3),
            max_packet: 1 << 20,
        }
    }
}

/// A thread (QEMU: a vCPU) as the stub names it, `pPID.TID` or `TID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadId {
    /// The id as sent, for `Hg`.
    pub raw: String,
    pub pid: Option<u64>,
    pub tid: u64,
}

impl ThreadId {
    /// The same thread, however its ids were spelled (`p01.01`, `p1.1`).
    pub fn same(&self, other: &ThreadId) -> bool {
        self.tid == other.tid
            && (self.pid.is_none() || other.pid.is_none() || self.pid == other.pid)
    }

    fn parse(s: &[u8]) -> Option<Self> {
        let raw = std::str::from_utf8(s).ok()?.to_string();
        let (pid, tid) = match s.strip_prefix(b"p") {
            Some(rest) => {
                let dot = rest.iter().position(|&b| b == b'.')?;
                let pid = packet::parse_hex_u64(&rest[..dot])?;
                (Some(pid), packet::parse_hex_u64(&rest[dot + 1..])?)
            }
            None => (None, packet::parse_hex_u64(s)?),
        };
        Some(ThreadId { raw, pid, tid })
    }
}

/// The thread a stop reply names (`thread:ID;`).
pub(crate) fn stop_thread(reply: &[u8]) -> Option<ThreadId> {
    let at = reply.windows(7).position(|w| w == b"thread:")? + 7;
    let rest = &reply[at..];
    let end = rest.iter().position(|&b| b == b';').unwrap_or(rest.len());
    ThreadId::parse(&rest[..end])
}

/// `T` or `S` and a signal number in hex.
fn is_stop_reply(b: &[u8]) -> bool {
    matches!(b, [b'T' | b'S', h, l, ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit())
}

/// The most threads a stub may list: far more vCPUs than QEMU runs.
const MAX_THREADS: usize = 4096;

/// A connection to a gdbstub.
#[derive(Debug)]
pub struct Client {
    stream: Stream,
    addr: String,
    limits: Limits,
    /// Bytes received and not yet consumed.
    buf: Vec<u8>,
    /// Acknowledgements still on (the stub did not take `QStartNoAckMode`).
    acks: bool,
    /// No valid packet yet: garbage means the peer is no gdbstub.
    hello: bool,
    /// The stub's `PacketSize`.
    packet_size: usize,
    /// The last packet sent, for a retransmission request (`-`).
    last: Vec<u8>,
    /// Packets sent.
    requests: u32,
    /// The thread `g`, `p` and `m` read, when known: set by `Hg`, and by a stop (QEMU
    /// selects the thread its stop reply names).
    selected: Option<ThreadId>,
}

impl Client {
    /// Connects to `addr` (`unix:PATH` or `HOST:PORT`) and sets up the session: features,
    /// no acknowledgements where the stub takes them. QEMU stops the guest on connection.
    pub fn connect(addr: &str, limits: Limits) -> Result<Self, GdbError> {
        let stream = Stream::connect(addr, limits.hello_timeout)?;
        let mut c = Client::over(stream, addr, limits);
        c.handshake()?;
        Ok(c)
    }

    /// A client over an already connected stream (tests: a fake stub), before the handshake.
    pub fn over(stream: Stream, addr: &str, limits: Limits) -> Self {
        Client {
            stream,
            addr: addr.to_string(),
            limits,
            buf: Vec::new(),
            acks: true,
            hello: true,
            packet_size: 4096,
            last: Vec::new(),
            requests: 0,
            selected: None,
        }
    }

    /// The address connected to, for messages.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Whether acknowledgements are still exchanged.
    pub fn acks(&self) -> bool {
        self.acks
    }

    /// Packets sent so far.
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// The stub's maximum packet size.
    pub fn packet_size(&self) -> usize {
        self.packet_size
    }

    /// `qSupported` (claiming multiprocess: QEMU keeps that mode from an earlier client, and
    /// then wants `D;PID`), then `QStartNoAckMode`.
    pub fn handshake(&mut self) -> Result<(), GdbError> {
        let req = "qSupported:multiprocess+;xmlRegisters=i386";
        let mut features = self.request(req)?;
        // QEMU 7.2 sends a stop reply (`T02thread:01;`) of its own when a client connects,
        // ahead of the answer.
        if is_stop_reply(&features) {
            features = self.recv(req)?;
        }
        for f in features.split(|&b| b == b';') {
            if let Some(v) = f.strip_prefix(b"PacketSize=") {
                if let Some(n) = packet::parse_hex_u64(v) {
                    // Room for the framing, within our own bound.
                    self.packet_size = (n as usize).clamp(64, self.limits.max_packet);
                }
            }
        }
        // Empty: not supported (QEMU 10.0.2 answers so); acknowledgements stay.
        if self.request("QStartNoAckMode")? == b"OK" {
            self.acks = false;
        }
        Ok(())
    }

    /// Sends `body` and returns the reply's body (decoded).
    pub fn request(&mut self, body: &str) -> Result<Vec<u8>, GdbError> {
        self.send(body)?;
        self.recv(body)
    }

    /// Sends a packet that has no reply of its own (`c`).
    pub fn send(&mut self, body: &str) -> Result<(), GdbError> {
        let framed = packet::encode(body.as_bytes());
        self.write_all(&framed, body)?;
        self.last = framed;
        self.requests += 1;
        Ok(())
    }

    /// Stops a running guest (a 0x03 byte) and returns the stop reply.
    pub fn interrupt(&mut self) -> Result<Vec<u8>, GdbError> {
        Ok(self.interrupt_with(&[])?.0)
    }

    /// Stops a running guest and sends `reqs` in the same write: the stop reply, then each
    /// request's reply, in one round trip. QEMU's stub stops every vCPU (`vm_stop`, which
    /// returns once they are stopped) at the 0x03 byte, before it reads the packets after it.
    pub fn interrupt_with(&mut self, reqs: &[String]) -> Result<(Vec<u8>, Vec<Vec<u8>>), GdbError> {
        self.selected = None;
        let mut bytes = vec![0x03];
        let chosen = self.frame_all(reqs, &mut bytes);
        self.write_all(&bytes, "interrupt")?;
        let reply = self.recv("interrupt")?;
        let stop = self.stop_reply(reply, "interrupt")?;
        self.selected = chosen.or_else(|| stop_thread(&stop));
        let replies = self.recv_all(reqs)?;
        Ok((stop, replies))
    }

    /// Sends every request in one write and returns their replies in order: one round trip
    /// for all (the stub answers packets in the order it reads them). The socket is
    /// reliable: a retransmission request (`-`) resends only the last.
    pub fn pipeline(&mut self, reqs: &[String]) -> Result<Vec<Vec<u8>>, GdbError> {
        let mut bytes = Vec::new();
        if let Some(t) = self.frame_all(reqs, &mut bytes) {
            self.selected = Some(t);
        }
        let what = reqs.first().map_or("", String::as_str);
        self.write_all(&bytes, what)?;
        self.recv_all(reqs)
    }

    /// Frames `reqs` into `bytes`; the thread the last `Hg` among them selects.
    fn frame_all(&mut self, reqs: &[String], bytes: &mut Vec<u8>) -> Option<ThreadId> {
        let mut chosen = None;
        for r in reqs {
            let framed = packet::encode(r.as_bytes());
            bytes.extend_from_slice(&framed);
            self.last = framed;
            self.requests += 1;
            if let Some(t) = r.strip_prefix("Hg") {
                chosen = ThreadId::parse(t.as_bytes());
            }
        }
        chosen
    }

    fn recv_all(&mut self, reqs: &[String]) -> Result<Vec<Vec<u8>>, GdbError> {
        reqs.iter().map(|r| self.recv(r)).collect()
    }

    /// The thread `g`, `p` and `m` read now, when known.
    pub fn selected(&self) -> Option<&ThreadId> {
        self.selected.as_ref()
    }

    /// The reason the guest is stopped (`?`): `T..` or `S..`.
    pub fn halt_reason(&mut self) -> Result<Vec<u8>, GdbError> {
        let reply = self.request("?")?;
        let stop = self.stop_reply(reply, "?")?;
        self.selected = stop_thread(&stop);
        Ok(stop)
    }

    fn stop_reply(&self, reply: Vec<u8>, request: &str) -> Result<Vec<u8>, GdbError> {
        match reply.first() {
            Some(b'T' | b'S') => Ok(reply),
            _ => Err(self.malformed(request, &reply, "not a stop reply")),
        }
    }

    /// The threads (vCPUs): `qfThreadInfo`, then `qsThreadInfo` until `l`.
    pub fn threads(&mut self) -> Result<Vec<ThreadId>, GdbError> {
        let mut out = Vec::new();
        let mut req = "qfThreadInfo";
        loop {
            let reply = self.request(req)?;
            match reply.split_first() {
                Some((b'l', _)) => break,
                Some((b'm', list)) => {
                    for id in list.split(|&b| b == b',') {
                        let t = ThreadId::parse(id)
                            .ok_or_else(|| self.malformed(req, &reply, "bad thread id"))?;
                        out.push(t);
                    }
                }
                _ => return Err(self.refused_or_malformed(req, &reply)),
            }
            if out.len() > MAX_THREADS {
                return Err(self.malformed(req, &reply, "more than 4096 threads"));
            }
            req = "qsThreadInfo";
        }
        if out.is_empty() {
            return Err(self.malformed("qfThreadInfo", b"l", "no threads"));
        }
        Ok(out)
    }

    /// Makes `t` the thread that `g`, `p` and `m` read (nothing to send when it already is).
    pub fn select(&mut self, t: &ThreadId) -> Result<(), GdbError> {
        if self.selected.as_ref().is_some_and(|s| s.same(t)) {
            return Ok(());
        }
        let req = format!("Hg{}", t.raw);
        let reply = self.request(&req)?;
        self.selected = None;
        self.expect_ok(&req, &reply)?;
        self.selected = Some(t.clone());
        Ok(())
    }

    /// The reply to `Hg`: `OK`.
    pub fn select_reply(&self, t: &ThreadId, reply: &[u8]) -> Result<(), GdbError> {
        self.expect_ok(&format!("Hg{}", t.raw), reply)
    }

    /// The selected thread's `g` registers, as raw target-order bytes.
    pub fn registers(&mut self) -> Result<Vec<u8>, GdbError> {
        self.hex_request("g")
    }

    /// One register by number (`p`); `None` when the stub has no such register.
    pub fn register(&mut self, n: u32) -> Result<Option<Vec<u8>>, GdbError> {
        let req = format!("p{n:x}");
        let reply = self.request(&req)?;
        self.register_reply(&req, &reply)
    }

    /// The reply to `p`: `None` when the stub has no such register.
    pub fn register_reply(&self, req: &str, reply: &[u8]) -> Result<Option<Vec<u8>>, GdbError> {
        if reply.is_empty() || reply.first() == Some(&b'E') {
            return Ok(None);
        }
        packet::from_hex(reply)
            .map(Some)
            .ok_or_else(|| self.malformed(req, reply, "not hex"))
    }

    /// The most bytes one `m` asks for: its hex reply must fit the stub's packet size.
    pub fn max_read(&self) -> usize {
        (self.packet_size.saturating_sub(16) / 2).max(16)
    }

    /// The `m` requests that read `len` bytes at `addr`: as few as the packet size allows.
    pub fn memory_requests(&self, addr: u64, len: usize) -> Vec<String> {
        let step = self.max_read();
        (0..len)
            .step_by(step)
            .map(|off| {
                let n = (len - off).min(step);
                format!("m{:x},{n:x}", addr.wrapping_add(off as u64))
            })
            .collect()
    }

    /// Reads `len` bytes of guest virtual memory at `addr` through the selected vCPU, its
    /// `m` requests in one round trip. An `E` reply is [`GdbError::Refused`].
    pub fn read_memory(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, GdbError> {
        let reqs = self.memory_requests(addr, len);
        let replies = self.pipeline(&reqs)?;
        let mut out = Vec::with_capacity(len);
        for (req, reply) in reqs.iter().zip(&replies) {
            let (_, asked, bytes) = self.memory_reply(req, reply)?;
            out.extend_from_slice(&bytes);
            // A short reply (the stub's buffer) ends the bytes that follow on.
            if bytes.len() != asked {
                break;
            }
        }
        Ok(out)
    }

    /// An `m` request's reply: the address and length asked, and the bytes (an `E` is
    /// [`GdbError::Refused`]).
    pub fn memory_reply(&self, req: &str, reply: &[u8]) -> Result<(u64, usize, Vec<u8>), GdbError> {
        let bytes = self.hex_reply(req, reply)?;
        let (addr, asked) = req
            .strip_prefix('m')
            .and_then(|r| r.split_once(','))
            .and_then(|(a, n)| {
                Some((
                    u64::from_str_radix(a, 16).ok()?,
                    usize::from_str_radix(n, 16).ok()?,
                ))
            })
            .ok_or_else(|| self.malformed(req, b"", "not an m request"))?;
        if bytes.is_empty() || bytes.len() > asked {
            return Err(self.malformed(req, &bytes, "wrong length"));
        }
        Ok((addr, asked, bytes))
    }

    /// Resumes the guest (`c`); its stop reply comes with the next [`Client::interrupt`].
    pub fn resume(&mut self) -> Result<(), GdbError> {
        self.selected = None;
        self.send("c")?;
        if self.acks {
            // The stub acknowledges `c` at once; its reply comes at the next stop.
            self.wait_ack("c")?;
        }
        Ok(())
    }

    /// Detaches (`D`, `D;PID` in multiprocess mode): QEMU resumes the guest.
    pub fn detach(&mut self, pid: Option<u64>) -> Result<(), GdbError> {
        let req = match pid {
            Some(p) => format!("D;{p:x}"),
            None => "D".to_string(),
        };
        let reply = self.request(&req)?;
        self.expect_ok(&req, &reply)
    }

    fn hex_request(&mut self, req: &str) -> Result<Vec<u8>, GdbError> {
        let reply = self.request(req)?;
        self.hex_reply(req, &reply)
    }

    /// A reply of hex bytes (`g`, `m`): `E..` or nothing is [`GdbError::Refused`].
    pub fn hex_reply(&self, req: &str, reply: &[u8]) -> Result<Vec<u8>, GdbError> {
        if reply.first() == Some(&b'E') || reply.is_empty() {
            return Err(self.refused_or_malformed(req, reply));
        }
        packet::from_hex(reply).ok_or_else(|| self.malformed(req, reply, "not hex"))
    }

    fn expect_ok(&self, req: &str, reply: &[u8]) -> Result<(), GdbError> {
        match reply {
            b"OK" => Ok(()),
            _ => Err(self.refused_or_malformed(req, reply)),
        }
    }

    fn refused_or_malformed(&self, req: &str, reply: &[u8]) -> GdbError {
        if reply.is_empty() || reply.first() == Some(&b'E') {
            let reply = match reply {
                [] => "nothing (not supported)".to_string(),
                r => String::from_utf8_lossy(&r[..r.len().min(16)]).into_owned(),
            };
            return GdbError::Refused {
                addr: self.addr.clone(),
                request: req.to_string(),
                reply,
            };
        }
        self.malformed(req, reply, "unexpected reply")
    }

    fn malformed(&self, req: &str, reply: &[u8], what: &str) -> GdbError {
        let shown = String::from_utf8_lossy(&reply[..reply.len().min(32)]).into_owned();
        GdbError::Malformed {
            addr: self.addr.clone(),
            request: req.to_string(),
            detail: format!("{what}: {shown:?}"),
        }
    }

    fn write_all(&mut self, bytes: &[u8], request: &str) -> Result<(), GdbError> {
        let _ = self.stream.set_write_timeout(self.limits.reply_timeout);
        self.stream
            .write_all(bytes)
            .map_err(|e| self.io_error(e, request))
    }

    fn io_error(&self, e: std::io::Error, request: &str) -> GdbError {
        match e.kind() {
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::UnexpectedEof => {
                GdbError::Closed {
                    addr: self.addr.clone(),
                    request: request.to_string(),
                }
            }
            _ => GdbError::Io {
                addr: self.addr.clone(),
                request: request.to_string(),
                source: e,
            },
        }
    }

    /// Waits for the `+` of the packet just sent.
    fn wait_ack(&mut self, request: &str) -> Result<(), GdbError> {
        let deadline = Instant::now() + self.timeout();
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'+') {
                self.buf.drain(..=pos);
                return Ok(());
            }
            self.fill(deadline, request)?;
        }
    }

    fn timeout(&self) -> Duration {
        match self.hello {
            true => self.limits.hello_timeout,
            false => self.limits.reply_timeout,
        }
    }

    /// Receives one packet: its decoded body. Skips acknowledgements, answers `-` with the
    /// last packet again; garbage is an error (before any packet: not a gdbstub).
    pub fn recv(&mut self, request: &str) -> Result<Vec<u8>, GdbError> {
        let deadline = Instant::now() + self.timeout();
        loop {
            match self.take_packet(request)? {
                Some(body) => {
                    self.hello = false;
                    return Ok(body);
                }
                None => self.fill(deadline, request)?,
            }
        }
    }

    /// One packet from the buffer, if a whole one is there.
    fn take_packet(&mut self, request: &str) -> Result<Option<Vec<u8>>, GdbError> {
        loop {
            match self.buf.first() {
                None => return Ok(None),
                Some(b'+') => {
                    let n = self.buf.iter().take_while(|&&b| b == b'+').count();
                    self.buf.drain(..n);
                }
                Some(b'-') => {
                    self.buf.remove(0);
                    let last = std::mem::take(&mut self.last);
                    self.write_all(&last, request)?;
                    self.last = last;
                }
                Some(b'$') => break,
                Some(_) => return Err(self.garbage(request)),
            }
        }
        let limit = self.limits.max_packet;
        let Some(hash) = self.buf.iter().position(|&b| b == b'#') else {
            if self.buf.len() > limit + 1 {
                return Err(self.too_large(request));
            }
            return Ok(None);
        };
        if hash > limit + 1 {
            return Err(self.too_large(request));
        }
        if self.buf.len() < hash + 3 {
            return Ok(None);
        }
        let raw = &self.buf[1..hash];
        let sum = packet::parse_hex_u64(&self.buf[hash + 1..hash + 3]);
        let ok = sum == Some(packet::checksum(raw) as u64);
        let decoded = packet::decode(raw, limit);
        self.buf.drain(..hash + 3);
        if !ok {
            if self.hello {
                return Err(self.garbage(request));
            }
            if self.acks {
                // Ask again: the stub sends the packet once more.
                self.write_all(b"-", request)?;
                return Ok(None);
            }
            return Err(self.malformed(request, b"", "bad checksum"));
        }
        if self.acks {
            // A lost acknowledgement shows at the next request; the reply is here.
            let _ = self.stream.write_all(b"+");
        }
        match decoded {
            Ok(body) => Ok(Some(body)),
            Err(DecodeError::TooLong) => Err(self.too_large(request)),
            Err(e) => Err(self.malformed(request, b"", &format!("{e:?}"))),
        }
    }

    fn garbage(&self, request: &str) -> GdbError {
        let shown = String::from_utf8_lossy(&self.buf[..self.buf.len().min(24)]).into_owned();
        if self.hello {
            return GdbError::NotGdbstub {
                addr: self.addr.clone(),
                detail: format!("it answered {shown:?} to `{request}`"),
            };
        }
        self.malformed(request, shown.as_bytes(), "bytes outside a packet")
    }

    fn too_large(&self, request: &str) -> GdbError {
        GdbError::TooLarge {
            addr: self.addr.clone(),
            request: request.to_string(),
            limit: self.limits.max_packet,
        }
    }

    /// Reads more bytes, until `deadline`.
    fn fill(&mut self, deadline: Instant, request: &str) -> Result<(), GdbError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timed_out(request));
        }
        let _ = self.stream.set_read_timeout(left);
        let mut chunk = [0u8; 16 << 10];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(match self.hello {
                true => GdbError::NotGdbstub {
                    addr: self.addr.clone(),
                    detail: format!("it closed the connection at `{request}`"),
                },
                false => GdbError::Closed {
                    addr: self.addr.clone(),
                    request: request.to_string(),
                },
            }),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                match Instant::now() >= deadline {
                    true => Err(self.timed_out(request)),
                    false => Ok(()),
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(self.io_error(e, request)),
        }
    }

    fn timed_out(&self, request: &str) -> GdbError {
        let ms = self.timeout().as_millis() as u64;
        if self.hello {
            return GdbError::NotGdbstub {
                addr: self.addr.clone(),
                detail: format!(
                    "no reply to `{request}` within {ms} ms (or another debugger holds the stub)"
                ),
            };
        }
        GdbError::Timeout {
            addr: self.addr.clone(),
            request: request.to_string(),
            ms,
        }
    }
}
