//! The ELF/DWARF loading path: `ElfImage::parse` over any bytes, then a `Symbolizer` asked
//! about symbol starts, their neighbours and segment bounds (DWARF lookups, inlined frames,
//! the code checks of `caller_skipped`).

use std::hint::black_box;
use std::path::Path;

use crate::bounded;
use kern_profile::symbolize::ElfImage;
use kern_profile::Symbolizer;

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let elf = match ElfImage::parse(data, Path::new("fuzz.elf")) {
        Ok(elf) => elf,
        Err(e) => {
            black_box(e.to_string());
            return;
        }
    };
    let mut probes: Vec<u64> = elf
        .symbols
        .symbols()
        .iter()
        .take(32)
        .flat_map(|s| [s.start, s.start.wrapping_add(3), s.end.wrapping_sub(1)])
        .collect();
    probes.extend(
        elf.segments()
            .iter()
            .take(8)
            .flat_map(|&(a, e)| [a, e.wrapping_sub(1)]),
    );
    probes.extend([0, u64::MAX]);
    for &p in &probes {
        black_box((elf.loads(p), elf.code_at(p, 5)));
    }
    black_box(elf.is_stripped());
    let Ok(mut sym) = Symbolizer::new(Some(elf), Vec::new()) else {
        return;
    };
    black_box(sym.warnings());
    for &p in &probes {
        black_box(sym.frames(p));
        black_box(sym.caller_skipped(p, p.wrapping_add(5)));
    }
}
