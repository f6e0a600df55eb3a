//! aarch64 (A64) instructions as the stub machine's [`Op`]s: what moves and saves the general
//! registers (`mov`, `add`/`sub` of immediates, `stp`/`ldp`, `str`/`ldr` with their
//! writebacks), the system registers a trap entry reads (`ELR_EL1`, `SPSR_EL1`, `SP_EL0`),
//! calls, jumps and branches. Any other data-processing instruction makes its destination
//! unknown (the stack pointer only where the encoding can name it: `and sp`, `add sp` of a
//! register); any other branch ends the path.
//!
//! Register 31 is the stack pointer in the machine; the zero register reads as
//! [`XZR`], which holds nothing followed.
//!
//! The decoding is by hand, as `kern-profile-arch`'s aarch64 decoder is: a closed set of
//! encodings whose register effects are all the stub machine needs (yaxpeax-arm, which the
//! annotate command uses to print instructions, describes operands, not their effects).

use kern_profile_arch::aarch64::imm::{imm14, imm19, imm26, sext};

use super::machine::{Abi, Insn, Op, Sys};

const SP: u8 = 31;
const FP: u8 = 29;
const LR: u8 = 30;
/// The zero register: no register of the machine.
const XZR: u8 = 32;

/// AAPCS64: a call keeps x19 to x29 (and sp).
pub(crate) const ABI: Abi = Abi {
    sp: SP,
    fp: FP,
    ra: LR,
    zero: None,
    kept: &[19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29],
};

/// `op0:op1:CRn:CRm:op2` of the system registers a stub reads.
const ELR_EL1: u32 = 0x4201;
const SPSR_EL1: u32 = 0x4200;
const SP_EL0: u32 = 0x4208;
const ERET: u32 = 0xd69f_03e0;

/// The instruction at `addr`, its bytes read by `code(addr, buf)`.
pub(crate) fn decode<C>(addr: u64, code: &mut C) -> Option<Insn>
where
    C: FnMut(u64, &mut [u8]) -> bool,
{
    let mut b = [0u8; 4];
    if addr & 3 != 0 || !code(addr, &mut b) {
        return None;
    }
    let w = u32::from_le_bytes(b);
    if w == 0 {
        // udf #0: padding.
        return None;
    }
    Some(Insn {
        len: 4,
        ops: ops(w, addr),
    })
}

/// A register field where 31 is the zero register.
fn zr(r: u32) -> u8 {
    if r == 31 {
        XZR
    } else {
        r as u8
    }
}

fn ops(w: u32, addr: u64) -> Vec<Op> {
    let at = |d: i64| addr.wrapping_add(d as u64);
    let (rd, rn) = (w & 31, (w >> 5) & 31);
    // Branches.
    match w {
        _ if w & 0xfc00_0000 == 0x1400_0000 => return vec![Op::Jump(at(imm26(w)))],
        _ if w & 0xfc00_0000 == 0x9400_0000 => return vec![Op::Clobber(LR), Op::Call],
        // b.cond, cbz/cbnz, tbz/tbnz
        _ if w & 0xff00_0010 == 0x5400_0000 || w & 0x7e00_0000 == 0x3400_0000 => {
            return vec![Op::Branch(at(imm19(w)))]
        }
        _ if w & 0x7e00_0000 == 0x3600_0000 => return vec![Op::Branch(at(imm14(w)))],
        // blr
        _ if w & 0xffff_fc1f == 0xd63f_0000 => return vec![Op::Clobber(LR), Op::Call],
        _ if w == ERET => return vec![Op::TrapReturn],
        // br, ret, and the other unconditional branches to registers
        _ if w & 0xfe00_0000 == 0xd600_0000 => return vec![Op::End],
        _ => {}
    }
    // System: mrs, msr, and what writes no general register (hints, barriers, msr imm).
    if w & 0xfff0_0000 == 0xd530_0000 {
        let sys = sysreg((w >> 5) & 0x7fff);
        return vec![Op::Sys {
            sys,
            rd: Some(zr(rd)),
            rs: None,
        }];
    }
    if w & 0xfff0_0000 == 0xd510_0000 {
        let sys = sysreg((w >> 5) & 0x7fff);
        return vec![Op::Sys {
            sys,
            rd: None,
            rs: Some(zr(rd)),
        }];
    }
    // msr to a PSTATE field (DAIFClr, DAIFSet): may re-enable interrupts, a write of a
    // system register not followed.
    if w & 0xfff8_f01f == 0xd500_401f {
        return vec![Op::Sys {
            sys: Sys::Other,
            rd: None,
            rs: Some(XZR),
        }];
    }
    if w & 0xffc0_0000 == 0xd500_0000 {
        return Vec::new();
    }
    // svc, hvc, smc, brk: an exception the kernel comes back from with the registers kept.
    if w & 0xff00_0000 == 0xd400_0000 {
        return Vec::new();
    }
    // Add/sub immediate: rd and rn 31 are the stack pointer (rd the zero register when
    // flags are set: cmp, cmn).
    if w & 0x1f00_0000 == 0x1100_0000 {
        let (sf, sub, flags) = (w >> 31 == 1, w >> 30 & 1 == 1, w >> 29 & 1 == 1);
        let imm = (((w >> 10) & 0xfff) << (12 * ((w >> 22) & 1))) as i64;
        return match (sf, flags) {
            (true, false) => vec![Op::Add {
                rd: rd as u8,
                rs: rn as u8,
                add: if sub { -imm } else { imm },
            }],
            (_, true) if rd == 31 => Vec::new(),
            _ => vec![Op::Clobber(rd as u8)],
        };
    }
    // mov xd, xm (orr xd, xzr, xm)
    if w & 0xffe0_ffe0 == 0xaa00_03e0 {
        let rm = (w >> 16) & 31;
        return match rd {
            31 => Vec::new(),
            _ => vec![Op::Add {
                rd: rd as u8,
                rs: zr(rm),
                add: 0,
            }],
        };
    }
    if w & 0x3a00_0000 == 0x2800_0000 {
        return pair(w);
    }
    if w & 0x3b00_0000 == 0x3900_0000 || w & 0x3b20_0000 == 0x3800_0000 {
        return single(w);
    }
    // Other loads and stores (exclusive, atomic, register offset, literal): a load's
    // destination is unknown; a store's address is not followed.
    if w & 0x0a00_0000 == 0x0800_0000 {
        let load = w >> 22 & 1 == 1 || w & 0x3b00_0000 == 0x1800_0000;
        return match (load, rd) {
            (true, r) if r != 31 => vec![Op::Clobber(r as u8)],
            _ => Vec::new(),
        };
    }
    // Data processing: the destination is unknown; 31 is the stack pointer for logical
    // immediates without flags (`and sp, x0, #-16`) and add/sub of an extended register.
    let to_sp = (w & 0x1f80_0000 == 0x1200_0000 && w >> 29 & 3 != 3)
        || (w & 0x1f20_0000 == 0x0b20_0000 && w >> 29 & 1 == 0);
    let dp = w & 0x1c00_0000 == 0x1000_0000 || w & 0x0e00_0000 == 0x0a00_0000;
    match (dp, rd) {
        (true, 31) if to_sp => vec![Op::Clobber(SP)],
        (true, 31) => Vec::new(),
        (true, r) => vec![Op::Clobber(r as u8)],
        // SIMD and floating point: no general register followed (a move to one is rare in
        // a stub and makes it unknown).
        (false, r) if w & 0x0e00_0000 == 0x0e00_0000 && r != 31 && w >> 21 & 0x7f == 0x79 => {
            vec![Op::Clobber(r as u8)]
        }
        (false, _) if w & 0x0e00_0000 == 0x0e00_0000 => Vec::new(),
        _ => vec![Op::End],
    }
}

fn sysreg(n: u32) -> Sys {
    match n {
        ELR_EL1 => Sys::Pc,
        SPSR_EL1 => Sys::Status,
        SP_EL0 => Sys::UserSp,
        _ => Sys::Other,
    }
}

/// Load/store pair: `stp`/`ldp` (general or SIMD registers), offset or pre/post-indexed.
fn pair(w: u32) -> Vec<Op> {
    let (opc, simd, load) = (w >> 30, w >> 26 & 1 == 1, w >> 22 & 1 == 1);
    let (rt, rn, rt2) = (w & 31, ((w >> 5) & 31) as u8, (w >> 10) & 31);
    let scale: i64 = match (simd, opc) {
        (false, 2) => 8,
        (false, _) => 4,
        (true, 0) => 4,
        (true, 1) => 8,
        (true, _) => 16,
    };
    let off = sext(w >> 15 & 0x7f, 7) * scale;
    let mode = w >> 23 & 3;
    // Post-indexed: the address is the base; pre-indexed and offset: base + off.
    let addr = if mode == 1 { 0 } else { off };
    let mut ops = Vec::with_capacity(5);
    match (load, simd, scale) {
        (true, false, 8) => {
            ops.push(Op::Load {
                rd: zr(rt),
                base: rn,
                off: addr,
            });
            ops.push(Op::Load {
                rd: zr(rt2),
                base: rn,
                off: addr + 8,
            });
        }
        (true, false, _) => ops.extend([Op::Clobber(zr(rt)), Op::Clobber(zr(rt2))]),
        (true, true, _) => {}
        (false, false, 8) => {
            ops.push(Op::Store {
                base: rn,
                off: addr,
                src: zr(rt),
            });
            ops.push(Op::Store {
                base: rn,
                off: addr + 8,
                src: zr(rt2),
            });
        }
        (false, _, _) => {
            for k in (0..2 * scale).step_by(8) {
                ops.push(Op::StoreOther {
                    base: rn,
                    off: addr + k,
                });
            }
        }
    }
    if mode == 1 || mode == 3 {
        ops.push(Op::Add {
            rd: rn,
            rs: rn,
            add: off,
        });
    }
    ops
}

/// Load/store of one register with an immediate: unsigned offset, unscaled, pre/post-indexed.
fn single(w: u32) -> Vec<Op> {
    let (size, simd, opc) = (w >> 30, w >> 26 & 1 == 1, w >> 22 & 3);
    let (rt, rn) = (w & 31, ((w >> 5) & 31) as u8);
    let (addr, writeback) = if w >> 24 & 1 == 1 {
        let scale = if simd && opc >= 2 { 16 } else { 1i64 << size };
        ((((w >> 10) & 0xfff) as i64) * scale, None)
    } else {
        let imm = sext(w >> 12 & 0x1ff, 9);
        match w >> 10 & 3 {
            1 => (0, Some(imm)),
            3 => (imm, Some(imm)),
            _ => (imm, None),
        }
    };
    let mut ops = Vec::with_capacity(3);
    match (simd, size, opc) {
        (false, 3, 0) => ops.push(Op::Store {
            base: rn,
            off: addr,
            src: zr(rt),
        }),
        (false, 3, 1) => ops.push(Op::Load {
            rd: zr(rt),
            base: rn,
            off: addr,
        }),
        (false, _, 0) => ops.push(Op::StoreOther {
            base: rn,
            off: addr,
        }),
        // prfm names no register
        (false, 3, 2) => {}
        (false, _, _) => ops.push(Op::Clobber(zr(rt))),
        (true, _, 0) | (true, 0, 2) => {
            ops.push(Op::StoreOther {
                base: rn,
                off: addr,
            });
            ops.push(Op::StoreOther {
                base: rn,
                off: addr + 8,
            });
        }
        (true, _, _) => {}
    }
    if let Some(d) = writeback {
        ops.push(Op::Add {
            rd: rn,
            rs: rn,
            add: d,
        });
    }
    ops
}
