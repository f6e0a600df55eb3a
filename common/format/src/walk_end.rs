//! How a stack's walk ended, as a sample's stop byte keeps it: the reason in bits 0-3, the
//! walker that ran last in bits 4-6 (0: not recorded), and in bit 7 whether the walk crossed
//! an entry from user space into the program that made the call. Older recorders wrote the
//! reason alone (bytes 0 to 7), which reads the same: no walker recorded, no crossing.
//!
//! The reason alone misleads: Linux walked by ORC ends most walks at an entry from user space
//! and then in the program's frameless code ("frame pointer not increasing"), although the
//! kernel's stack was whole; ORC's end of stack is no "null frame pointer". [`WalkEnd`] tells
//! whole stacks from cut ones, and names each end for the walker that met it.

use std::borrow::Cow;
use std::fmt;

use crate::stop_reason::StopReason;

/// Which rule found the last frame of a walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Walker {
    /// Frame records (frame pointers), with the crossings they allow.
    FramePointers = 1,
    /// Linux's ORC tables.
    Orc = 2,
    /// DWARF call-frame information (`.eh_frame`, `.debug_frame`).
    Cfi = 3,
}

impl Walker {
    pub fn from_code(c: u8) -> Option<Walker> {
        match c {
            1 => Some(Walker::FramePointers),
            2 => Some(Walker::Orc),
            3 => Some(Walker::Cfi),
            _ => None,
        }
    }

    /// `frame pointers`, `ORC`, `CFI`.
    pub fn name(self) -> &'static str {
        match self {
            Walker::FramePointers => "frame pointers",
            Walker::Orc => "ORC",
            Walker::Cfi => "CFI",
        }
    }
}

const REASON_MASK: u8 = 0x0f;
const WALKER_SHIFT: u32 = 4;
const WALKER_MASK: u8 = 0x7;
const FROM_USER: u8 = 0x80;

/// A walk's end: why it stopped, which walker stopped, and whether it had crossed into the
/// user program that entered the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WalkEnd {
    /// The reason's byte (one this version may not know: a newer recorder's).
    reason: u8,
    /// The walker's code; 0 when not recorded.
    walker: u8,
    from_user: bool,
}

/// Whether a stack is whole, and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// A thread's first frame (a null frame pointer or return address, ORC's end of stack,
    /// CFI's undefined return address, a program's fake exec return).
    Root,
    /// Crossed an entry from user space: the kernel's part is whole, and the program's
    /// frames follow as far as its own walk went.
    FromUser,
    /// Cut short: the end's name says why.
    Cut,
}

impl WalkEnd {
    /// An end met by `walker`.
    pub fn new(reason: StopReason, walker: Walker, from_user: bool) -> Self {
        WalkEnd {
            reason: reason as u8,
            walker: walker as u8,
            from_user,
        }
    }

    /// The end a stop byte says.
    pub fn of_byte(b: u8) -> Self {
        WalkEnd {
            reason: b & REASON_MASK,
            walker: (b >> WALKER_SHIFT) & WALKER_MASK,
            from_user: b & FROM_USER != 0,
        }
    }

    /// The byte a file stores.
    pub fn byte(self) -> u8 {
        (self.reason & REASON_MASK)
            | (self.walker & WALKER_MASK) << WALKER_SHIFT
            | if self.from_user { FROM_USER } else { 0 }
    }

    /// The reason's byte, known to this version or not.
    pub fn reason_byte(self) -> u8 {
        self.reason
    }

    pub fn reason(self) -> Option<StopReason> {
        StopReason::from_u8(self.reason)
    }

    /// The walker, when the recording says.
    pub fn walker(self) -> Option<Walker> {
        Walker::from_code(self.walker)
    }

    pub fn from_user(self) -> bool {
        self.from_user
    }

    /// The same walker and crossing, another reason.
    pub fn with_reason(self, r: StopReason) -> Self {
        WalkEnd {
            reason: r as u8,
            ..self
        }
    }

    /// Whole or cut.
    pub fn outcome(self) -> Outcome {
        if self.from_user {
            return Outcome::FromUser;
        }
        match self.reason() {
            Some(StopReason::NullFramePointer | StopReason::NullReturnAddress) => Outcome::Root,
            _ => Outcome::Cut,
        }
    }

    /// The end in words: the reason as the walker meets it (`ORC end of stack`, `CFI: stack
    /// pointer not increasing`), then where (`, in the program past an entry from user space`).
    pub fn name(self) -> Cow<'static, str> {
        let reason = match (self.walker(), self.reason()) {
            (_, None) => return Cow::Owned(format!("reason {}", self.reason)),
            (Some(Walker::Orc), Some(StopReason::NullFramePointer)) => "ORC end of stack",
            (Some(Walker::Cfi), Some(StopReason::NullReturnAddress)) => {
                "CFI end of stack (return address undefined)"
            }
            (Some(w @ (Walker::Orc | Walker::Cfi)), Some(r)) => {
                let what = match r {
                    StopReason::NotIncreasing => "stack pointer not increasing",
                    StopReason::OffStack => "stack pointer off the stack",
                    StopReason::NullFramePointer => "null frame pointer",
                    r => r.name(),
                };
                return self.placed(Cow::Owned(format!("{}: {what}", w.name())));
            }
            (_, Some(r)) => r.name(),
        };
        self.placed(Cow::Borrowed(reason))
    }

    fn placed(self, reason: Cow<'static, str>) -> Cow<'static, str> {
        match self.from_user {
            true => Cow::Owned(format!(
                "{reason}, in the program past an entry from user space"
            )),
            false => reason,
        }
    }
}

impl From<StopReason> for WalkEnd {
    /// A reason whose walker is not recorded (an older recorder's).
    fn from(r: StopReason) -> Self {
        WalkEnd {
            reason: r as u8,
            walker: 0,
            from_user: false,
        }
    }
}

impl fmt::Display for WalkEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_old_files_keep_their_reason() {
        for r in StopReason::ALL {
            for w in [Walker::FramePointers, Walker::Orc, Walker::Cfi] {
                for u in [false, true] {
                    let e = WalkEnd::new(r, w, u);
                    assert_eq!(WalkEnd::of_byte(e.byte()), e);
                    assert!(e.byte() < 255, "a statistics record counts bytes below 255");
                }
            }
            let old = WalkEnd::of_byte(r as u8);
            assert_eq!(old, WalkEnd::from(r));
            assert_eq!(old.name(), r.name());
            assert_eq!(old.walker(), None);
        }
        assert_eq!(WalkEnd::of_byte(9).name(), "reason 9");
    }

    #[test]
    fn whole_and_cut() {
        use StopReason::*;
        let fp = |r| WalkEnd::new(r, Walker::FramePointers, false);
        assert_eq!(fp(NullFramePointer).outcome(), Outcome::Root);
        assert_eq!(fp(NotIncreasing).outcome(), Outcome::Cut);
        let orc = WalkEnd::new(NullFramePointer, Walker::Orc, false);
        assert_eq!(orc.outcome(), Outcome::Root);
        assert_eq!(orc.name(), "ORC end of stack");
        let user = WalkEnd::new(NotIncreasing, Walker::FramePointers, true);
        assert_eq!(user.outcome(), Outcome::FromUser);
        assert_eq!(
            user.name(),
            "frame pointer not increasing, in the program past an entry from user space"
        );
        assert_eq!(
            WalkEnd::new(NotIncreasing, Walker::Cfi, false).name(),
            "CFI: stack pointer not increasing"
        );
    }
}
