//! Functions whose linkage names are in no mangling scheme are named from DWARF, with their
//! scope (tests/data/dwarf-names, built by its build.sh); plain names stay.

mod common;

#[test]
fn foreign_linkage_names_take_their_dwarf_names() {
    let mut s = common::load("dwarf-names/names.elf");
    let starts = common::symbol_starts(&s);
    let mut named = Vec::new();
    for (at, table) in starts {
        // Inside the function too: one name for all its addresses.
        for probe in [at, at + 1] {
            let frames = s.frames(probe);
            named.push((table.clone(), frames.last().unwrap().function.to_string()));
        }
    }
    for (table, shown) in [
        ("net$poll", "drivers::net::poll"),
        ("Queue$push", "Queue::push"),
        ("helper$1", "helper"),
        ("_start", "_start"),
    ] {
        let n = named
            .iter()
            .filter(|(t, f)| t == table && f == shown)
            .count();
        assert_eq!(n, 2, "{table} shown as {shown}: {named:?}");
    }
}
