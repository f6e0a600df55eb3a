//! The 8259 PICs and the PIT (`irq=on`'s timer: IRQ 0).

use crate::serial::outb;

/// Masks every line of both 8259 PICs. Interrupts are off anyway, but a pending IRQ (the
/// PIT's, 18 Hz) still makes QEMU leave and re-enter translated code, which shows up as
/// noise in `-d exec` instruction logs (examples/common/measure-shares.py).
pub fn mask() {
    outb(0x21, 0xFF);
    outb(0xA1, 0xFF);
}

/// Remaps the PICs to vectors 0x20 and 0x28 and unmasks IRQ 0 only.
pub fn timer_only() {
    for (port, val) in [
        (0x20, 0x11), (0xA0, 0x11), // ICW1: init, ICW4 follows
        (0x21, 0x20), (0xA1, 0x28), // ICW2: vector offsets
        (0x21, 0x04), (0xA1, 0x02), // ICW3: cascade on IRQ 2
        (0x21, 0x01), (0xA1, 0x01), // ICW4: 8086 mode
        (0x21, 0xFE), (0xA1, 0xFF), // masks: IRQ 0 only
    ] {
        outb(port, val);
    }
}

/// PIT channel 0, lobyte/hibyte, mode 2 (rate generator): the input clock / `divisor`.
pub fn pit_start(divisor: u16) {
    outb(0x43, 0x34);
    outb(0x40, divisor as u8);
    outb(0x40, (divisor >> 8) as u8);
}
