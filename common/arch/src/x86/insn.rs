//! x86 (i386 and x86_64) instruction facts the frame-pointer walk depends on: which
//! instructions return, which call, and how far into a function its frame record may still be
//! missing. The plugin (kern-profile-unwind's `EntryState`) and the aggregator (its `[SP]`
//! fix for older recordings) both ask here, so that they agree.

/// How far into a function code may run before its `push ebp` (shrink-wrapped prologues run
/// an early-exit test first).
pub const PROLOGUE_WINDOW: u64 = 64;

/// Bytes needed to recognise every return [`is_ret`] knows.
pub const RET_BYTES: usize = 3;

/// `ret` (`c3`), `ret imm16` (`c2 iw`), `rep ret` (`f3 c3`, GCC's return for old AMD branch
/// predictors) or `bnd ret` (`f2 c3`, MPX builds) at the start of `code`: the return address
/// is at `[SP]`.
pub fn is_ret(code: &[u8]) -> bool {
    matches!(
        code,
        [0xc3, ..] | [0xc2, _, _, ..] | [0xf2 | 0xf3, 0xc3, ..]
    )
}

/// The target of a `call rel32` (`e8 id`) that ends right at `ret` (the 5 bytes before it in
/// `before`), or `None` when those bytes are no such call. On i386 the target wraps at 4 GiB:
/// compare it masked.
pub fn direct_call_target(before: &[u8], ret: u64) -> Option<u64> {
    match before {
        &[0xe8, a, b, c, d] => {
            Some(ret.wrapping_add(i32::from_le_bytes([a, b, c, d]) as i64 as u64))
        }
        _ => None,
    }
}

/// `FF /2`, `call r/m`, exactly filling `code` (ModRM, optional SIB and displacement): an
/// indirect call whose target the code does not tell. It is 2 to 7 bytes long.
pub fn is_indirect_call(code: &[u8]) -> bool {
    let [0xff, modrm, rest @ ..] = code else {
        return false;
    };
    if modrm & 0x38 != 0x10 {
        return false;
    }
    let (md, rm) = (modrm >> 6, modrm & 7);
    let sib = usize::from(md != 3 && rm == 4);
    let disp = match md {
        0 if rm == 5 => 4,
        0 => match rest.first() {
            // A SIB with base 5 and mod 0 takes a 32-bit displacement.
            Some(s) if sib == 1 && s & 7 == 5 => 4,
            _ => 0,
        },
        1 => 1,
        2 => 4,
        _ => 0,
    };
    rest.len() == sib + disp
}

/// The lengths an indirect call ([`is_indirect_call`]) may have.
pub const INDIRECT_CALL_LENGTHS: [usize; 6] = [2, 3, 4, 5, 6, 7];

/// Whether a call ends right at `ret`, given the code bytes `before` that end there:
/// `Some(Some(target))` for `call rel32` (the target masked to `width` bytes: an i386 target
/// wraps at 4 GiB), `Some(None)` for an indirect `call r/m`, `None` otherwise.
pub fn call_before(before: &[u8], ret: u64, width: u8) -> Option<Option<u64>> {
    let tail = |n: usize| before.len().checked_sub(n).map(|at| &before[at..]);
    if let Some(t) = tail(5).and_then(|b| direct_call_target(b, ret)) {
        let mask = if width == 4 { 0xffff_ffff } else { u64::MAX };
        return Some(Some(t & mask));
    }
    INDIRECT_CALL_LENGTHS
        .iter()
        .any(|&n| tail(n).is_some_and(is_indirect_call))
        .then_some(None)
}

/// [`crate::Guest::block_at`] for x86 code of `bitness` (32 or 64).
pub(crate) fn block_at(bitness: u32, start: u64, bytes: &[u8], out: &mut Vec<u64>) {
    use iced_x86::{Code, Decoder, DecoderOptions, FlowControl};
    out.clear();
    let mut d = Decoder::with_ip(bitness, bytes, start, DecoderOptions::NONE);
    while d.can_decode() {
        let i = d.decode();
        // Invalid bytes, or an instruction cut off at the end of `bytes`.
        if i.code() == Code::INVALID {
            break;
        }
        out.push(i.ip());
        if i.flow_control() != FlowControl::Next {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns() {
        assert!(is_ret(&[0xc3]));
        assert!(is_ret(&[0xc2, 4, 0]));
        assert!(is_ret(&[0xf3, 0xc3]));
        assert!(is_ret(&[0xf2, 0xc3]));
        // A cut `ret imm16`, a lone prefix, a push, nothing.
        assert!(!is_ret(&[0xc2, 4]));
        assert!(!is_ret(&[0xf3]));
        assert!(!is_ret(&[0x55, 0x89]));
        assert!(!is_ret(&[]));
    }

    #[test]
    fn direct_calls() {
        // call +0x10 ending at 0x1005: target 0x1015; backwards wraps.
        assert_eq!(
            direct_call_target(&[0xe8, 0x10, 0, 0, 0], 0x1005),
            Some(0x1015)
        );
        assert_eq!(
            direct_call_target(&[0xe8, 0xf0, 0xff, 0xff, 0xff], 0x1005),
            Some(0xff5)
        );
        assert_eq!(direct_call_target(&[0xe9, 0, 0, 0, 0], 0x1005), None);
        assert_eq!(direct_call_target(&[0xe8, 0, 0], 0x1005), None);
    }

    #[test]
    fn indirect_calls() {
        assert!(is_indirect_call(&[0xff, 0xd0])); // call eax
        assert!(is_indirect_call(&[0xff, 0x10])); // call [eax]
        assert!(is_indirect_call(&[0xff, 0x50, 0x08])); // call [eax+8]
        assert!(is_indirect_call(&[0xff, 0x15, 1, 2, 3, 4])); // call [disp32]
        assert!(is_indirect_call(&[0xff, 0x14, 0x85, 1, 2, 3, 4])); // call [eax*4+disp32]
        assert!(is_indirect_call(&[0xff, 0x54, 0x24, 0x04])); // call [esp+4]
        assert!(!is_indirect_call(&[0xff, 0xe0])); // jmp eax
        assert!(!is_indirect_call(&[0xff, 0x50])); // displacement missing
        assert!(!is_indirect_call(&[0xe8, 0, 0, 0, 0]));
    }

    #[test]
    fn calls_before_a_return_address() {
        // call rel32 to 0x1000 + 5 - 0x10, masked on i386; call eax; no call.
        let direct = [0x90, 0x90, 0x90, 0xe8, 0xf0, 0xff, 0xff, 0xff];
        assert_eq!(call_before(&direct, 0x1005, 8), Some(Some(0xff5)));
        let wrap = [0xe8, 0x00, 0x00, 0x00, 0x80];
        assert_eq!(call_before(&wrap, 0x10, 4), Some(Some(0x8000_0010)));
        assert_eq!(call_before(&[0x90, 0xff, 0xd0], 0x2003, 4), Some(None));
        assert_eq!(call_before(&[0x90, 0x90], 0x2002, 4), None);
        assert_eq!(call_before(&[], 0x2002, 4), None);
    }
}
