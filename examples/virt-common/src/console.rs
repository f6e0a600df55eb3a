//! Text on the board's UART (arch::putc): small printers, as the i386 kernel's Com1.

pub struct Console;

impl Console {
    pub fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            if b == b'\n' {
                crate::arch::putc(b'\r');
            }
            crate::arch::putc(b);
        }
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn dec(&mut self, mut v: u64) {
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

    pub fn hex(&mut self, v: u64) {
        let mut buf = [0u8; 18];
        let mut i = buf.len();
        let mut v = v;
        loop {
            i -= 1;
            let d = (v & 0xF) as u8;
            buf[i] = if d < 10 { b'0' + d } else { b'a' + d - 10 };
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        i -= 2;
        buf[i] = b'0';
        buf[i + 1] = b'x';
        self.bytes(&buf[i..]);
    }
}

impl core::fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.str(s);
        Ok(())
    }
}

impl kernel_common::alloc_phase::Console for Console {
    #[inline]
    fn str(&mut self, s: &str) {
        Console::str(self, s)
    }

    #[inline]
    fn dec(&mut self, v: u64) {
        Console::dec(self, v)
    }
}
