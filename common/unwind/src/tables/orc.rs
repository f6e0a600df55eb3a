//! x86_64 Linux's ORC unwind tables (`.orc_unwind_ip`, `.orc_unwind`; Linux's
//! arch/x86/include/asm/orc_types.h), read once into a sorted table of entries.
//!
//! Each `.orc_unwind_ip` word is a signed 32-bit offset from its own address to the first
//! instruction an entry covers; an entry covers up to the next one's address. The 6-byte
//! entry says where the caller's stack pointer (`sp_reg + sp_offset`) and frame pointer
//! (`bp_reg + bp_offset`) are, and what kind of frame it is. Its last two bytes changed:
//! up to 6.2 `sp_reg:4, bp_reg:4, type:2, end:1` (CALL 0, REGS 1, REGS_PARTIAL 2; an
//! undefined `sp_reg` with `end` is the end of the stack); 6.3 put `signal:1` before `end`;
//! 6.4 (the first with `.orc_header`) has `type:3, signal:1` (UNDEFINED 0, END_OF_STACK 1,
//! CALL 2, REGS 3, REGS_PARTIAL 4).

use super::index::{self, BlockIndex, Key, Packed};
use super::stats::{EntryCounts, Refusal};
use super::text::TextRanges;
use super::TableError;

/// The registers an entry's `sp_reg` and `bp_reg` name.
pub mod reg {
    pub const UNDEFINED: u8 = 0;
    pub const PREV_SP: u8 = 1;
    pub const DX: u8 = 2;
    pub const DI: u8 = 3;
    pub const BP: u8 = 4;
    pub const SP: u8 = 5;
    pub const R10: u8 = 6;
    pub const R13: u8 = 7;
    pub const BP_INDIRECT: u8 = 8;
    pub const SP_INDIRECT: u8 = 9;
}

/// The entry layouts Linux has used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrcLayout {
    /// 4.14 to 6.2: `type:2, end:1`.
    Original,
    /// 6.3: `type:2, signal:1, end:1`.
    Signal,
    /// 6.4 on (with `.orc_header`): `type:3, signal:1`.
    Typed,
}

impl OrcLayout {
    /// The layout of `entries`: `Typed` when the image has an `.orc_header`, else `Signal`
    /// when some entry sets bit 3 of its flags byte (6.3's `end`; unused before), else
    /// `Original`.
    pub fn detect(has_orc_header: bool, entries: &[u8]) -> OrcLayout {
        if has_orc_header {
            OrcLayout::Typed
        } else if entries.chunks_exact(6).any(|e| e[5] & 0x8 != 0) {
            OrcLayout::Signal
        } else {
            OrcLayout::Original
        }
    }
}

/// What kind of frame an entry describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrcKind {
    /// No rule here (a gap between functions, or code objtool did not annotate).
    Undefined,
    /// The stack's real end: a kernel thread's first frame, the startup path.
    EndOfStack,
    /// A function's frame: the return address lies just below the caller's stack pointer.
    Call,
    /// Entry code with a whole `struct pt_regs` at the computed stack pointer.
    Regs,
    /// Entry code with only the hardware's interrupt frame (`ip, cs, flags, sp, ss`) there.
    RegsPartial,
}

/// One decoded entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OrcEntry {
    pub sp_offset: i16,
    pub bp_offset: i16,
    pub sp_reg: u8,
    pub bp_reg: u8,
    pub kind: OrcKind,
    /// 6.3 on: the frame's address is not a return address (look it up as is, not minus 1).
    pub signal: bool,
}

impl OrcEntry {
    /// Decodes a 6-byte entry laid out as `layout`.
    pub fn decode(b: &[u8; 6], layout: OrcLayout) -> OrcEntry {
        let sp_reg = b[4] & 0xf;
        let (kind, signal) = match layout {
            OrcLayout::Original | OrcLayout::Signal => {
                let end_bit = if layout == OrcLayout::Original {
                    0x4
                } else {
                    0x8
                };
                let kind = match (sp_reg, b[5] & 0x3) {
                    (reg::UNDEFINED, _) if b[5] & end_bit != 0 => OrcKind::EndOfStack,
                    (reg::UNDEFINED, _) => OrcKind::Undefined,
                    (_, 0) => OrcKind::Call,
                    (_, 1) => OrcKind::Regs,
                    (_, 2) => OrcKind::RegsPartial,
                    _ => OrcKind::Undefined,
                };
                (kind, layout == OrcLayout::Signal && b[5] & 0x4 != 0)
            }
            OrcLayout::Typed => {
                let kind = match b[5] & 0x7 {
                    1 => OrcKind::EndOfStack,
                    // A frame needs a stack pointer.
                    _ if sp_reg == reg::UNDEFINED => OrcKind::Undefined,
                    2 => OrcKind::Call,
                    3 => OrcKind::Regs,
                    4 => OrcKind::RegsPartial,
                    _ => OrcKind::Undefined,
                };
                (kind, b[5] & 0x8 != 0)
            }
        };
        OrcEntry {
            sp_offset: i16::from_le_bytes([b[0], b[1]]),
            bp_offset: i16::from_le_bytes([b[2], b[3]]),
            sp_reg,
            bp_reg: b[4] >> 4,
            kind,
            signal,
        }
    }
}

/// A vmlinux's ORC entries, sorted by address, with the index of where each block of code
/// starts among them (a block index, `index.rs`: Linux's `.orc_lookup` made here): a lookup counts a
/// few entries' addresses instead of searching them all.
#[derive(Debug, Clone)]
pub struct OrcTable {
    /// The lowest address an entry covers.
    base: u64,
    /// The highest entry's address: nothing beyond it is covered.
    last: u64,
    /// The first address each entry covers, as an offset from `base`, with the entry's id.
    index: BlockIndex<Packed>,
    /// The distinct entries (a few thousand in a vmlinux), by id.
    distinct: Vec<OrcEntry>,
    len: usize,
    pub layout: OrcLayout,
    /// The entries used and refused.
    stats: EntryCounts,
}

impl OrcTable {
    /// Reads the table from the contents of `.orc_unwind_ip` (loaded at `ip_addr`) and
    /// `.orc_unwind`, with at most `max_entries` entries, the kernel's text unknown.
    pub fn parse(
        ip_addr: u64,
        ips: &[u8],
        entries: &[u8],
        layout: OrcLayout,
        max_entries: usize,
    ) -> Result<OrcTable, TableError> {
        let text = TextRanges::unknown();
        Self::parse_in(ip_addr, ips, entries, layout, max_entries, &text)
    }

    /// As [`parse`](Self::parse), each entry checked: refused when its address is outside
    /// the kernel's `text`, or when it is a second real entry at one address (a "weak"
    /// terminator beside a real entry is how Linux ends a function before the next one).
    pub fn parse_in(
        ip_addr: u64,
        ips: &[u8],
        entries: &[u8],
        layout: OrcLayout,
        max_entries: usize,
        text: &TextRanges,
    ) -> Result<OrcTable, TableError> {
        let (rows, stats) = checked_rows(ip_addr, ips, entries, layout, max_entries, text)?;
        let (base, last) = match (rows.first(), rows.last()) {
            (Some(&(lo, _)), Some(&(hi, _))) => (lo, hi),
            _ => (0, 0),
        };
        if last - base > u32::MAX as u64 {
            return Err(TableError::OrcSpan {
                low: base,
                high: last,
            });
        }
        let (distinct, ids) = index::distinct(rows.iter().map(|&(_, e)| e));
        let keys = rows
            .iter()
            .zip(ids)
            .map(|(&(at, _), id)| Packed::new((at - base) as u32, id))
            .collect();
        Ok(OrcTable {
            base,
            last,
            index: BlockIndex::new(keys, Vec::new()),
            distinct,
            len: rows.len(),
            layout,
            stats,
        })
    }

    /// The counts of [`parse_in`](Self::parse_in), without the table.
    pub fn check(
        ip_addr: u64,
        ips: &[u8],
        entries: &[u8],
        layout: OrcLayout,
        text: &TextRanges,
    ) -> Result<EntryCounts, TableError> {
        checked_rows(ip_addr, ips, entries, layout, usize::MAX, text).map(|(_, stats)| stats)
    }

    /// The entries used and refused.
    pub fn stats(&self) -> EntryCounts {
        self.stats
    }

    /// How many entries the table holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none (every entry refused: [`OrcTable::parse`] refuses an empty
    /// table).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The addresses the table covers, first to last entry.
    pub fn span(&self) -> (u64, u64) {
        (self.base, self.last)
    }

    /// The entry covering `addr`, if any.
    #[inline(always)]
    pub fn find(&self, addr: u64) -> Option<OrcEntry> {
        if addr < self.base || addr > self.last || self.len == 0 {
            return None;
        }
        let id = self.index.get(Packed::probe((addr - self.base) as u32))?;
        self.distinct.get(id as usize).copied()
    }

    /// The first address each entry covers, in order.
    pub fn addresses(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().iter().map(|&k| self.base + k.to_u64())
    }

    /// The entry covering `addr` by a binary search over every entry, without the block
    /// index (tests check the index against it).
    pub fn find_by_search(&self, addr: u64) -> Option<OrcEntry> {
        if addr < self.base || addr > self.last || self.len == 0 {
            return None;
        }
        let id = self
            .index
            .get_by_search(Packed::probe((addr - self.base) as u32))?;
        self.distinct.get(id as usize).copied()
    }

    /// Bytes of memory the table holds.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes() + self.distinct.capacity() * std::mem::size_of::<OrcEntry>()
    }
}

/// The entries that pass the checks, sorted by address, and the counts.
fn checked_rows(
    ip_addr: u64,
    ips: &[u8],
    entries: &[u8],
    layout: OrcLayout,
    max_entries: usize,
    text: &TextRanges,
) -> Result<(Vec<(u64, OrcEntry)>, EntryCounts), TableError> {
    let n = ips.len() / 4;
    if !ips.len().is_multiple_of(4) || !entries.len().is_multiple_of(6) || entries.len() / 6 != n {
        return Err(TableError::OrcSizes {
            ips: ips.len(),
            entries: entries.len(),
        });
    }
    if n == 0 {
        return Err(TableError::OrcEmpty);
    }
    if n > max_entries {
        return Err(TableError::TooLarge {
            what: "ORC entries",
            count: n,
            cap: max_entries,
        });
    }
    let mut stats = EntryCounts::default();
    let mut rows: Vec<(u64, OrcEntry)> = Vec::with_capacity(n);
    for (i, (ip, e)) in ips.chunks_exact(4).zip(entries.chunks_exact(6)).enumerate() {
        let off = i32::from_le_bytes(ip.try_into().unwrap_or_default());
        let at = ip_addr
            .wrapping_add(4 * i as u64)
            .wrapping_add(off as i64 as u64);
        if !text.holds_address(at) {
            stats.refuse(Refusal::OutsideText);
            continue;
        }
        let e = e.try_into().unwrap_or(&[0; 6]);
        rows.push((at, OrcEntry::decode(e, layout)));
    }
    // As Linux sorts them: by address, the "weak" terminators (undefined) before a real
    // entry at the same address, so that the lookup's rightmost match is the real one. The
    // sort is stable: of two real entries at one address, the first in the table is kept.
    rows.sort_by_key(|&(at, e)| (at, e.kind != OrcKind::Undefined));
    let before = rows.len();
    rows.dedup_by(|next, kept| {
        next.0 == kept.0 && kept.1.kind != OrcKind::Undefined && next.1.kind != OrcKind::Undefined
    });
    for _ in rows.len()..before {
        stats.refuse(Refusal::Overlapping);
    }
    stats.used = rows.len() as u64;
    Ok((rows, stats))
}

#[cfg(test)]
pub(crate) mod tests;
