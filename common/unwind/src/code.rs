//! What the instructions of a riscv64 or aarch64 function do to its frame record and to the
//! flow of control, decoded from its bytes: enough for prologue analysis (where the record is
//! made and taken down, [`FunctionCode::facts_at`]), to tell where QEMU may have started the
//! block holding a PC ([`FunctionCode::block_starts`]: the plugin reads the registers at the
//! block's entry), and whether a value is a return address ([`call_before`]).
//!
//! Each architecture's encodings are in its folder of kern-profile-arch (`riscv64::insn`,
//! `aarch64::insn`).

use kern_profile_arch::{guest, Arch};

pub use kern_profile_arch::insn::{Effects, Flow, Insn};

use crate::frame_state::CfiFacts;

/// A function's instructions, decoded once.
#[derive(Debug, Clone)]
pub struct FunctionCode {
    start: u64,
    insns: Vec<Insn>,
    /// Targets of the function's jumps inside it, sorted.
    targets: Vec<u64>,
    sets_fp: bool,
    saves_ra: bool,
}

impl FunctionCode {
    /// Decodes the function of an `arch` guest whose `bytes` start at `start`, up to the first
    /// bytes that are no instruction. `None` for x86, whose instructions are not decoded.
    pub fn new(arch: Arch, start: u64, bytes: &[u8]) -> Option<Self> {
        let insns = guest(arch).decode(start, bytes)?;
        let end = insns.last().map_or(start, Insn::end);
        let mut targets: Vec<u64> = insns
            .iter()
            .filter_map(|i| match i.flow {
                Flow::Jump(Some(t)) if (start..end).contains(&t) => Some(t),
                _ => None,
            })
            .collect();
        targets.sort_unstable();
        targets.dedup();
        let any = |e| insns.iter().any(|i| i.effects.contains(e));
        Some(FunctionCode {
            start,
            sets_fp: any(Effects::SETS_FP),
            saves_ra: any(Effects::SAVES_RA),
            insns,
            targets,
        })
    }

    /// The decoded instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Where QEMU may have started the block that holds `pc`: right after the last control
    /// transfer before `pc` (or at the function's start), or at a jump target between there
    /// and `pc`. Ascending; the first is where straight-line code from before reaches `pc`.
    pub fn block_starts(&self, pc: u64) -> Vec<u64> {
        let before = self.insns.partition_point(|i| i.addr < pc);
        let run_start = self.insns[..before]
            .iter()
            .rev()
            .find(|i| i.flow != Flow::Next)
            .map_or(self.start, Insn::end);
        let mut starts = vec![run_start];
        let from = self.targets.partition_point(|&t| t <= run_start);
        starts.extend(self.targets[from..].iter().take_while(|&&t| t <= pc));
        starts
    }

    /// Prologue analysis: what the instructions before `addr` did to the frame record, as
    /// call-frame information would say it. Code after a return belongs to another path,
    /// where the record is still up.
    pub fn facts_at(&self, addr: u64) -> CfiFacts {
        let mut f = CfiFacts {
            fp_cfa_anywhere: self.sets_fp,
            ra_saved_anywhere: self.saves_ra,
            ..CfiFacts::default()
        };
        // The facts before the current path's epilogue began.
        let mut body: Option<CfiFacts> = None;
        for i in self.insns.iter().take_while(|i| i.addr < addr) {
            let e = i.effects;
            if body.is_none()
                && (e.contains(Effects::RESTORES_FP) || e.contains(Effects::RESTORES_RA))
            {
                body = Some(f);
            }
            if e.contains(Effects::SAVES_FP) {
                f.fp_saved = true;
            }
            if e.contains(Effects::SAVES_RA) {
                f.ra_saved = true;
            }
            if e.contains(Effects::SETS_FP) {
                f.cfa_on_fp = true;
                f.fp_cfa_before = true;
            }
            if e.contains(Effects::RESTORES_FP) {
                f.cfa_on_fp = false;
                f.fp_saved = false;
            }
            if e.contains(Effects::RESTORES_RA) {
                f.ra_saved = false;
            }
            if i.flow == Flow::Return {
                if let Some(b) = body.take() {
                    f = b;
                }
            }
        }
        f
    }
}

/// Whether a call instruction ends right at `ret`, given `before`, the (up to 8) code bytes
/// that end there: `Some(target)` when one does (`target` when the code tells it), `None`
/// when `ret` is no return address. x86 is [`crate::x86`]'s.
pub fn call_before(arch: Arch, before: &[u8], ret: u64) -> Option<Option<u64>> {
    guest(arch).call_before(before, ret)
}

/// Whether `insn`, an instruction's first bytes, returns from a function (x86: [`crate::x86`]'s
/// `ret` forms; riscv64: `jalr x0, 0(ra)` and `c.jr ra`; aarch64: `ret` and its authenticating
/// forms). The plugin's `window=` closes its window there.
pub fn is_return(arch: Arch, insn: &[u8]) -> bool {
    guest(arch).is_return(insn)
}

/// How many code bytes before a return address [`call_before`] looks at.
pub const CALL_LOOKBEHIND: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_by_architecture() {
        assert!(is_return(Arch::I386, &[0xC3]));
        assert!(is_return(Arch::X86_64, &[0xF3, 0xC3]));
        assert!(is_return(Arch::I386, &[0xC2, 0x04, 0x00]));
        assert!(!is_return(Arch::I386, &[0x55]));
        assert!(!is_return(Arch::I386, &[]));
        assert!(is_return(Arch::Riscv64, &[0x82, 0x80]));
        assert!(is_return(Arch::Riscv64, &[0x67, 0x80, 0x00, 0x00]));
        assert!(
            !is_return(Arch::Riscv64, &[0x67, 0x80, 0x10, 0x00]),
            "jalr 1(ra)"
        );
        assert!(!is_return(Arch::Riscv64, &[0x82]), "half an instruction");
        assert!(is_return(Arch::Aarch64, &0xD65F_03C0u32.to_le_bytes()));
        assert!(
            is_return(Arch::Aarch64, &0xD65F_0BFFu32.to_le_bytes()),
            "retaa"
        );
        assert!(
            !is_return(Arch::Aarch64, &0xD61F_0200u32.to_le_bytes()),
            "br x16"
        );
    }
    use crate::frame_state::{FrameState, Phase};

    /// rustc's `recurse` (examples/kernel-riscv64) at 0x80000200: prologue, a loop, a
    /// conditional recursive call, epilogue.
    const RECURSE: [u32; 30] = [
        0x1101, 0xec06, 0xe822, 0xe426, 0x1000, 0x19000613, 0x2601, 0x84ae, 0xce19, 0x4581,
        0x7f4a86b7, 0xc1568693, 0x0034d71b, 0x8cad, 0x8f25, 0x2585, 0x00d704bb, 0xfeb619e3, 0xc901,
        0x357d, 0x85a6, 0x00000097, 0xfca080e7, 0x8ca9, 0x8526, 0x60e2, 0x6442, 0x64a2, 0x6105,
        0x8082,
    ];

    fn riscv(words: &[u32]) -> Vec<u8> {
        let mut b = Vec::new();
        for &w in words {
            match w & 3 {
                3 => b.extend_from_slice(&w.to_le_bytes()),
                _ => b.extend_from_slice(&(w as u16).to_le_bytes()),
            }
        }
        b
    }

    fn state(f: &FunctionCode, at: u64) -> FrameState {
        FrameState::from_facts(f.facts_at(at))
    }

    #[test]
    fn riscv_blocks_and_prologue_analysis() {
        let f = FunctionCode::new(Arch::Riscv64, 0x8000_0200, &riscv(&RECURSE)).unwrap();
        assert_eq!(f.insns().len(), 30);
        // The entry block runs to the first branch; after `addi s0` the code still runs with
        // the registers of the block's entry.
        assert_eq!(f.block_starts(0x8000_020a), [0x8000_0200]);
        assert_eq!(f.block_starts(0x8000_0212), [0x8000_0200]);
        // In the loop: after the branch, or at the loop head.
        assert_eq!(f.block_starts(0x8000_0228), [0x8000_0214, 0x8000_021e]);
        // After the recursive call, or at the epilogue the early exit jumps to.
        assert_eq!(f.block_starts(0x8000_0244), [0x8000_023e, 0x8000_0240]);
        assert_eq!(
            state(&f, 0x8000_0200),
            FrameState::InRegister(Phase::Prologue)
        );
        assert_eq!(
            state(&f, 0x8000_0208),
            FrameState::InRegister(Phase::Prologue)
        );
        assert_eq!(state(&f, 0x8000_020a), FrameState::Framed);
        assert_eq!(state(&f, 0x8000_023e), FrameState::Framed);
        // ld ra done, ld s0 not yet: the record is still at fp.
        assert_eq!(state(&f, 0x8000_0244), FrameState::Framed);
        assert_eq!(
            state(&f, 0x8000_0246),
            FrameState::InRegister(Phase::Epilogue)
        );
    }

    #[test]
    fn riscv_leaf() {
        // hot_leaf's head: lui; addiw; sext.w; beqz; li; ...; ret.
        let f = FunctionCode::new(
            Arch::Riscv64,
            0x8000_01aa,
            &riscv(&[0x6589, 0x7105859b, 0x2581, 0xc18d, 0x4601, 0x8082]),
        )
        .unwrap();
        for at in [0x8000_01aa, 0x8000_01b2, 0x8000_01b4] {
            assert_eq!(state(&f, at), FrameState::InRegister(Phase::Leaf));
        }
    }

    #[test]
    fn aarch64_code_after_an_early_return_has_its_record() {
        let words: [u32; 9] = [
            0xa9bf7bfd, // 0x00 stp x29, x30, [sp, #-16]!
            0x910003fd, // 0x04 mov x29, sp
            0x34000080, // 0x08 cbz w0, 0x18
            0x9400003d, // 0x0c bl 0x100
            0xa8c17bfd, // 0x10 ldp x29, x30, [sp], #16
            0xd65f03c0, // 0x14 ret
            0x52800020, // 0x18 mov w0, #1
            0xa8c17bfd, // 0x1c ldp x29, x30, [sp], #16
            0xd65f03c0, // 0x20 ret
        ];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let f = FunctionCode::new(Arch::Aarch64, 0, &bytes).unwrap();
        assert_eq!(state(&f, 0x00), FrameState::InRegister(Phase::Prologue));
        assert_eq!(state(&f, 0x04), FrameState::InRegister(Phase::Prologue));
        assert_eq!(state(&f, 0x08), FrameState::Framed);
        assert_eq!(state(&f, 0x14), FrameState::InRegister(Phase::Epilogue));
        assert_eq!(state(&f, 0x18), FrameState::Framed);
        assert_eq!(state(&f, 0x20), FrameState::InRegister(Phase::Epilogue));
        assert_eq!(f.block_starts(0x08), [0x00]);
        assert_eq!(f.block_starts(0x0c), [0x0c]);
        assert_eq!(f.block_starts(0x1c), [0x18]);
        assert_eq!(
            call_before(Arch::Aarch64, &bytes[8..16], 0x10),
            Some(Some(0x100))
        );
        assert!(FunctionCode::new(Arch::I386, 0, &[0x55]).is_none());
    }
}
