//! ORC tables (x86_64 Linux): `OrcTable::parse` over an input cut into `.orc_unwind_ip` and
//! `.orc_unwind` (its first byte picks the entry layout), then lookups and table walks over
//! a fake stack made of the input itself: whatever the table says, a walk ends within its
//! depth.

use std::hint::black_box;

use kern_profile_format::Arch;
use kern_profile_unwind::tables::{OrcLayout, OrcTable, TextRanges};
use kern_profile_unwind::{walk_tables, Crossings, UnwindTables};

use super::unwind_cfi::{fake_memory, starts};

/// Where the table's `.orc_unwind_ip` is loaded: its offsets lead around here.
const IP_ADDR: u64 = 0xffff_ffff_8200_0000;

/// One input through the target.
pub fn run(data: &[u8]) {
    crate::bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let layout = match pick % 3 {
        0 => OrcLayout::Original,
        1 => OrcLayout::Signal,
        _ => OrcLayout::Typed,
    };
    let n = rest.len() / 10;
    let (ips, entries) = rest.split_at(4 * n);
    // Checked against a text around IP_ADDR too: entries refused, perhaps all.
    let text = TextRanges::new([(IP_ADDR - (1 << 30), IP_ADDR + (1 << 20))]);
    if let Ok(t) = OrcTable::parse_in(IP_ADDR, ips, &entries[..6 * n], layout, 1 << 16, &text) {
        black_box((t.stats().to_string(), t.find(IP_ADDR), t.span()));
    }
    let orc = match OrcTable::parse(IP_ADDR, ips, &entries[..6 * n], layout, 1 << 16) {
        Ok(t) => t,
        Err(e) => {
            black_box(e.to_string());
            return;
        }
    };
    let (low, high) = orc.span();
    for a in [
        low,
        high,
        low.wrapping_sub(1),
        high.wrapping_add(1),
        low / 2 + high / 2,
    ] {
        black_box(orc.find(a));
    }
    let tables = UnwindTables {
        arch: Arch::X86_64,
        orc: Some(orc),
        cfi: None,
        stubs: Default::default(),
        user: Default::default(),
    };
    walk_all(&tables, data, low, high);
}

/// Walks from a few starts within `[low, high]` over the input as memory.
pub(crate) fn walk_all(tables: &UnwindTables, data: &[u8], low: u64, high: u64) {
    let mem = fake_memory(data);
    for start in starts(data, low, high) {
        let mut out = [0u64; 32];
        let w = walk_tables(
            tables,
            start,
            32,
            Crossings::ALL,
            |a, b| mem.read(a, b),
            &mut out,
        );
        if let Some(w) = w {
            assert!(w.frames <= 32, "a walk past its depth");
        }
    }
}
