//! Function addresses by name, from an ELF's symbol table or a text symbol map (System.map,
//! `nm` output with or without `-S`, `/proc/kallsyms`). Names are demangled without hash, as
//! the aggregator shows them.

use object::{Object, ObjectSymbol, SymbolKind};

/// One code symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Demangled, without hash.
    pub name: String,
    pub addr: u64,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found(Symbol),
    Missing {
        /// A few names that contain the last path component of the one asked for.
        similar: Vec<String>,
    },
    /// Several functions at different addresses answer to the name.
    Ambiguous(Vec<Symbol>),
}

/// Code symbols of a kernel.
#[derive(Debug, Clone, Default)]
pub struct SymbolIndex {
    symbols: Vec<Symbol>,
}

/// Demangles a Rust name without hash (legacy or v0); other names are kept.
pub fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => name.to_string(),
    }
}

impl SymbolIndex {
    pub fn new(symbols: Vec<Symbol>) -> Self {
        SymbolIndex { symbols }
    }

    /// The defined function symbols of an ELF.
    pub fn from_elf(file: &object::File<'_>) -> Self {
        let symbols = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && !s.is_undefined())
            .filter_map(|s| {
                let name = s.name().ok().filter(|n| !n.is_empty())?;
                Some(Symbol {
                    name: demangle(name),
                    addr: s.address(),
                })
            })
            .collect();
        SymbolIndex { symbols }
    }

    /// The code symbols (types t, T, w, W) of a text symbol map; other lines are skipped.
    pub fn from_map(text: &str) -> Self {
        let symbols = text.lines().filter_map(parse_map_line).collect();
        SymbolIndex { symbols }
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The function named `name` exactly, else the one whose name ends in `::name`.
    pub fn lookup(&self, name: &str) -> Lookup {
        let exact: Vec<&Symbol> = self.symbols.iter().filter(|s| s.name == name).collect();
        let found = if exact.is_empty() {
            let suffix = format!("::{name}");
            self.symbols
                .iter()
                .filter(|s| s.name.ends_with(&suffix))
                .collect()
        } else {
            exact
        };
        let mut distinct: Vec<Symbol> = Vec::new();
        for s in found {
            if !distinct.iter().any(|d| d.addr == s.addr) {
                distinct.push(s.clone());
            }
        }
        match distinct.len() {
            0 => Lookup::Missing {
                similar: self.similar(name),
            },
            1 => Lookup::Found(distinct.remove(0)),
            _ => {
                distinct.sort_by(|a, b| a.name.cmp(&b.name).then(a.addr.cmp(&b.addr)));
                Lookup::Ambiguous(distinct)
            }
        }
    }

    fn similar(&self, name: &str) -> Vec<String> {
        let last = name.rsplit("::").next().unwrap_or(name);
        let mut v: Vec<String> = self
            .symbols
            .iter()
            .filter(|s| !last.is_empty() && s.name.contains(last))
            .map(|s| s.name.clone())
            .collect();
        v.sort();
        v.dedup();
        v.truncate(3);
        v
    }
}

/// `ADDR TYPE NAME [module]` or `ADDR SIZE TYPE NAME`.
fn parse_map_line(line: &str) -> Option<Symbol> {
    let mut words = line.split_whitespace();
    let addr = u64::from_str_radix(words.next()?, 16).ok()?;
    let mut ty = words.next()?;
    if ty.len() > 1 {
        // nm -S: the size comes first.
        u64::from_str_radix(ty, 16).ok()?;
        ty = words.next()?;
    }
    if !matches!(ty, "t" | "T" | "w" | "W") {
        return None;
    }
    let rest: Vec<&str> = words.take_while(|w| !w.starts_with('[')).collect();
    if rest.is_empty() {
        return None;
    }
    Some(Symbol {
        name: demangle(&rest.join(" ")),
        addr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> SymbolIndex {
        SymbolIndex::from_map(
            "c0102650 t _ZN6kernel6kalloc7kmalloc17h0f839ce3f949e1c0E\n\
             c0102810 t _ZN6kernel6kalloc8krealloc17h1111111111111111E\n\
             c0102aa0 T kfree\n\
             c0109000 D some_data\n\
             00000000c0105000 0000000000000010 T __kmalloc\n\
             c0200000 t kfree_rcu [some_module]\n\
             c0300000 t _ZN5other6kalloc8krealloc17h2222222222222222E\n\
             c0400000 t _ZN5other4kfre17h2222222222222222E\n\
             garbage line\n",
        )
    }

    fn found(l: Lookup) -> (String, u64) {
        match l {
            Lookup::Found(s) => (s.name, s.addr),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn map_lines_of_every_kind() {
        let ix = index();
        assert_eq!(ix.len(), 7, "data symbols and garbage skipped");
        assert_eq!(
            found(ix.lookup("kernel::kalloc::kmalloc")),
            ("kernel::kalloc::kmalloc".into(), 0xc010_2650)
        );
        assert_eq!(found(ix.lookup("__kmalloc")).1, 0xc010_5000);
        assert_eq!(found(ix.lookup("kfree_rcu")).1, 0xc020_0000);
    }

    #[test]
    fn path_suffixes_match_when_unique() {
        let ix = index();
        assert_eq!(found(ix.lookup("kmalloc")).1, 0xc010_2650);
        assert_eq!(found(ix.lookup("kalloc::kmalloc")).1, 0xc010_2650);
        // An exact name wins over suffixes.
        assert_eq!(found(ix.lookup("kfree")).1, 0xc010_2aa0);
        match ix.lookup("krealloc") {
            Lookup::Ambiguous(v) => {
                let names: Vec<&str> = v.iter().map(|s| s.name.as_str()).collect();
                assert_eq!(
                    names,
                    ["kernel::kalloc::krealloc", "other::kalloc::krealloc"]
                );
            }
            other => panic!("{other:?}"),
        }
        // Not a suffix on a path boundary.
        match ix.lookup("alloc::kmalloc") {
            Lookup::Missing { similar } => {
                assert_eq!(similar, ["__kmalloc", "kernel::kalloc::kmalloc"])
            }
            other => panic!("{other:?}"),
        }
    }
}
