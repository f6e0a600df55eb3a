//! Where the caller's return address is when a block starts at an instruction that runs
//! without a frame record of its own.
//!
//! The plugin samples at block entry and walks from the frame pointer it finds there. At three
//! kinds of instruction that frame pointer is still (or already again) the *caller's*, so the
//! walk would skip the caller; the caller's return address is on the stack instead:
//!
//! | first instruction of the block | stack at entry | caller's return address |
//! | --- | --- | --- |
//! | `push ebp` (function entry) | `[SP]` = return address | `SP + 0` |
//! | `mov ebp, esp` (after the push) | `[SP]` = saved FP, `[SP+W]` = return address | `SP + W` |
//! | `ret`, `ret imm16`, `rep ret` (after `pop ebp`) | `[SP]` = return address | `SP + 0` |
//!
//! Every other instruction of a function compiled with frame pointers runs with its own frame
//! record at FP, and a block never spans a call or a return, so classifying a block's first
//! instruction is enough for every instruction in it.

use crate::PtrWidth;

/// The frame state at a block's first instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryState {
    /// FP holds this function's frame record: the walk is complete.
    Framed,
    /// Before `push ebp`: the return address is at `[SP]`.
    BeforePush,
    /// Between `push ebp` and `mov ebp, esp`: the return address is at `[SP + W]`.
    AfterPush,
    /// At `ret`: the return address is at `[SP]`.
    AtReturn,
}

impl EntryState {
    /// Classifies a block of an `arch` guest by the bytes of its first instruction. Only x86
    /// keeps the return address on the stack at entry; riscv64 and aarch64 keep it in
    /// `ra` / `x30`, which the recorder records with every sample: always [`Framed`] there.
    ///
    /// [`Framed`]: EntryState::Framed
    pub fn classify_on(arch: kern_profile_format::Arch, first: &[u8]) -> Self {
        if !kern_profile_arch::guest(arch).return_address_on_stack() {
            return EntryState::Framed;
        }
        match PtrWidth::from_bytes(arch.ptr_width() as usize) {
            Ok(width) => Self::classify(first, width),
            Err(_) => EntryState::Framed,
        }
    }

    /// Classifies an x86 block by the bytes of its first instruction.
    pub fn classify(first: &[u8], width: PtrWidth) -> Self {
        // x86_64 encodes the 64-bit moves with a REX.W prefix.
        let mov = match (width, first) {
            (PtrWidth::W8, [0x48, rest @ ..]) => rest,
            (PtrWidth::W4, rest) => rest,
            _ => &[][..],
        };
        if first.first() == Some(&0x55) {
            return EntryState::BeforePush;
        }
        if crate::x86::is_ret(first) {
            return EntryState::AtReturn;
        }
        match mov {
            // mov ebp, esp: 89 /r with ModRM e5, or 8b /r with ModRM ec.
            [0x89, 0xe5, ..] | [0x8b, 0xec, ..] => EntryState::AfterPush,
            _ => EntryState::Framed,
        }
    }

    /// The offset from SP of the caller's return address, when the walk from FP misses it.
    pub fn caller_offset(self, width: PtrWidth) -> Option<u64> {
        match self {
            EntryState::Framed => None,
            EntryState::BeforePush | EntryState::AtReturn => Some(0),
            EntryState::AfterPush => Some(width.bytes() as u64),
        }
    }
}

/// Which instruction of a block of `n` instructions the sampler's budget ran out at, given
/// that the block's instructions were already added to the counter and the counter stands
/// `overshoot` past its threshold: the last `overshoot` instructions come after it.
pub fn sampled_index(n: usize, overshoot: u64) -> usize {
    let n = n.max(1);
    let after = overshoot.min(n as u64 - 1) as usize;
    n - 1 - after
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_i386_prologue_and_epilogue() {
        let w = PtrWidth::W4;
        assert_eq!(
            EntryState::classify(&[0x55, 0x89, 0xe5], w),
            EntryState::BeforePush
        );
        assert_eq!(
            EntryState::classify(&[0x89, 0xe5], w),
            EntryState::AfterPush
        );
        assert_eq!(
            EntryState::classify(&[0x8b, 0xec], w),
            EntryState::AfterPush
        );
        assert_eq!(EntryState::classify(&[0xc3], w), EntryState::AtReturn);
        assert_eq!(
            EntryState::classify(&[0xc2, 0x08, 0x00], w),
            EntryState::AtReturn
        );
        assert_eq!(EntryState::classify(&[0xf3, 0xc3], w), EntryState::AtReturn);
        // mov ecx, eax; a truncated ret imm16; nothing at all.
        assert_eq!(EntryState::classify(&[0x89, 0xc1], w), EntryState::Framed);
        assert_eq!(EntryState::classify(&[0xc2, 0x08], w), EntryState::Framed);
        assert_eq!(EntryState::classify(&[], w), EntryState::Framed);
        // A REX-prefixed move means nothing on i386 (0x48 is `dec eax` there).
        assert_eq!(
            EntryState::classify(&[0x48, 0x89, 0xe5], w),
            EntryState::Framed
        );
    }

    #[test]
    fn classifies_x86_64_prologue() {
        let w = PtrWidth::W8;
        assert_eq!(EntryState::classify(&[0x55], w), EntryState::BeforePush);
        assert_eq!(
            EntryState::classify(&[0x48, 0x89, 0xe5], w),
            EntryState::AfterPush
        );
        assert_eq!(
            EntryState::classify(&[0x48, 0x8b, 0xec], w),
            EntryState::AfterPush
        );
        // Without REX.W it is a 32-bit move, not the frame set-up.
        assert_eq!(EntryState::classify(&[0x89, 0xe5], w), EntryState::Framed);
        assert_eq!(EntryState::classify(&[0xc3], w), EntryState::AtReturn);
    }

    #[test]
    fn caller_offsets() {
        assert_eq!(EntryState::AfterPush.caller_offset(PtrWidth::W8), Some(8));
        assert_eq!(EntryState::AfterPush.caller_offset(PtrWidth::W4), Some(4));
        assert_eq!(EntryState::BeforePush.caller_offset(PtrWidth::W4), Some(0));
        assert_eq!(EntryState::AtReturn.caller_offset(PtrWidth::W8), Some(0));
        assert_eq!(EntryState::Framed.caller_offset(PtrWidth::W8), None);
    }

    #[test]
    fn sampled_index_counts_back_from_the_overshoot() {
        // Budget ran out at the first of 5 instructions: 4 more were counted after it.
        assert_eq!(sampled_index(5, 4), 0);
        assert_eq!(sampled_index(5, 0), 4);
        assert_eq!(sampled_index(5, 2), 2);
        // An overshoot beyond the block (stale counter) clamps to its first instruction.
        assert_eq!(sampled_index(5, 99), 0);
        assert_eq!(sampled_index(0, 7), 0);
        assert_eq!(sampled_index(1, u64::MAX), 0);
    }
}
