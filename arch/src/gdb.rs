//! What a stack needs from QEMU's gdbstub `g` reply, whose layout each architecture's folder
//! gives (`Guest::gdb_core_regs`), from QEMU's target descriptions (gdb-xml/) and checked
//! against QEMU 10.0.2's replies.

/// The registers a stack needs, from one vCPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// riscv `ra`, aarch64 `x30`.
    pub ra: Option<u64>,
    /// x86 `cs`, aarch64 `cpsr` (riscv's `priv` is not in `g`).
    pub privilege: Option<u64>,
    /// riscv `satp`, aarch64 `TTBR0_EL1` (read with `p`). x86 `cr3` is not read yet:
    /// QEMU 10's x86_64 `g` reply holds zeros where its description puts the control
    /// registers.
    pub page_table_base: Option<u64>,
}

/// A little-endian value of `len` bytes at `at`, if the reply holds it.
pub(crate) fn le(g: &[u8], at: usize, len: usize) -> Option<u64> {
    let b = g.get(at..at + len)?;
    let mut w = [0u8; 8];
    w[..len].copy_from_slice(b);
    Some(u64::from_le_bytes(w))
}
