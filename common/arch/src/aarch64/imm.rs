//! The branch offsets of the A64 encodings that the decoders read (this crate's
//! [`super::insn`] and kern-profile-unwind's entry stubs), in bytes from the branch.

/// The low `bits` of `v`, sign-extended.
pub fn sext(v: u32, bits: u32) -> i64 {
    (((v as u64) << (64 - bits)) as i64) >> (64 - bits)
}

/// `b`, `bl`: imm26.
pub fn imm26(w: u32) -> i64 {
    sext(w & 0x03ff_ffff, 26) * 4
}

/// `b.cond`, `cbz`, `cbnz`: imm19.
pub fn imm19(w: u32) -> i64 {
    sext((w >> 5) & 0x7_ffff, 19) * 4
}

/// `tbz`, `tbnz`: imm14.
pub fn imm14(w: u32) -> i64 {
    sext((w >> 5) & 0x3fff, 14) * 4
}
