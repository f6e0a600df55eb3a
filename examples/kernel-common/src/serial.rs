//! 16550 UARTs, shared by the x86 example kernels (port I/O is the same on i386 and x86_64): COM1 (0x3F8) carries progress text, COM2 (0x2F8) the i386
//! kernel's binary memtrace (the x86_64 kernel has no COM2).
//! No core::fmt on the normal paths: Debian's precompiled i686 `core` has no frame pointers, and
//! these small printers keep the instruction counts of the run easy to reason about (the same
//! in both kernels).

use core::arch::asm;

pub const COM1: u16 = 0x3F8;
/// Only the i386 kernel writes to COM2.
pub const COM2: u16 = 0x2F8;

#[inline(always)]
pub fn outb(port: u16, val: u8) {
    unsafe { asm!("out dx, al", in("dx") port, in("al") val, options(nomem, nostack, preserves_flags)) }
}

#[inline(always)]
pub fn inb(port: u16) -> u8 {
    let v: u8;
    unsafe { asm!("in al, dx", out("al") v, in("dx") port, options(nomem, nostack, preserves_flags)) }
    v
}

/// 115200 8N1, FIFOs on, interrupts off. Harmless when QEMU has no device at `port`
/// (writes are dropped, reads give 0xFF).
#[inline]
pub fn init(port: u16) {
    outb(port + 1, 0x00); // IER: no interrupts
    outb(port + 3, 0x80); // LCR: DLAB
    outb(port, 0x01); // divisor 1 = 115200 baud
    outb(port + 1, 0x00);
    outb(port + 3, 0x03); // 8N1
    outb(port + 2, 0xC7); // FIFO on, cleared
    outb(port + 4, 0x03); // DTR, RTS
}

/// Waits for the transmitter (bounded: an absent or stuck UART must not hang the kernel;
/// QEMU's UART is ready at once, an absent one reads 0xFF which has THRE set), then sends.
#[inline(always)]
pub fn write_byte(port: u16, b: u8) {
    let mut spins = 0u32;
    while inb(port + 5) & 0x20 == 0 && spins < 100_000 {
        spins += 1;
    }
    outb(port, b);
}

/// Sends `data` in bursts: once THRE says the transmit FIFO is empty, 16 bytes fit in it
/// (FIFOs are on), so the status is read once per 16 bytes instead of once per byte.
#[inline]
pub fn write_burst(port: u16, data: &[u8]) {
    for chunk in data.chunks(16) {
        let mut spins = 0u32;
        while inb(port + 5) & 0x20 == 0 && spins < 100_000 {
            spins += 1;
        }
        for &b in chunk {
            outb(port, b);
        }
    }
}

/// COM1 text output.
pub struct Com1;

impl Com1 {
    #[inline]
    pub fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            if b == b'\n' {
                write_byte(COM1, b'\r');
            }
            write_byte(COM1, b);
        }
    }

    #[inline]
    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    #[inline]
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

    #[inline]
    pub fn hex(&mut self, v: u64) {
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

impl core::fmt::Write for Com1 {
    #[inline]
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.str(s);
        Ok(())
    }
}

impl crate::alloc_phase::Console for Com1 {
    #[inline]
    fn str(&mut self, s: &str) {
        Com1::str(self, s)
    }

    #[inline]
    fn dec(&mut self, v: u64) {
        Com1::dec(self, v)
    }
}
