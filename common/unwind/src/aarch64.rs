//! aarch64 frame records (AAPCS64): `x29` points at `{saved x29, saved x30}`, the caller's
//! frame pointer at `[x29]` and the return address at `[x29 + 8]`, the x86 layout at 8
//! bytes. Return addresses saved by code built with pointer authentication
//! (`-mbranch-protection`, Linux's `CONFIG_ARM64_PTR_AUTH`) carry a signature in their top
//! bits: [`strip_pac`] removes it.
//!
//! Leaf functions without a record (GCC and clang's default) and functions before their
//! prologue run with the caller's `x29`; their caller is only in `x30`, which the recorder
//! records beside the walk.
//!
//! Linux ends the kernel chain of an entry from EL0 with a final record `{0, 0}` in the task's
//! `pt_regs`; the walk reads the user's x29, sp, pc and pstate there and goes on in user space
//! (the final registers of the crate's record walk, 304 bytes into `pt_regs`).

pub use kern_profile_arch::aarch64::strip_pac;
use kern_profile_arch::aarch64::{FRAME_RECORD, VA_BITS};

use crate::records::{FinalRegs, Layout, UserContext};

/// Where the records are, for [`crate::walk_guest`] (the crate's `records` module).
pub(crate) const LAYOUT: Layout = Layout {
    below: FRAME_RECORD.below,
    align: FRAME_RECORD.align,
    strip: strip_pac,
    gcc_leaf: false,
    final_regs: Some(FinalRegs {
        below: PT_REGS_STACKFRAME - PT_REGS_X29,
        decode: linux_user_regs,
    }),
    irq_stack: 16 << 10,
};

/// Linux arm64's `struct pt_regs` (5.x to 6.x): `regs[31]`, `sp`, `pc`, `pstate`, then
/// `orig_x0`, `syscallno`, `sdei_ttbr1`, `pmr`, and `stackframe`, the record every kernel
/// entry's chain ends in: for an entry from user space a final record `{0, 0}`.
const PT_REGS_STACKFRAME: u64 = 304;
/// `regs[29]` (x29), then x30, sp, pc and pstate: [`FinalRegs::LEN`] bytes.
const PT_REGS_X29: u64 = 29 * 8;

/// The user context in `pt_regs` from x29 on, when it is one: `pstate` says EL0 in AArch64
/// (M\[4:0\] = 0) and `sp` and `pc` lie in the lower (user) half of the address space.
fn linux_user_regs(regs: &[u8; FinalRegs::LEN]) -> Option<UserContext> {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&regs[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    let (fp, sp, pc, pstate) = (word(0), word(2), word(3), word(4));
    let user = |a: u64| a != 0 && a >> VA_BITS == 0;
    (pstate & 0x1f == 0 && pstate >> 32 == 0 && user(sp) && user(pc)).then_some(UserContext {
        pc,
        sp,
        fp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{walk_guest, Crossings};
    use kern_profile_format::{Arch, StopReason};

    #[test]
    fn strips_signatures_in_both_halves() {
        assert_eq!(strip_pac(0x002a_0000_4020_1234), 0x4020_1234);
        assert_eq!(strip_pac(0x4020_1234), 0x4020_1234);
        assert_eq!(strip_pac(0xff9f_8000_1000_2000), 0xffff_8000_1000_2000);
        assert_eq!(strip_pac(0xffff_8000_1000_2000), 0xffff_8000_1000_2000);
    }

    #[test]
    fn walks_signed_records() {
        // Records at x29: {saved x29, x30}.
        let base = 0x4100_0000u64;
        let mut mem = vec![0u64; 32];
        let put = |mem: &mut Vec<u64>, fp: u64, saved: u64, ret: u64| {
            let i = ((fp - base) / 8) as usize;
            mem[i] = saved;
            mem[i + 1] = ret;
        };
        put(&mut mem, base + 0x20, base + 0x60, 0x0055_0000_4020_0100);
        put(&mut mem, base + 0x60, 0, 0x4020_0200);
        let read = |a: u64, out: &mut [u8]| {
            let i = ((a - base) / 8) as usize;
            out[..8].copy_from_slice(&mem[i].to_le_bytes());
            out[8..].copy_from_slice(&mem[i + 1].to_le_bytes());
            true
        };
        let mut out = [0; 4];
        let w = walk_guest(
            Arch::Aarch64,
            base,
            base + 0x20,
            4,
            Crossings::default(),
            read,
            &mut out,
        );
        assert_eq!(w.stop, StopReason::NullFramePointer);
        assert_eq!(&out[..w.frames], &[0x4020_0100, 0x4020_0200]);
    }
}
