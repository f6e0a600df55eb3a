//! `.debug_frame` as FreePascal writes it (3.2, x86_64): FDEs in the 32-bit DWARF format
//! (an initial length below 0xffff_fff0) whose CIE pointer takes 8 bytes, as it would in
//! the 64-bit format. Read as DWARF says, the CIE pointer's high half (zero) becomes the low
//! half of the initial location and every field after it moves by 4 bytes: a function at
//! `A` of `N` bytes reads as covering `A << 32 .. (A + N) << 32` (`0 .. 0x27_0000_0000` for
//! one the linker discarded), over the whole kernel when it is linked low, and its
//! instructions start with the range's high half (four `DW_CFA_nop`).
//!
//! Each FDE is read both ways: where the standard reading lies outside the kernel's text and
//! the wide one inside it, it is rewritten in the standard layout, the same length (the 4
//! zero bytes move to the end, as `DW_CFA_nop` padding, so that no offset changes). Others
//! are left to the checks, which refuse them if no reading fits.

use std::borrow::Cow;

use gimli::{Endianity, RunTimeEndian};

use crate::tables::text::TextRanges;

/// `data` (a `.debug_frame` of `address_size`-byte pointers) with FreePascal's FDEs in the
/// standard layout, and how many were; `data` as it is when none is or the text is unknown.
pub fn standard_layout<'a>(
    data: &'a [u8],
    endian: RunTimeEndian,
    address_size: u8,
    text: &TextRanges,
) -> (Cow<'a, [u8]>, u64) {
    let a = usize::from(address_size);
    if !text.is_known() || !(a == 4 || a == 8) {
        return (Cow::Borrowed(data), 0);
    }
    let u32_at = |at: usize| data.get(at..at + 4).map(|b| endian.read_u32(b));
    let addr_at = |at: usize| match a {
        4 => u32_at(at).map(u64::from),
        _ => data.get(at..at + 8).map(|b| endian.read_u64(b)),
    };
    let inside = |start: Option<u64>, len: Option<u64>| match (start, len) {
        (Some(s), Some(n)) => n > 0 && s.checked_add(n).is_some_and(|e| text.holds(s, e)),
        _ => false,
    };
    let mut out: Option<Vec<u8>> = None;
    let mut wide = 0;
    let mut at = 0usize;
    while let Some(length) = u32_at(at) {
        // The 64-bit format has 8-byte CIE pointers by right; reserved lengths end the
        // section as they end gimli's reading.
        let (body, len) = match length {
            0xffff_ffff => match data.get(at + 4..at + 12) {
                Some(b) => (at + 12, endian.read_u64(b)),
                None => break,
            },
            0xffff_fff0.. => break,
            n => (at + 4, u64::from(n)),
        };
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|n| body.checked_add(n))
            .filter(|&e| e <= data.len())
        else {
            break;
        };
        let fde = length != 0xffff_ffff && len > 0 && u32_at(body) != Some(u32::MAX);
        // [length][CIE pointer, low][high: 0][start][range][instructions]
        if fde && end - body >= 8 + 2 * a && u32_at(body + 4) == Some(0) {
            let standard = inside(addr_at(body + 4), addr_at(body + 4 + a));
            if !standard && inside(addr_at(body + 8), addr_at(body + 8 + a)) {
                let o = out.get_or_insert_with(|| data.to_vec());
                o.copy_within(body + 8..end, body + 4);
                o[end - 4..end].fill(0);
                wide += 1;
            }
        }
        at = end;
    }
    match out {
        Some(o) => (Cow::Owned(o), wide),
        None => (Cow::Borrowed(data), 0),
    }
}
