//! Text output, the same on every example kernel's console (the x86 kernels' COM1, the virt
//! boards' UART): a console only sends bytes; the small printers here build on that. No
//! core::fmt on the normal paths: Debian's precompiled i686 `core` has no frame pointers, and
//! these printers keep the instruction counts of a run easy to reason about.

/// A text console: `bytes` sends (LF as CRLF), the rest is written once here.
pub trait Console {
    fn bytes(&mut self, s: &[u8]);

    #[inline]
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    #[inline]
    fn dec(&mut self, mut v: u64) {
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.bytes(&buf[i..]);
    }

    #[inline]
    fn hex(&mut self, v: u64) {
        let mut buf = [0u8; 18];
        buf[0] = b'0';
        buf[1] = b'x';
        let mut n = 16;
        while n > 1 && (v >> ((n - 1) * 4)) & 0xF == 0 {
            n -= 1;
        }
        for k in 0..n {
            let d = ((v >> ((n - 1 - k) * 4)) & 0xF) as u8;
            buf[2 + k] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
        }
        self.bytes(&buf[..2 + n]);
    }
}

/// `core::fmt` on a console: the panic handlers' message only.
pub struct Fmt<'a, C: Console>(pub &'a mut C);

impl<C: Console> core::fmt::Write for Fmt<'_, C> {
    #[inline]
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.str(s);
        Ok(())
    }
}

/// Every kernel's panic handler: the message and where, on `out` (then it exits).
#[inline]
pub fn panic_message<C: Console>(out: &mut C, info: &core::panic::PanicInfo) {
    use core::fmt::Write;
    // core::fmt only here: whether `core` has frame pointers does not matter on this path.
    let mut w = Fmt(out);
    let _ = write!(w, "\nPANIC: {}", info.message());
    if let Some(loc) = info.location() {
        let _ = write!(w, " at {}:{}", loc.file(), loc.line());
    }
    w.0.str("\n");
}
