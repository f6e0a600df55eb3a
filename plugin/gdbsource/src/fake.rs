//! A fake gdbstub for the tests: a thread serving one connection on a temporary Unix socket,
//! answering like QEMU from a vCPU's registers and a memory map, or sending scripted bytes.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use crate::packet;

/// How the fake behaves.
#[derive(Clone, Default)]
pub struct Stub {
    pub architecture: &'static str,
    /// Each vCPU's `g` bytes.
    pub regs: Vec<Vec<u8>>,
    /// (address, bytes) mapped; reads elsewhere get `E14`.
    pub memory: Vec<(u64, Vec<u8>)>,
    pub no_ack: bool,
    /// Run-length encode `g` replies.
    pub rle: bool,
    /// Close the connection instead of answering this request (by prefix).
    pub close_at: Option<&'static str>,
    /// The largest `m` the stub serves.
    pub packet_size: usize,
    /// Send a stop reply on connection, as QEMU 7.2 does.
    pub hello_stop: bool,
    /// The vCPU (from 0) an interrupt's stop reply names and selects.
    pub interrupt_vcpu: usize,
    /// Registers outside `g`, read with `p`: each name with its value on each vCPU, listed
    /// in the target description from regnum [`EXTRA_REGNUM`] on.
    pub extra: Vec<(&'static str, Vec<u64>)>,
}

/// The first regnum of [`Stub::extra`].
pub const EXTRA_REGNUM: usize = 0x60;

/// What the fake saw: requests in order, and acknowledgements received.
#[derive(Debug, Default)]
pub struct Seen {
    pub requests: Vec<String>,
    pub acks: usize,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A fresh socket path.
pub fn socket_path() -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("kp-gdb-{}-{n}.sock", std::process::id()))
}

/// Serves raw `bytes` to the first connection, then keeps it open (or closes it with
/// `close`) until the client goes.
pub fn raw(bytes: &'static [u8], close: bool) -> (String, JoinHandle<()>) {
    let path = socket_path();
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(bytes);
        if !close {
            let mut sink = [0u8; 256];
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    (format!("unix:{}", path.display()), h)
}

/// Serves `stub` to the first connection, until `D` or the client goes.
pub fn serve(stub: Stub) -> (String, JoinHandle<Seen>) {
    let path = socket_path();
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        if stub.hello_stop {
            s.write_all(&packet::encode(b"T02thread:01;")).unwrap();
        }
        let mut seen = Seen::default();
        let mut acks = true;
        let mut cur = 0usize;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            // One packet from the client.
            let (body, rest) = loop {
                let n = buf.iter().take_while(|&&b| b == b'+').count();
                seen.acks += n;
                buf.drain(..n);
                // An interrupt (0x03) of the running guest: its stop reply.
                if buf.first() == Some(&0x03) {
                    buf.remove(0);
                    seen.requests.push("interrupt".into());
                    // QEMU selects the thread its stop reply names.
                    cur = stub.interrupt_vcpu;
                    let reply = format!("T02thread:p01.{:02x};", cur + 1);
                    s.write_all(&packet::encode(reply.as_bytes())).unwrap();
                    continue;
                }
                if let Some(h) = buf.iter().position(|&b| b == b'#') {
                    if buf.len() >= h + 3 {
                        let body = buf[1..h].to_vec();
                        break (body, buf[h + 3..].to_vec());
                    }
                }
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => return seen,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            buf = rest;
            let req = String::from_utf8(packet::decode(&body, 1 << 20).unwrap()).unwrap();
            seen.requests.push(req.clone());
            if stub.close_at.is_some_and(|p| req.starts_with(p)) {
                return seen;
            }
            if acks {
                s.write_all(b"+").unwrap();
            }
            // `c` has no reply until the next stop.
            if req == "c" {
                continue;
            }
            let reply = answer(&stub, &req, &mut cur);
            let framed = match (stub.rle, req.as_str()) {
                (true, "g") => rle_frame(&reply),
                _ => packet::encode(reply.as_bytes()),
            };
            s.write_all(&framed).unwrap();
            if req == "QStartNoAckMode" && stub.no_ack {
                acks = false;
            }
            if req.starts_with('D') {
                return seen;
            }
        }
    });
    (format!("unix:{}", path.display()), h)
}

/// A reply with runs of 4 to 97 equal bytes encoded as `x*n`.
fn rle_frame(body: &str) -> Vec<u8> {
    let b = body.as_bytes();
    let mut raw = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|&&x| x == b[i]).count().min(98);
        // Counts 6 and 7 would make `#` and `$`: the protocol forbids them.
        if run >= 4 && run - 1 != 6 && run - 1 != 7 {
            raw.extend_from_slice(&[b[i], b'*', (run - 1 + 29) as u8]);
            i += run;
        } else {
            raw.push(b[i]);
            i += 1;
        }
    }
    let mut out = vec![b'$'];
    out.extend_from_slice(&raw);
    out.push(b'#');
    out.extend_from_slice(&packet::hex_byte(packet::checksum(&raw)));
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn answer(stub: &Stub, req: &str, cur: &mut usize) -> String {
    let size = match stub.packet_size {
        0 => 4096,
        n => n,
    };
    if req.starts_with("qSupported") {
        let mut r = format!("PacketSize={size:x};qXfer:features:read+;multiprocess+");
        if stub.no_ack {
            r.push_str(";QStartNoAckMode+");
        }
        return r;
    }
    if req == "QStartNoAckMode" {
        return if stub.no_ack {
            "OK".into()
        } else {
            String::new()
        };
    }
    if req == "?" {
        return "T05thread:p01.01;".into();
    }
    if req == "qfThreadInfo" {
        let ids: Vec<String> = (1..=stub.regs.len()).map(|i| format!("p1.{i:x}")).collect();
        return format!("m{}", ids.join(","));
    }
    if req == "qsThreadInfo" {
        return "l".into();
    }
    if let Some(t) = req.strip_prefix("Hgp1.") {
        *cur = usize::from_str_radix(t, 16).unwrap() - 1;
        return "OK".into();
    }
    if req == "g" {
        return hex(&stub.regs[*cur]);
    }
    if let Some(n) = req.strip_prefix('p') {
        let n = usize::from_str_radix(n, 16).unwrap();
        return match n.checked_sub(EXTRA_REGNUM).and_then(|i| stub.extra.get(i)) {
            Some((_, values)) => hex(&values[*cur].to_le_bytes()),
            None => "E45".into(),
        };
    }
    if let Some(x) = req.strip_prefix("qXfer:features:read:target.xml:") {
        let regs: String = stub
            .extra
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                format!(
                    "<reg name=\"{name}\" bitsize=\"64\" regnum=\"{}\"/>",
                    EXTRA_REGNUM + i
                )
            })
            .collect();
        let xml = format!(
            "<target><architecture>{}</architecture><feature name=\"extra\">{regs}</feature></target>",
            stub.architecture
        );
        let off = usize::from_str_radix(x.split(',').next().unwrap(), 16).unwrap();
        return format!("l{}", &xml[off.min(xml.len())..]);
    }
    if let Some(m) = req.strip_prefix('m') {
        let (a, n) = m.split_once(',').unwrap();
        let a = u64::from_str_radix(a, 16).unwrap();
        let n = usize::from_str_radix(n, 16).unwrap().min(size / 2);
        for (base, bytes) in &stub.memory {
            if a >= *base && a + n as u64 <= base + bytes.len() as u64 {
                let o = (a - base) as usize;
                return hex(&bytes[o..o + n]);
            }
        }
        return "E14".into();
    }
    if req.starts_with("D;1") {
        return "OK".into();
    }
    String::new()
}
