//! The immediates of the RV64GC encodings that the decoders read (this crate's [`super::insn`]
//! and kern-profile-unwind's entry stubs), sign-extended.

/// The low `bits` of `v`, sign-extended.
pub fn sext(v: u32, bits: u32) -> i64 {
    (((v as u64) << (64 - bits)) as i64) >> (64 - bits)
}

/// I-type (`addi`, loads, `jalr`, CSR numbers aside).
pub fn i_imm(w: u32) -> i64 {
    (w as i32 >> 20) as i64
}

/// S-type (stores).
pub fn s_imm(w: u32) -> i64 {
    sext((w >> 25) << 5 | (w >> 7) & 31, 12)
}

/// B-type (conditional branches), relative to the branch.
pub fn b_imm(w: u32) -> i64 {
    let v = ((w >> 31) & 1) << 12
        | ((w >> 7) & 1) << 11
        | ((w >> 25) & 0x3f) << 5
        | ((w >> 8) & 0xf) << 1;
    sext(v, 13)
}

/// J-type (`jal`), relative to the jump.
pub fn j_imm(w: u32) -> i64 {
    let v = ((w >> 31) & 1) << 20
        | ((w >> 12) & 0xff) << 12
        | ((w >> 20) & 1) << 11
        | ((w >> 21) & 0x3ff) << 1;
    sext(v, 21)
}

/// `c.j`'s offset (of the 16-bit instruction `h`).
pub fn c_j_imm(h: u32) -> i64 {
    let bit = |i: u32| (h >> i) & 1;
    let v = bit(12) << 11
        | bit(11) << 4
        | ((h >> 9) & 3) << 8
        | bit(8) << 10
        | bit(7) << 6
        | bit(6) << 7
        | ((h >> 3) & 7) << 1
        | bit(2) << 5;
    sext(v, 12)
}

/// `c.beqz`'s and `c.bnez`'s offset.
pub fn c_b_imm(h: u32) -> i64 {
    let bit = |i: u32| (h >> i) & 1;
    let v = bit(12) << 8
        | ((h >> 10) & 3) << 3
        | ((h >> 5) & 3) << 6
        | ((h >> 3) & 3) << 1
        | bit(2) << 5;
    sext(v, 9)
}

/// `c.addi4spn`'s unsigned immediate (0: not the instruction).
pub fn c_addi4spn_imm(h: u32) -> u32 {
    ((h >> 7) & 0xf) << 6 | ((h >> 11) & 3) << 4 | ((h >> 5) & 1) << 3 | ((h >> 6) & 1) << 2
}
