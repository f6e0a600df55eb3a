//! Where a riscv64 or aarch64 function stands in making its frame record at one instruction,
//! and so whether the frame-pointer walk from there finds its caller.
//!
//! The walk from `fp` / `x29` starts with the return address of the function whose record
//! the frame pointer holds. A function without a record of its own (a leaf as GCC, clang and
//! rustc's `force-frame-pointers=non-leaf` leave it), or before its prologue has made it, or
//! after its epilogue has taken it down, runs with its caller's frame pointer: the walk then
//! starts at the caller's caller, and the caller is only in the return-address register
//! (`ra` / `x30`), which the recorder records with each sample.
//!
//! Two sources say where a function stands, both reduced to [`CfiFacts`]: the ELF's
//! call-frame information (one row per address range: how the CFA is computed and where `fp`
//! and `ra` are saved), and, without it, prologue analysis of the function's instructions
//! ([`crate::code::FunctionCode::facts_at`]). [`FrameState::from_facts`] decides.

/// What call-frame information (or prologue analysis) says at one instruction of a function,
/// with what the rest of the function's entry says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CfiFacts {
    /// The CFA is computed from the frame pointer: the function's record is at `fp`.
    pub cfa_on_fp: bool,
    /// The caller's frame pointer is saved on the stack here.
    pub fp_saved: bool,
    /// The return address is saved on the stack here (the register may be reused).
    pub ra_saved: bool,
    /// An earlier instruction of the function computed the CFA from the frame pointer: the
    /// record was made (and, when `cfa_on_fp` is false now, is being taken down).
    pub fp_cfa_before: bool,
    /// Somewhere the function computes the CFA from the frame pointer (it makes a record).
    pub fp_cfa_anywhere: bool,
    /// Somewhere the function saves its return address (it is no leaf).
    pub ra_saved_anywhere: bool,
}

/// Why the caller is in the return-address register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// A function that never saves its return address (no record, or one without it).
    Leaf,
    /// Before the function's record is made.
    Prologue,
    /// After the function's record is taken down.
    Epilogue,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Leaf, Phase::Prologue, Phase::Epilogue];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Leaf => "leaf",
            Phase::Prologue => "prologue",
            Phase::Epilogue => "epilogue",
        }
    }
}

/// What the walk from the frame pointer finds first, at one instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameState {
    /// The function's own record (with its return address) is at the frame pointer: the walk
    /// is complete.
    Framed,
    /// The walk misses the caller, whose return address is in the return-address register.
    InRegister(Phase),
    /// The walk misses the caller, and the return address was saved on the stack: the
    /// register holds it only until the function's first call (a function without a record).
    Saved,
}

impl FrameState {
    /// Decides from the facts at one instruction.
    pub fn from_facts(f: CfiFacts) -> Self {
        if f.cfa_on_fp {
            // A record without a return address (GCC's leaves save only fp) is no record
            // of the function's own for the walk.
            return if f.ra_saved_anywhere {
                FrameState::Framed
            } else {
                FrameState::InRegister(Phase::Leaf)
            };
        }
        if f.fp_cfa_before && f.fp_saved {
            // Epilogue: the CFA moved to sp, but fp still holds the record.
            return FrameState::Framed;
        }
        if !f.ra_saved_anywhere {
            return FrameState::InRegister(Phase::Leaf);
        }
        if !f.fp_cfa_before {
            // A function with a record makes no call before it has made it.
            return if f.fp_cfa_anywhere || !f.ra_saved {
                FrameState::InRegister(Phase::Prologue)
            } else {
                FrameState::Saved
            };
        }
        if f.ra_saved {
            FrameState::Saved
        } else {
            FrameState::InRegister(Phase::Epilogue)
        }
    }

    /// Whether the walk misses the caller here.
    pub fn misses_caller(self) -> bool {
        self != FrameState::Framed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NON_LEAF: CfiFacts = CfiFacts {
        cfa_on_fp: false,
        fp_saved: false,
        ra_saved: false,
        fp_cfa_before: false,
        fp_cfa_anywhere: true,
        ra_saved_anywhere: true,
    };

    #[test]
    fn a_framed_function_from_entry_to_return() {
        // riscv: addi sp,-16 | sd ra | sd s0 | addi s0,sp,16 | body | (epilogue CFI) ...
        let entry = NON_LEAF;
        assert_eq!(
            FrameState::from_facts(entry),
            FrameState::InRegister(Phase::Prologue)
        );
        let saved = CfiFacts {
            fp_saved: true,
            ra_saved: true,
            ..entry
        };
        assert_eq!(
            FrameState::from_facts(saved),
            FrameState::InRegister(Phase::Prologue)
        );
        let body = CfiFacts {
            cfa_on_fp: true,
            fp_cfa_before: true,
            ..saved
        };
        assert_eq!(FrameState::from_facts(body), FrameState::Framed);
        // ra reloaded, fp not yet: the record is still at fp.
        let ra_back = CfiFacts {
            ra_saved: false,
            ..body
        };
        assert_eq!(FrameState::from_facts(ra_back), FrameState::Framed);
        let cfa_on_sp = CfiFacts {
            cfa_on_fp: false,
            ..body
        };
        assert_eq!(FrameState::from_facts(cfa_on_sp), FrameState::Framed);
        let torn_down = CfiFacts {
            fp_saved: false,
            ra_saved: false,
            ..cfa_on_sp
        };
        assert_eq!(
            FrameState::from_facts(torn_down),
            FrameState::InRegister(Phase::Epilogue)
        );
        // fp reloaded before ra: the register still holds the last callee's return.
        let fp_first = CfiFacts {
            ra_saved: true,
            ..torn_down
        };
        assert_eq!(FrameState::from_facts(fp_first), FrameState::Saved);
    }

    #[test]
    fn leaves() {
        let leaf = CfiFacts::default();
        assert_eq!(
            FrameState::from_facts(leaf),
            FrameState::InRegister(Phase::Leaf)
        );
        // GCC 12's riscv leaf: a record at fp holding only the saved fp.
        let gcc = CfiFacts {
            cfa_on_fp: true,
            fp_saved: true,
            fp_cfa_before: true,
            fp_cfa_anywhere: true,
            ..leaf
        };
        assert_eq!(
            FrameState::from_facts(gcc),
            FrameState::InRegister(Phase::Leaf)
        );
    }

    #[test]
    fn a_function_without_a_record() {
        let f = CfiFacts {
            fp_cfa_anywhere: false,
            ..NON_LEAF
        };
        assert_eq!(
            FrameState::from_facts(f),
            FrameState::InRegister(Phase::Prologue)
        );
        let saved = CfiFacts {
            ra_saved: true,
            ..f
        };
        assert_eq!(FrameState::from_facts(saved), FrameState::Saved);
        assert!(FrameState::Saved.misses_caller());
        assert!(!FrameState::Framed.misses_caller());
    }
}
