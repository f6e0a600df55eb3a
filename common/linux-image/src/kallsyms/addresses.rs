//! `kallsyms_addresses` or `kallsyms_offsets` and `kallsyms_relative_base`, and the
//! relocation that fills the base of a relocatable raw Image.

use super::{align_up, u32_at, word_at, AddressEncoding};

/// Relocations that could be the base's, beyond which the base is called ambiguous.
const MAX_BASE_CANDIDATES: usize = 64;

/// R_AARCH64_RELATIVE and R_RISCV_RELATIVE, the `r_info` of a relocatable Image's RELA
/// entries (24 bytes: offset, info, addend) that add the load address.
const RELATIVE_RELOCATIONS: [u64; 2] = [1027, 3];

/// The relocation of the pointer at file offset `at`: (the link address of offset 0, the
/// pointer's value), given the addresses decoded relative to 0. Its `r_offset` is the link
/// address of `at`; the image's link address is 2 MiB aligned (arm64's KIMAGE_VADDR,
/// riscv64's KERNEL_LINK_ADDR) and the value points into the image. When several entries
/// fit, the one under which most symbols are the target of some relocation (function
/// pointers in tables) wins.
pub(super) fn relocated_base(data: &[u8], at: usize, offsets: &[u64]) -> Option<(u64, u64)> {
    for kind in RELATIVE_RELOCATIONS {
        let mut candidates = Vec::new();
        let mut targets = std::collections::HashSet::new();
        for hit in memchr::memmem::find_iter(data, &kind.to_le_bytes()) {
            if hit % 8 != 0 || hit < 8 {
                continue;
            }
            let (Some(offset), Some(addend)) =
                (word_at(data, hit - 8, 8), word_at(data, hit + 8, 8))
            else {
                continue;
            };
            targets.insert(addend);
            let base = offset.wrapping_sub(at as u64);
            if base % 0x20_0000 == 0 && addend >= base && addend - base < data.len() as u64 {
                candidates.push((base, addend));
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        // Scoring is a pass over the symbols per candidate: a hostile image gets few.
        if candidates.len() > MAX_BASE_CANDIDATES {
            return None;
        }
        let score = |&(_, value): &(u64, u64)| {
            offsets
                .iter()
                .filter(|&&o| targets.contains(&value.wrapping_add(o)))
                .count()
        };
        if let Some(best) = candidates.iter().max_by_key(|c| score(c)) {
            return (score(best) > 0).then_some(*best);
        }
    }
    None
}

/// Decodes the addresses stored at `at` in the way `encoding` says; None unless they are
/// sorted, as scripts/kallsyms.c writes them.
pub(super) fn addresses_at(
    data: &[u8],
    at: usize,
    count: usize,
    ptr: usize,
    encoding: AddressEncoding,
) -> Option<(Vec<u64>, Option<usize>)> {
    let mut out = Vec::with_capacity(count);
    let relative_base = match encoding {
        AddressEncoding::Absolute => {
            data.get(at..at.checked_add(count.checked_mul(ptr)?)?)?;
            None
        }
        _ => {
            let base_at = align_up(at + 4 * count, ptr);
            Some((base_at, word_at(data, base_at, ptr)?))
        }
    };
    let mask = if ptr == 4 {
        u64::from(u32::MAX)
    } else {
        u64::MAX
    };
    // scripts/kallsyms.c takes the lowest relative address for the base: its offset is 0
    // (-1 counting down). That tells offsets from absolute 32-bit addresses.
    let lowest = match encoding {
        AddressEncoding::Absolute => None,
        AddressEncoding::Relative => Some(0),
        AddressEncoding::RelativeAbsolutePercpu => Some(u32::MAX),
    };
    if let Some(lowest) = lowest {
        let first_relative = (0..count)
            .map(|i| u32_at(data, at + 4 * i))
            .find(|o| encoding == AddressEncoding::Relative || o.is_none_or(|o| (o as i32) < 0));
        if first_relative != Some(Some(lowest)) {
            return None;
        }
    }
    for i in 0..count {
        let address = match (encoding, relative_base) {
            (AddressEncoding::Absolute, _) => word_at(data, at + ptr * i, ptr)?,
            (AddressEncoding::Relative, Some((_, base))) => {
                base.wrapping_add(u64::from(u32_at(data, at + 4 * i)?)) & mask
            }
            (_, Some((_, base))) => {
                let offset = u32_at(data, at + 4 * i)? as i32;
                if offset >= 0 {
                    offset as u64
                } else {
                    base.wrapping_sub(1).wrapping_sub(i64::from(offset) as u64) & mask
                }
            }
            (_, None) => unreachable!("relative encodings have a base"),
        };
        if out.last().is_some_and(|&prev| address < prev) {
            return None;
        }
        out.push(address);
    }
    Some((out, relative_base.map(|(at, _)| at)))
}
