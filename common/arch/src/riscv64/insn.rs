//! riscv64 (RV64GC) encodings that matter to frame records and control flow: the 32-bit base
//! instructions and the C extension's 16-bit ones.
//!
//! Frame-record effects: `addi s0, sp, k` / `c.addi4spn s0, sp, k` / `c.mv s0, sp` set fp;
//! `sd`/`c.sdsp` of `s0` or `ra` to `k(sp)` save them; `ld`/`c.ldsp` reload them. Calls are
//! `jal ra` and `jalr ra` (LLVM's `call` is `auipc ra, hi; jalr ra, lo(ra)`) and `c.jalr`;
//! the return is `jalr x0, 0(ra)` / `c.jr ra`.

use super::imm::{b_imm, c_addi4spn_imm, c_b_imm, c_j_imm, i_imm, j_imm};
use crate::insn::{Effects, Flow, Insn};

const RA: u32 = 1;
/// The alternate link register (`t0`), used by millicode calls.
const T0: u32 = 5;
const SP: u32 = 2;
/// `s0`, the frame pointer.
const FP: u32 = 8;

const OP_IMM: u32 = 0x13;
const LOAD: u32 = 0x03;
const STORE: u32 = 0x23;
const AUIPC: u32 = 0x17;
const JAL: u32 = 0x6f;
const JALR: u32 = 0x67;
const BRANCH: u32 = 0x63;
const SYSTEM: u32 = 0x73;

/// Decodes from `start` to the end of `bytes`, or to the first bytes that are no instruction
/// (zero padding, longer encodings).
pub(crate) fn decode_all(start: u64, bytes: &[u8]) -> Vec<Insn> {
    let mut out = Vec::with_capacity(bytes.len() / 3);
    let mut off = 0usize;
    // The last instruction's `auipc rd, hi` as (rd, its value), for `jalr` targets.
    let mut auipc: Option<(u32, u64)> = None;
    while let Some(half) = bytes.get(off..off + 2) {
        let addr = start + off as u64;
        let lo = u16::from_le_bytes([half[0], half[1]]);
        let insn = if lo & 3 != 3 {
            auipc = None;
            decode16(lo, addr)
        } else {
            let Some(w) = bytes.get(off..off + 4) else {
                break;
            };
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let (insn, next) = decode32(w, addr, auipc);
            auipc = next;
            insn
        };
        let Some(insn) = insn else { break };
        off += insn.len as usize;
        out.push(insn);
    }
    out
}

fn insn(addr: u64, len: u8, effects: Effects, flow: Flow) -> Option<Insn> {
    Some(Insn {
        addr,
        len,
        effects,
        flow,
    })
}

/// A 32-bit instruction; `auipc` is the previous instruction's, when it was one. Also returns
/// this one's `auipc` value.
fn decode32(w: u32, addr: u64, auipc: Option<(u32, u64)>) -> (Option<Insn>, Option<(u32, u64)>) {
    if w & 0x1f == 0x1f {
        // 48-bit and longer encodings: none in RV64GC.
        return (None, None);
    }
    let (opcode, rd, f3) = (w & 0x7f, (w >> 7) & 31, (w >> 12) & 7);
    let (rs1, rs2) = ((w >> 15) & 31, (w >> 20) & 31);
    let at = |d: i64| addr.wrapping_add(d as u64);
    let mut effects = Effects::NONE;
    let mut flow = Flow::Next;
    let mut next_auipc = None;
    match opcode {
        OP_IMM if f3 == 0 && rd == FP && rs1 == SP => effects = Effects::SETS_FP,
        LOAD if f3 == 3 && rs1 == SP => effects = reload(rd),
        STORE if f3 == 3 && rs1 == SP => effects = save(rs2),
        AUIPC => next_auipc = Some((rd, at((w & 0xffff_f000) as i32 as i64))),
        JAL => flow = link(rd, Some(at(j_imm(w)))),
        JALR if f3 == 0 => {
            let target = auipc
                .filter(|&(r, _)| r == rs1 && r != 0)
                .map(|(_, base)| base.wrapping_add(i_imm(w) as u64) & !1);
            flow = if rd == 0 && rs1 == RA && i_imm(w) == 0 {
                Flow::Return
            } else {
                link(rd, target)
            };
        }
        BRANCH => flow = Flow::Jump(Some(at(b_imm(w)))),
        SYSTEM if f3 == 0 => flow = Flow::Trap,
        _ => {}
    }
    (insn(addr, 4, effects, flow), next_auipc)
}

/// A jump that writes `rd`: a call when `rd` is a link register.
fn link(rd: u32, target: Option<u64>) -> Flow {
    match rd {
        RA | T0 => Flow::Call(target),
        _ => Flow::Jump(target),
    }
}

fn save(reg: u32) -> Effects {
    match reg {
        FP => Effects::SAVES_FP,
        RA => Effects::SAVES_RA,
        _ => Effects::NONE,
    }
}

fn reload(reg: u32) -> Effects {
    match reg {
        FP => Effects::RESTORES_FP,
        RA => Effects::RESTORES_RA,
        _ => Effects::NONE,
    }
}

/// A 16-bit (C extension) instruction.
fn decode16(h: u16, addr: u64) -> Option<Insn> {
    if h == 0 {
        // The defined illegal instruction: padding.
        return None;
    }
    let h32 = h as u32;
    let bit = |i: u32| (h32 >> i) & 1;
    let at = |d: i64| addr.wrapping_add(d as u64);
    let (rd, rs2) = ((h32 >> 7) & 31, (h32 >> 2) & 31);
    let mut effects = Effects::NONE;
    let mut flow = Flow::Next;
    match (h32 & 3, h32 >> 13) {
        // c.addi4spn rd', sp, nzuimm
        (0, 0) if (h32 >> 2) & 7 == 0 && c_addi4spn_imm(h32) != 0 => effects = Effects::SETS_FP,
        // c.j
        (1, 5) => flow = Flow::Jump(Some(at(c_j_imm(h32)))),
        // c.beqz, c.bnez
        (1, 6) | (1, 7) => flow = Flow::Jump(Some(at(c_b_imm(h32)))),
        // c.ldsp, c.sdsp
        (2, 3) => effects = reload(rd),
        (2, 7) => effects = save(rs2),
        (2, 4) => match (bit(12), rd, rs2) {
            (0, RA, 0) => flow = Flow::Return,
            (0, r, 0) if r != 0 => flow = Flow::Jump(None),
            (0, FP, SP) => effects = Effects::SETS_FP,
            (1, 0, 0) => flow = Flow::Trap,
            (1, r, 0) if r != 0 => flow = Flow::Call(None),
            _ => {}
        },
        _ => {}
    }
    insn(addr, 2, effects, flow)
}

/// Whether a call ends at `ret`, from the code bytes `before` it: `Some(target)` for `jal ra`
/// and `jalr ra` (the target when an `auipc` before it tells it) or `c.jalr` (no target).
pub(crate) fn call_before(before: &[u8], ret: u64) -> Option<Option<u64>> {
    let n = before.len();
    if n >= 4 {
        let w = u32::from_le_bytes(before[n - 4..].try_into().ok()?);
        let prev = (n >= 8)
            .then(|| u32::from_le_bytes(before[n - 8..n - 4].try_into().unwrap_or_default()));
        let auipc = prev.filter(|p| p & 0x7f == AUIPC).map(|p| {
            (
                (p >> 7) & 31,
                (ret - 8).wrapping_add((p & 0xffff_f000) as i32 as i64 as u64),
            )
        });
        if w & 3 == 3 {
            if let (Some(i), _) = decode32(w, ret - 4, auipc) {
                if let Flow::Call(target) = i.flow {
                    if (w >> 7) & 31 == RA {
                        return Some(target);
                    }
                }
            }
        }
    }
    if n >= 2 {
        let h = u16::from_le_bytes([before[n - 2], before[n - 1]]);
        if let Some(Insn {
            flow: Flow::Call(t),
            ..
        }) = decode16(h, ret - 2).filter(|_| h & 3 != 3)
        {
            return Some(t);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(halves: &[u32]) -> Vec<u8> {
        // Each entry: a 16-bit (<= 0xffff with low bits != 11) or 32-bit instruction.
        let mut b = Vec::new();
        for &w in halves {
            if w & 3 == 3 {
                b.extend_from_slice(&w.to_le_bytes());
            } else {
                b.extend_from_slice(&(w as u16).to_le_bytes());
            }
        }
        b
    }

    /// rustc's stage_middle (examples/kernel-riscv64), at 0x80000188.
    fn stage_middle() -> Vec<u8> {
        bytes(&[
            0x1141,     // addi sp, sp, -16
            0xe406,     // sd ra, 8(sp)
            0xe022,     // sd s0, 0(sp)
            0x0800,     // addi s0, sp, 16  (c.addi4spn)
            0x5a5a65b7, // lui a1, ...
            0xa5a5859b, // addiw a1, a1, ...
            0x8d2d,     // xor a0, a0, a1
            0x00000097, // auipc ra, 0
            0x010080e7, // jalr 16(ra) -> 0x800001aa
            0x60a2,     // ld ra, 8(sp)
            0x6402,     // ld s0, 0(sp)
            0x0141,     // addi sp, sp, 16
            0x8082,     // ret
        ])
    }

    #[test]
    fn decodes_a_framed_function() {
        let code = decode_all(0x8000_0188, &stage_middle());
        let addrs: Vec<u64> = code.iter().map(|i| i.addr).collect();
        assert_eq!(
            addrs[..5],
            [
                0x8000_0188,
                0x8000_018a,
                0x8000_018c,
                0x8000_018e,
                0x8000_0190
            ]
        );
        assert_eq!(code[1].effects, Effects::SAVES_RA);
        assert_eq!(code[2].effects, Effects::SAVES_FP);
        assert_eq!(code[3].effects, Effects::SETS_FP);
        assert_eq!(code[8].flow, Flow::Call(Some(0x8000_01aa)));
        assert_eq!(code[9].effects, Effects::RESTORES_RA);
        assert_eq!(code[10].effects, Effects::RESTORES_FP);
        assert_eq!(code[12].flow, Flow::Return);
        assert_eq!(code.last().unwrap().end(), 0x8000_01aa);
    }

    #[test]
    fn decodes_branches() {
        // hot_leaf's `beqz a1, +0x22` (c.beqz) and `bne a1, a2, -0x12`; recurse's
        // `beqz a2, +0x1e`; a `c.j -2`; `jal x0`; `ecall`; a `jr a5`.
        let code = decode_all(0x8000_01b2, &bytes(&[0xc18d]));
        assert_eq!(code[0].flow, Flow::Jump(Some(0x8000_01d4)));
        let code = decode_all(0x8000_01d0, &bytes(&[0xfec597e3]));
        assert_eq!(code[0].flow, Flow::Jump(Some(0x8000_01be)));
        let code = decode_all(0x8000_0212, &bytes(&[0xce19]));
        assert_eq!(code[0].flow, Flow::Jump(Some(0x8000_0230)));
        let code = decode_all(0x1000, &bytes(&[0xbffd, 0x0000006f, 0x00000073, 0x8782]));
        assert_eq!(code[0].flow, Flow::Jump(Some(0x0ffe)));
        assert_eq!(code[1].flow, Flow::Jump(Some(0x1002)));
        assert_eq!(code[2].flow, Flow::Trap);
        assert_eq!(code[3].flow, Flow::Jump(None));
    }

    #[test]
    fn stops_at_padding() {
        let mut b = bytes(&[0x8082]);
        b.extend_from_slice(&[0, 0, 0x82, 0x80]);
        assert_eq!(decode_all(0x1000, &b).len(), 1);
        assert!(
            decode_all(0x1000, &[0x13]).is_empty(),
            "a cut 32-bit instruction"
        );
    }

    #[test]
    fn return_addresses_follow_calls() {
        let code = stage_middle();
        // 0x800001a2 follows `auipc ra, 0; jalr 16(ra)` at 0x8000019a.
        let at = |ret: u64| {
            let end = (ret - 0x8000_0188) as usize;
            call_before(&code[end.saturating_sub(8)..end], ret)
        };
        assert_eq!(at(0x8000_01a2), Some(Some(0x8000_01aa)));
        // After `sd ra, 8(sp)` or the function's first instructions: no call.
        assert_eq!(at(0x8000_018c), None);
        assert_eq!(at(0x8000_0198), None);
        // c.jalr a5; jal ra, +8.
        assert_eq!(call_before(&bytes(&[0x9782]), 0x1002), Some(None));
        assert_eq!(
            call_before(&bytes(&[0x008000ef]), 0x1004),
            Some(Some(0x1008))
        );
        assert_eq!(call_before(&[], 0x1004), None);
    }
}
