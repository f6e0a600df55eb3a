//! 16550 UARTs, shared by the x86 example kernels (port I/O is the same on i386 and x86_64): COM1 (0x3F8) carries progress text, COM2 (0x2F8) the i386
//! kernel's binary memtrace (the x86_64 kernel has no COM2).

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

/// COM1 text output (the printers: crate::console).
pub struct Com1;

impl crate::console::Console for Com1 {
    #[inline]
    fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            if b == b'\n' {
                write_byte(COM1, b'\r');
            }
            write_byte(COM1, b);
        }
    }
}
