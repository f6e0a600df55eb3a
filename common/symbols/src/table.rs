//! A sorted table of code symbols, from an ELF symbol table or a text symbol map.

use super::demangle::demangle;

/// A linker name as the reports show it: demangled, safe for the folded format.
pub fn display_name(linker_name: &str) -> String {
    super::demangle::sanitize(&demangle(linker_name)).into_owned()
}

/// A symbol as a source lists it.
#[derive(Debug, Clone)]
pub struct RawSymbol {
    pub start: u64,
    /// `None` (or 0): unknown, the symbol runs to the next one (assembly labels, `nm`
    /// without `-S`, `/proc/kallsyms`).
    pub size: Option<u64>,
    pub name: String,
    /// A typed function (`STT_FUNC`), rather than a label of unknown type.
    pub is_function: bool,
}

/// One code symbol, with its demangled name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    pub name: Box<str>,
}

/// Code symbols sorted by address, for lookups.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    syms: Vec<Symbol>,
    /// The starts of the symbols whose linkage name is in no known mangling scheme (sorted):
    /// their DWARF name is shown instead where there is one.
    foreign: Vec<u64>,
}

/// How far a last symbol of unknown size is taken to extend.
const UNSIZED_TAIL: u64 = 0x1000;

impl SymbolTable {
    /// Builds the table. Aliases (several names at one address) keep the sized function
    /// first; labels of unknown size inside a sized function are dropped (they would cut it
    /// in two); a symbol of unknown size runs to the next symbol, or to `limit_of(start)`
    /// when that comes first (e.g. its section's end).
    pub fn new(mut raw: Vec<RawSymbol>, limit_of: impl Fn(u64) -> Option<u64>) -> Self {
        raw.retain(|s| !s.name.is_empty());
        raw.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.is_function.cmp(&a.is_function))
                .then(b.size.unwrap_or(0).cmp(&a.size.unwrap_or(0)))
                .then(a.name.cmp(&b.name))
        });
        raw.dedup_by_key(|s| s.start);
        // Drop unsized labels inside the sized symbol before them.
        let mut kept: Vec<RawSymbol> = Vec::with_capacity(raw.len());
        let mut covered_to = 0u64;
        for s in raw {
            let sized = s.size.unwrap_or(0) > 0;
            if !sized && s.start < covered_to {
                continue;
            }
            if sized {
                covered_to = covered_to.max(s.start.saturating_add(s.size.unwrap_or(0)));
            }
            kept.push(s);
        }
        let mut syms = Vec::with_capacity(kept.len());
        let mut foreign = Vec::new();
        for (i, s) in kept.iter().enumerate() {
            let next = kept.get(i + 1).map(|n| n.start);
            let end = match s.size {
                Some(n) if n > 0 => s.start.saturating_add(n),
                _ => {
                    let mut end = next.unwrap_or(s.start.saturating_add(UNSIZED_TAIL));
                    if let Some(limit) = limit_of(s.start) {
                        if limit > s.start {
                            end = end.min(limit);
                        }
                    }
                    end
                }
            };
            let demangled = demangle(&s.name);
            if super::demangle::is_foreign(&s.name, &demangled) {
                foreign.push(s.start);
            }
            syms.push(Symbol {
                start: s.start,
                end: end.max(s.start + 1),
                name: super::demangle::sanitize(&demangled).into(),
            });
        }
        SymbolTable { syms, foreign }
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// The symbol whose range holds `addr`.
    pub fn lookup(&self, addr: u64) -> Option<&Symbol> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        (addr < s.end).then_some(s)
    }

    /// True when `sym`'s linkage name is in no mangling scheme the demangler knows (nor a
    /// plain C name): its DWARF name, where there is one, names it better.
    pub fn is_foreign(&self, sym: &Symbol) -> bool {
        self.foreign.binary_search(&sym.start).is_ok()
    }

    /// Start addresses of all symbols.
    pub fn starts(&self) -> impl Iterator<Item = u64> + '_ {
        self.syms.iter().map(|s| s.start)
    }

    pub fn symbols(&self) -> &[Symbol] {
        &self.syms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(start: u64, size: Option<u64>, name: &str, f: bool) -> RawSymbol {
        RawSymbol {
            start,
            size,
            name: name.into(),
            is_function: f,
        }
    }

    #[test]
    fn lookups_respect_sizes_and_next_symbols() {
        let t = SymbolTable::new(
            vec![
                raw(0x100, Some(0x10), "a", true),
                raw(0x200, None, "label", false),
                raw(0x300, Some(0x20), "c", true),
                raw(0x308, None, "inner_label", false),
                raw(0x400, None, "last", false),
            ],
            |_| None,
        );
        assert_eq!(t.lookup(0x100).unwrap().name.as_ref(), "a");
        assert_eq!(t.lookup(0x10f).unwrap().name.as_ref(), "a");
        assert!(t.lookup(0x110).is_none());
        assert!(t.lookup(0xff).is_none());
        assert_eq!(t.lookup(0x2ff).unwrap().name.as_ref(), "label");
        assert_eq!(t.lookup(0x30a).unwrap().name.as_ref(), "c");
        assert_eq!(t.lookup(0x400 + 0xfff).unwrap().name.as_ref(), "last");
        assert!(t.lookup(0x400 + 0x1000).is_none());
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn aliases_prefer_sized_functions_and_names_are_demangled() {
        let t = SymbolTable::new(
            vec![
                raw(0x10, None, "alias", false),
                raw(0x10, Some(4), "_ZN3foo3bar17h0123456789abcdefE", true),
            ],
            |_| Some(0x12),
        );
        assert_eq!(t.lookup(0x13).unwrap().name.as_ref(), "foo::bar");
    }

    #[test]
    fn foreign_linkage_names_are_marked() {
        let t = SymbolTable::new(
            vec![
                raw(0x10, Some(4), "weird$name", true),
                raw(0x20, Some(4), "kmain", true),
                raw(0x30, Some(4), "P$KERNEL_$$_SPIN", true),
            ],
            |_| None,
        );
        let foreign: Vec<bool> = t.symbols().iter().map(|s| t.is_foreign(s)).collect();
        assert_eq!(foreign, [true, false, false]);
        assert_eq!(t.lookup(0x30).unwrap().name.as_ref(), "KERNEL.SPIN");
    }

    #[test]
    fn unsized_symbols_stop_at_their_limit() {
        let t = SymbolTable::new(vec![raw(0x10, None, "x", false)], |_| Some(0x18));
        assert!(t.lookup(0x17).is_some());
        assert!(t.lookup(0x18).is_none());
    }
}
