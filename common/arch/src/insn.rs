//! One decoded instruction, as far as frame records and the flow of control go: what each
//! architecture's decoder (`riscv64::insn`, `aarch64::insn`) makes of code bytes, for
//! prologue analysis and return-address checks (kern-profile-unwind's `code`).

use std::ops::BitOr;

/// What an instruction does to the frame record, as a set of flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Effects(u8);

impl Effects {
    pub const NONE: Effects = Effects(0);
    /// Sets the frame pointer from the stack pointer: the record is made.
    pub const SETS_FP: Effects = Effects(1);
    /// Stores the frame pointer on the stack.
    pub const SAVES_FP: Effects = Effects(2);
    /// Reloads the frame pointer from the stack: the record is taken down.
    pub const RESTORES_FP: Effects = Effects(4);
    /// Stores the return-address register on the stack.
    pub const SAVES_RA: Effects = Effects(8);
    /// Reloads the return-address register from the stack.
    pub const RESTORES_RA: Effects = Effects(16);

    pub fn contains(self, other: Effects) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
}

impl BitOr for Effects {
    type Output = Effects;
    fn bitor(self, rhs: Effects) -> Effects {
        Effects(self.0 | rhs.0)
    }
}

/// How an instruction passes control on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// To the next instruction.
    Next,
    /// A call (it writes the return-address register), to the target when the code tells it.
    Call(Option<u64>),
    /// A return through the return-address register.
    Return,
    /// A jump, conditional or not, to the target when the code tells it.
    Jump(Option<u64>),
    /// A trap or an exception return (`ecall`, `mret`, `svc`, `eret`, ...).
    Trap,
}

/// One decoded instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub addr: u64,
    pub len: u8,
    pub effects: Effects,
    pub flow: Flow,
}

impl Insn {
    /// The address after it.
    pub fn end(&self) -> u64 {
        self.addr + self.len as u64
    }
}
