//! Text on the board's UART (arch::putc); the printers are kernel_common::console's, as on
//! the x86 kernels' COM1.

pub struct Console;

impl kernel_common::console::Console for Console {
    fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            if b == b'\n' {
                crate::arch::putc(b'\r');
            }
            crate::arch::putc(b);
        }
    }
}
