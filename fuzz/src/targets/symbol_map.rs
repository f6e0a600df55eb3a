//! Text symbol maps (`nm`, System.map, kallsyms): `symbol_map::parse`, then the table and a
//! map-only `Symbolizer` asked about the addresses the map names.

use std::hint::black_box;
use std::path::Path;

use crate::bounded;
use kern_profile::symbolize::{symbol_map, SymbolTable};
use kern_profile::Symbolizer;

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let raw = match symbol_map::parse(&text, Path::new("fuzz.map")) {
        Ok(raw) => raw,
        Err(e) => {
            black_box(e.to_string());
            return;
        }
    };
    let table = SymbolTable::new(raw, |_| None);
    let probes: Vec<u64> = table
        .symbols()
        .iter()
        .take(64)
        .flat_map(|s| {
            [
                s.start,
                s.start.wrapping_add(1),
                s.end.wrapping_sub(1),
                s.end,
            ]
        })
        .chain([0, u64::MAX])
        .collect();
    for &p in &probes {
        if let Some(s) = table.lookup(p) {
            assert!(s.start <= p && p < s.end, "{p:#x} outside {s:?}");
        }
    }
    let Ok(mut sym) = Symbolizer::new(None, vec![table]) else {
        return;
    };
    for &p in &probes {
        black_box(sym.frames(p));
        black_box(sym.caller_skipped(p, p.wrapping_add(5)));
    }
}
