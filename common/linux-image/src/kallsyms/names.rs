//! `kallsyms_markers`, `kallsyms_seqs_of_names`, `kallsyms_names` and `kallsyms_num_syms`,
//! found backwards from the token table.

use super::{align_up, u32_at, word_at};

/// Largest encoded name the search for the names' start allows for: KSYM_NAME_LEN (512)
/// codes behind a two-byte length. (Decoding takes up to 0x3fff codes.)
const MAX_LIKELY_ENTRY: usize = 2 + 512;

/// The markers ending at `end` (exclusive), `size` bytes each: walking back, they decrease
/// to the 0 of the first name.
fn markers_before(data: &[u8], end: usize, size: usize) -> Option<(usize, Vec<u64>)> {
    let mut markers = Vec::new();
    let mut at = end;
    let mut prev = u64::MAX;
    loop {
        at = at.checked_sub(size)?;
        let value = word_at(data, at, size)?;
        if value >= prev || value > end as u64 {
            return None;
        }
        markers.push(value);
        prev = value;
        if value == 0 {
            markers.reverse();
            return Some((at, markers));
        }
    }
}

/// One encoded name at `at`: (the token codes, the offset of the next name).
pub(super) fn entry_at(data: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let first = *data.get(at)?;
    let (len, codes) = if first & 0x80 != 0 {
        let second = *data.get(at + 1)?;
        (
            (usize::from(first & 0x7f)) | (usize::from(second) << 7),
            at + 2,
        )
    } else {
        (usize::from(first), at + 1)
    };
    if len == 0 {
        return None;
    }
    Some((data.get(codes..codes + len)?, codes + len))
}

/// Skips `count` names from `at`: the offset after them.
fn skip_entries(data: &[u8], mut at: usize, count: usize) -> Option<usize> {
    for _ in 0..count {
        at = entry_at(data, at)?.1;
    }
    Some(at)
}

/// `kallsyms_names` and `kallsyms_num_syms` before the markers at `markers_start`: the
/// names' offset and the count, checked against every marker.
fn names_before(
    data: &[u8],
    markers_start: usize,
    markers: &[u64],
    ptr: usize,
) -> Option<(usize, u32)> {
    let last = usize::try_from(*markers.last()?).ok()?;
    let highest = markers_start.checked_sub(last + 2)? / ptr * ptr;
    let lowest = highest.saturating_sub(256 * MAX_LIKELY_ENTRY).max(ptr);
    let blocks = markers.len();
    (lowest..=highest).rev().step_by(ptr).find_map(|names| {
        let num = u32_at(data, names - ptr)?;
        let count = usize::try_from(num).ok()?;
        if count == 0 || count.div_ceil(256) != blocks {
            return None;
        }
        let end = skip_entries(data, names + last, count - 256 * (blocks - 1))?;
        if end > markers_start || markers_start - end >= ptr.max(4) + 4 {
            return None;
        }
        // Every marker must land on a name boundary.
        let mut at = names;
        for (block, &marker) in markers.iter().enumerate() {
            if at != names + usize::try_from(marker).ok()? {
                return None;
            }
            if block + 1 < blocks {
                at = skip_entries(data, at, 256)?;
            }
        }
        Some((names, num))
    })
}

/// The markers and names before the token table at `token_table`: (the markers' size and
/// offset, the names' offset, the number of symbols, and the offset of
/// `kallsyms_seqs_of_names` when it stands between the markers and the token table).
pub(super) fn markers_and_names(
    data: &[u8],
    token_table: usize,
    ptr: usize,
) -> Option<(usize, usize, usize, u32, Option<usize>)> {
    // Up to 6.1: the markers end where the token table's alignment padding starts.
    for marker_size in [4, ptr] {
        for end in [token_table, token_table.saturating_sub(4)] {
            if end % marker_size != 0 {
                continue;
            }
            let Some((start, markers)) = markers_before(data, end, marker_size) else {
                continue;
            };
            if let Some((names, num)) = names_before(data, start, &markers, ptr) {
                return Some((marker_size, start, names, num, None));
            }
        }
    }
    // 6.2 and 6.3 (and Debian's 6.1.y, which has the backport): `kallsyms_seqs_of_names`,
    // 3 bytes per symbol, between them. For k markers there are 256(k-1)+1 to 256k
    // symbols, which bounds where the seqs start.
    let max_blocks = (token_table / (3 * 256)).min(1 << 16);
    for blocks in 1..=max_blocks {
        let nearest = token_table.checked_sub(3 * (256 * (blocks - 1) + 1))? / ptr * ptr;
        let farthest = token_table.checked_sub(align_up(3 * 256 * blocks, ptr))?;
        for seqs in (farthest..=nearest).rev().step_by(ptr) {
            for marker_size in [4, ptr] {
                for end in [seqs, seqs.saturating_sub(4)] {
                    let Some(start) = end.checked_sub(marker_size * blocks) else {
                        continue;
                    };
                    if end % marker_size != 0 || word_at(data, start, marker_size) != Some(0) {
                        continue;
                    }
                    let Some((_, markers)) = markers_before(data, end, marker_size) else {
                        continue;
                    };
                    if markers.len() != blocks {
                        continue;
                    }
                    let Some((names, num)) = names_before(data, start, &markers, ptr) else {
                        continue;
                    };
                    if align_up(seqs + 3 * num as usize, ptr) == token_table {
                        return Some((marker_size, start, names, num, Some(seqs)));
                    }
                }
            }
        }
    }
    None
}
