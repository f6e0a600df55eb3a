//! What the naming tests share: a test ELF of tests/data loaded, its symbol table's entries.

use std::path::Path;

use kern_profile_symbols::Symbolizer;

/// The symbolizer of `tests/data/<path>`.
pub fn load(path: &str) -> Symbolizer {
    let elf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path);
    Symbolizer::load(Some(&elf), &[]).unwrap()
}

/// Each symbol of the ELF's table: its start and its name as the table spells it.
pub fn symbol_starts(s: &Symbolizer) -> Vec<(u64, String)> {
    s.elf()
        .unwrap()
        .symbols
        .symbols()
        .iter()
        .map(|sym| (sym.start, sym.name.to_string()))
        .collect()
}
