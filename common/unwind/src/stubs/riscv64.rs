//! riscv64 (RV64GC) instructions as the stub machine's [`Op`]s: what moves and saves the
//! integer registers (`addi`, `mv`, `sd`, `ld` and their compressed forms), the CSRs a trap
//! entry reads (`sepc`, `sstatus`, `sscratch`), calls, jumps and branches. Anything else that
//! writes an integer register makes it unknown; an opcode not known ends the path.

use kern_profile_arch::riscv64::imm::{
    b_imm, c_addi4spn_imm, c_b_imm, c_j_imm, i_imm, j_imm, s_imm, sext,
};

use super::machine::{Abi, Insn, Op, Sys};

const ZERO: u8 = 0;
const RA: u8 = 1;
const SP: u8 = 2;
const T0: u8 = 5;
const FP: u8 = 8;

/// The psABI: a call keeps `sp`, `gp`, `tp` and `s0` to `s11`.
pub(crate) const ABI: Abi = Abi {
    sp: SP,
    fp: FP,
    ra: RA,
    zero: Some(ZERO),
    kept: &[3, 4, 8, 9, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27],
};

const SRET: u32 = 0x1020_0073;
const MRET: u32 = 0x3020_0073;

/// The instruction at `addr`, its bytes read by `code(addr, buf)`.
pub(crate) fn decode<C>(addr: u64, code: &mut C) -> Option<Insn>
where
    C: FnMut(u64, &mut [u8]) -> bool,
{
    let mut b = [0u8; 4];
    if !code(addr, &mut b[..2]) {
        return None;
    }
    let lo = u16::from_le_bytes([b[0], b[1]]);
    if lo & 3 != 3 {
        return decode16(lo, addr).map(|ops| Insn { len: 2, ops });
    }
    if !code(addr, &mut b) {
        return None;
    }
    decode32(u32::from_le_bytes(b), addr).map(|ops| Insn { len: 4, ops })
}

fn csr(n: u32) -> Sys {
    match n {
        0x141 => Sys::Pc,
        0x100 => Sys::Status,
        0x140 => Sys::Scratch,
        _ => Sys::Other,
    }
}

fn decode32(w: u32, addr: u64) -> Option<Vec<Op>> {
    let (opcode, f3, f7) = (w & 0x7f, (w >> 12) & 7, w >> 25);
    let (rd, rs1, rs2) = (
        ((w >> 7) & 31) as u8,
        ((w >> 15) & 31) as u8,
        ((w >> 20) & 31) as u8,
    );
    let at = |d: i64| addr.wrapping_add(d as u64);
    let op = match opcode {
        // addi (mv, li from x0: unknown, as x0 reads)
        0x13 if f3 == 0 => Op::Add {
            rd,
            rs: rs1,
            add: i_imm(w),
        },
        // add rd, rs, x0 / x0, rs
        0x33 if f3 == 0 && f7 == 0 && rs2 == ZERO => Op::Add {
            rd,
            rs: rs1,
            add: 0,
        },
        0x33 if f3 == 0 && f7 == 0 && rs1 == ZERO => Op::Add {
            rd,
            rs: rs2,
            add: 0,
        },
        0x13 | 0x1b | 0x33 | 0x3b | 0x37 | 0x17 | 0x2f => Op::Clobber(rd),
        0x03 if f3 == 3 => Op::Load {
            rd,
            base: rs1,
            off: i_imm(w),
        },
        0x03 => Op::Clobber(rd),
        0x23 if f3 == 3 => Op::Store {
            base: rs1,
            off: s_imm(w),
            src: rs2,
        },
        0x23 | 0x27 => Op::StoreOther {
            base: rs1,
            off: s_imm(w),
        },
        // fld, fence: no integer register
        0x07 | 0x0f => return Some(Vec::new()),
        // Floating point that writes an integer register: moves, compares, conversions.
        0x53 if matches!(f7, 0x50 | 0x51 | 0x60 | 0x61 | 0x70 | 0x71) => Op::Clobber(rd),
        0x53 => return Some(Vec::new()),
        0x6f if rd == ZERO => Op::Jump(at(j_imm(w))),
        0x6f | 0x67 if rd == RA || rd == T0 => return Some(vec![Op::Clobber(rd), Op::Call]),
        0x63 => Op::Branch(at(b_imm(w))),
        0x73 => return Some(system(w, f3, rd, rs1)),
        _ => Op::End,
    };
    Some(vec![op])
}

fn system(w: u32, f3: u32, rd: u8, rs1: u8) -> Vec<Op> {
    let sys = csr(w >> 20);
    let rd = (rd != ZERO).then_some(rd);
    match f3 {
        0 if w == SRET || w == MRET => vec![Op::TrapReturn],
        // ecall (a firmware call: a0 and a1 come back), ebreak, wfi, sfence.vma
        0 => vec![Op::Clobber(10), Op::Clobber(11)],
        // csrrw
        1 => vec![Op::Sys {
            sys,
            rd,
            rs: Some(rs1),
        }],
        // csrrs, csrrc with x0 (csrr), and their immediate forms with 0: a read alone
        2 | 3 | 6 | 7 if rs1 == ZERO => vec![Op::Sys { sys, rd, rs: None }],
        // Any other write: the register's new value is not followed (x0 reads unknown).
        2 | 3 | 5 | 6 | 7 => vec![Op::Sys {
            sys,
            rd,
            rs: Some(ZERO),
        }],
        _ => vec![Op::End],
    }
}

/// A 16-bit (C extension) instruction.
fn decode16(h: u16, addr: u64) -> Option<Vec<Op>> {
    if h == 0 {
        // The defined illegal instruction: padding.
        return None;
    }
    let h = h as u32;
    let bit = |i: u32| (h >> i) & 1;
    let at = |d: i64| addr.wrapping_add(d as u64);
    let (rd, rs2) = (((h >> 7) & 31) as u8, ((h >> 2) & 31) as u8);
    // The compressed register fields (x8 to x15).
    let (rd_c, rs2_c) = ((((h >> 7) & 7) + 8) as u8, (((h >> 2) & 7) + 8) as u8);
    let imm6 = sext(bit(12) << 5 | (h >> 2) & 31, 6);
    // c.ld / c.sd offset: uimm[5:3] from [12:10], uimm[7:6] from [6:5]
    let ld_off = (((h >> 10) & 7) << 3 | ((h >> 5) & 3) << 6) as i64;
    let op = match (h & 3, h >> 13) {
        // c.addi4spn
        (0, 0) => Op::Add {
            rd: rs2_c,
            rs: SP,
            add: c_addi4spn_imm(h) as i64,
        },
        // c.fld
        (0, 1) => return Some(Vec::new()),
        // c.lw
        (0, 2) => Op::Clobber(rs2_c),
        (0, 3) => Op::Load {
            rd: rs2_c,
            base: rd_c,
            off: ld_off,
        },
        // c.fsd, c.sw
        (0, 5) | (0, 6) => Op::StoreOther {
            base: rd_c,
            off: ld_off,
        },
        (0, 7) => Op::Store {
            base: rd_c,
            off: ld_off,
            src: rs2_c,
        },
        // c.addi (c.nop)
        (1, 0) => Op::Add {
            rd,
            rs: rd,
            add: imm6,
        },
        // c.addiw, c.li
        (1, 1) | (1, 2) => Op::Clobber(rd),
        // c.addi16sp
        (1, 3) if rd == SP => Op::Add {
            rd: SP,
            rs: SP,
            add: sext(
                bit(12) << 9 | bit(6) << 4 | bit(5) << 6 | ((h >> 3) & 3) << 7 | bit(2) << 5,
                10,
            ),
        },
        // c.lui
        (1, 3) => Op::Clobber(rd),
        // c.srli, c.srai, c.andi, c.sub, c.xor, c.or, c.and, c.subw, c.addw
        (1, 4) => Op::Clobber(rd_c),
        (1, 5) => Op::Jump(at(c_j_imm(h))),
        // c.beqz, c.bnez
        (1, 6) | (1, 7) => Op::Branch(at(c_b_imm(h))),
        // c.slli, c.lwsp
        (2, 0) | (2, 2) => Op::Clobber(rd),
        // c.fldsp
        (2, 1) => return Some(Vec::new()),
        // c.ldsp: uimm[5] from 12, [4:3] from [6:5], [8:6] from [4:2]
        (2, 3) => Op::Load {
            rd,
            base: SP,
            off: (bit(12) << 5 | ((h >> 5) & 3) << 3 | ((h >> 2) & 7) << 6) as i64,
        },
        (2, 4) => match (bit(12), rd, rs2) {
            // c.jr (ret)
            (0, _, ZERO) => Op::End,
            // c.mv
            (0, _, _) => Op::Add {
                rd,
                rs: rs2,
                add: 0,
            },
            // c.ebreak
            (1, ZERO, ZERO) => return Some(Vec::new()),
            // c.jalr
            (1, _, ZERO) => return Some(vec![Op::Clobber(RA), Op::Call]),
            // c.add
            _ => Op::Clobber(rd),
        },
        // c.fsdsp: uimm[5:3] from [12:10], [8:6] from [9:7]
        (2, 5) => Op::StoreOther {
            base: SP,
            off: (((h >> 10) & 7) << 3 | ((h >> 7) & 7) << 6) as i64,
        },
        // c.swsp: uimm[5:2] from [12:9], [7:6] from [8:7]
        (2, 6) => Op::StoreOther {
            base: SP,
            off: (((h >> 9) & 0xf) << 2 | ((h >> 7) & 3) << 6) as i64,
        },
        // c.sdsp: uimm[5:3] from [12:10], [8:6] from [9:7]
        (2, 7) => Op::Store {
            base: SP,
            off: (((h >> 10) & 7) << 3 | ((h >> 7) & 7) << 6) as i64,
            src: rs2,
        },
        _ => Op::End,
    };
    Some(vec![op])
}
