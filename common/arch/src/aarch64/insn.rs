//! aarch64 (A64) encodings that matter to frame records and control flow.
//!
//! Frame-record effects: `add x29, sp, #k` (`mov x29, sp`) sets fp; `stp`/`str` of `x29` or
//! `x30` with base `sp` save them, `ldp`/`ldr` reload them (`stp x29, x30, [sp, #-16]!` and
//! `ldp x29, x30, [sp], #16` do both). Calls are `bl` and `blr` (and its pointer-authenticating
//! forms); the return is `ret` (and `retaa`/`retab`).

use super::imm::{imm14, imm19, imm26};
use crate::insn::{Effects, Flow, Insn};

const FP: u32 = 29;
const LR: u32 = 30;
const SP: u32 = 31;

/// Decodes from `start` to the end of `bytes`, or to the first zero word (`udf #0`, padding).
pub(crate) fn decode_all(start: u64, bytes: &[u8]) -> Vec<Insn> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .take_while(|&w| w != 0)
        .zip((start..).step_by(4))
        .map(|(w, addr)| decode(w, addr))
        .collect()
}

fn decode(w: u32, addr: u64) -> Insn {
    Insn {
        addr,
        len: 4,
        effects: effects(w),
        flow: flow(w, addr),
    }
}

fn effects(w: u32) -> Effects {
    let (rt, rn, rt2) = (w & 31, (w >> 5) & 31, (w >> 10) & 31);
    // ADD (immediate), 64-bit: x29 = sp + imm.
    if w & 0xff80_03ff == 0x9100_03fd {
        return Effects::SETS_FP;
    }
    if rn != SP {
        return Effects::NONE;
    }
    // STP/LDP of 64-bit registers: post-index, signed offset, pre-index; bit 22 loads.
    if matches!((w >> 23) & 0x1ff, 0x151..=0x153) {
        let load = w & (1 << 22) != 0;
        return reg_effect(rt, load) | reg_effect(rt2, load);
    }
    // STR/LDR (immediate), 64-bit: unsigned offset, or pre/post-index.
    let single = match (w & 0xffc0_0000, w & 0xffe0_0400) {
        (0xf900_0000, _) | (_, 0xf800_0400) => Some(false),
        (0xf940_0000, _) | (_, 0xf840_0400) => Some(true),
        _ => None,
    };
    single.map_or(Effects::NONE, |load| reg_effect(rt, load))
}

fn reg_effect(reg: u32, load: bool) -> Effects {
    match (reg, load) {
        (FP, false) => Effects::SAVES_FP,
        (FP, true) => Effects::RESTORES_FP,
        (LR, false) => Effects::SAVES_RA,
        (LR, true) => Effects::RESTORES_RA,
        _ => Effects::NONE,
    }
}

fn flow(w: u32, addr: u64) -> Flow {
    let at = |d: i64| Some(addr.wrapping_add(d as u64));
    match w {
        // BL, B imm26.
        _ if w & 0xfc00_0000 == 0x9400_0000 => Flow::Call(at(imm26(w))),
        _ if w & 0xfc00_0000 == 0x1400_0000 => Flow::Jump(at(imm26(w))),
        // B.cond; CBZ/CBNZ; TBZ/TBNZ.
        _ if w & 0xff00_0010 == 0x5400_0000 => Flow::Jump(at(imm19(w))),
        _ if w & 0x7e00_0000 == 0x3400_0000 => Flow::Jump(at(imm19(w))),
        _ if w & 0x7e00_0000 == 0x3600_0000 => Flow::Jump(at(imm14(w))),
        // Unconditional branch (register): BR, BLR, RET, ERET and their authenticating forms.
        _ if w & 0xfe00_0000 == 0xd600_0000 => match (w >> 21) & 0xf {
            0b0001 | 0b1001 => Flow::Call(None),
            0b0010 => Flow::Return,
            0b0100 | 0b0101 => Flow::Trap,
            _ => Flow::Jump(None),
        },
        // Exception generation: SVC, HVC, SMC, BRK, HLT.
        _ if w & 0xff00_0000 == 0xd400_0000 => Flow::Trap,
        _ => Flow::Next,
    }
}

/// Whether a call ends at `ret`, from the code bytes `before` it: `Some(target)` for `bl`,
/// `Some(None)` for `blr` and its authenticating forms.
pub(crate) fn call_before(before: &[u8], ret: u64) -> Option<Option<u64>> {
    let last = before.get(before.len().checked_sub(4)?..)?;
    let w = u32::from_le_bytes(last.try_into().ok()?);
    match decode(w, ret - 4).flow {
        Flow::Call(t) => Some(t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// rustc's stage_middle (examples/kernel-aarch64), at 0x402000cc.
    const STAGE_MIDDLE: [u32; 8] = [
        0xa9bf7bfd, // stp x29, x30, [sp, #-16]!
        0x910003fd, // mov x29, sp
        0x528b4b48, // mov w8, #0x5a5a
        0x72ab4b48, // movk w8, #0x5a5a, lsl #16
        0x4a080000, // eor w0, w0, w8
        0x94000003, // bl 0x402000ec
        0xa8c17bfd, // ldp x29, x30, [sp], #16
        0xd65f03c0, // ret
    ];

    #[test]
    fn decodes_a_framed_function() {
        let code = decode_all(0x4020_00cc, &bytes(&STAGE_MIDDLE));
        assert_eq!(code.len(), 8);
        assert_eq!(code[0].effects, Effects::SAVES_FP | Effects::SAVES_RA);
        assert_eq!(code[1].effects, Effects::SETS_FP);
        assert_eq!(code[5].flow, Flow::Call(Some(0x4020_00ec)));
        assert_eq!(code[6].effects, Effects::RESTORES_FP | Effects::RESTORES_RA);
        assert_eq!(code[7].flow, Flow::Return);
        assert!(code[2..5]
            .iter()
            .all(|i| i.flow == Flow::Next && i.effects == Effects::NONE));
    }

    #[test]
    fn decodes_stores_loads_and_branches() {
        let code = decode_all(
            0x1000,
            &bytes(&[
                0xf90007fe, // str x30, [sp, #8]
                0xf94007fe, // ldr x30, [sp, #8]
                0xa90153f3, // stp x19, x20, [sp, #16]: neither
                0x34000128, // cbz w8, +0x24
                0x54ffff01, // b.ne -0x20
                0x36080040, // tbz w0, #1, +8
                0x17ffffff, // b -4
                0xd63f0100, // blr x8
                0xd4000001, // svc #0
                0xd69f03e0, // eret
                0xd61f0200, // br x16
            ]),
        );
        assert_eq!(code[0].effects, Effects::SAVES_RA);
        assert_eq!(code[1].effects, Effects::RESTORES_RA);
        assert_eq!(code[2].effects, Effects::NONE);
        assert_eq!(code[3].flow, Flow::Jump(Some(0x1030)));
        assert_eq!(code[4].flow, Flow::Jump(Some(0x0ff0)));
        assert_eq!(code[5].flow, Flow::Jump(Some(0x101c)));
        assert_eq!(code[6].flow, Flow::Jump(Some(0x1014)));
        assert_eq!(code[7].flow, Flow::Call(None));
        assert_eq!(code[8].flow, Flow::Trap);
        assert_eq!(code[9].flow, Flow::Trap);
        assert_eq!(code[10].flow, Flow::Jump(None));
        assert_eq!(decode_all(0, &bytes(&[0xd503201f, 0, 0xd65f03c0])).len(), 1);
    }

    #[test]
    fn return_addresses_follow_calls() {
        let code = bytes(&STAGE_MIDDLE);
        assert_eq!(
            call_before(&code[16..24], 0x4020_00e4),
            Some(Some(0x4020_00ec))
        );
        assert_eq!(call_before(&code[..8], 0x4020_00d4), None);
        assert_eq!(call_before(&bytes(&[0xd63f0100]), 0x2004), Some(None));
        assert_eq!(call_before(&[1, 2], 0x2004), None);
    }
}
