//! Function addresses by name, for the plugin's `alloc=` hooks: from an ELF's symbol table or
//! a text symbol map (System.map, `nm` output with or without `-S`, `/proc/kallsyms`). The
//! symbols and names are those the reports print ([`crate::elf`], [`crate::symbol_map`],
//! [`crate::demangle`]: Rust without hash, C++ and FreePascal demangled), so a SPEC names a
//! function as a flamegraph shows it; a function whose linkage name is in no known scheme
//! answers to that name here (the DWARF name the reports show for it is no symbol's).

use crate::table::RawSymbol;

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

impl SymbolIndex {
    pub fn new(symbols: Vec<Symbol>) -> Self {
        SymbolIndex { symbols }
    }

    /// The code symbols of an ELF, as the reports read them.
    pub fn from_elf(file: &object::File<'_>) -> Self {
        Self::from_raw(crate::elf::code_symbols(file))
    }

    /// The code symbols of a Linux image's kallsyms (a bzImage, an arm64 Image, a vmlinux
    /// without a symbol table), and the kernel's architecture.
    pub fn from_kernel_image(
        path: &std::path::Path,
    ) -> Result<(Self, Option<kern_profile_format::Arch>), crate::SymbolError> {
        let names = crate::kernel_file::kallsyms_of(path)?;
        let raw = names.table.symbols().iter().map(|s| RawSymbol {
            start: s.start,
            size: Some(s.end - s.start),
            name: s.name.to_string(),
            is_function: true,
        });
        Ok((Self::from_raw(raw.collect()), names.arch))
    }

    /// The code symbols of a text symbol map; lines that are no symbol are skipped.
    pub fn from_map(text: &str) -> Self {
        Self::from_raw(crate::symbol_map::parse_lenient(text))
    }

    /// Named as the reports name them; a kallsyms `[module]` suffix is no part of the name.
    /// A C++ function also answers to its linker name, which a SPEC line can hold where the
    /// demangled one has blanks.
    fn from_raw(raw: Vec<RawSymbol>) -> Self {
        let mut symbols = Vec::with_capacity(raw.len());
        for r in raw {
            let linker = without_module(&r.name);
            let name = crate::table::display_name(&linker);
            let cpp = linker.starts_with("_Z") && rustc_demangle::try_demangle(&linker).is_err();
            if cpp && name != linker {
                symbols.push(Symbol {
                    name: linker,
                    addr: r.start,
                });
            }
            symbols.push(Symbol {
                name,
                addr: r.start,
            });
        }
        SymbolIndex { symbols }
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The function named `name` exactly, else the one whose name ends in `::name`; a C++
    /// name matches with or without its parameter list.
    pub fn lookup(&self, name: &str) -> Lookup {
        let exact: Vec<&Symbol> = self
            .symbols
            .iter()
            .filter(|s| s.name == name || without_params(&s.name) == name)
            .collect();
        let found = if exact.is_empty() {
            let suffix = format!("::{name}");
            self.symbols
                .iter()
                .filter(|s| s.name.ends_with(&suffix) || without_params(&s.name).ends_with(&suffix))
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

/// A demangled C++ name without its parameter list (and qualifiers after it):
/// `ns::f(int) const` is `ns::f`; a name without one is returned whole.
fn without_params(name: &str) -> &str {
    if !name.ends_with(')') && !name.ends_with(" const") {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in name.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &name[..i];
                }
            }
            _ => {}
        }
    }
    name
}

/// `name [module]` without ` [module]`.
fn without_module(name: &str) -> String {
    let words: Vec<&str> = name
        .split_whitespace()
        .take_while(|w| !w.starts_with('['))
        .collect();
    words.join(" ")
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
    fn cpp_names_as_the_reports_print_them() {
        let ix = SymbolIndex::from_map(
            "1000 T _ZN2mm7kmallocEj\n2000 T _ZNK2mm4Heap4freeEPv\n3000 T _ZN6kernel4main17h0123456789abcdefE\n",
        );
        assert_eq!(found(ix.lookup("mm::kmalloc(unsigned int)")).1, 0x1000);
        assert_eq!(found(ix.lookup("kmalloc")).1, 0x1000);
        assert_eq!(found(ix.lookup("mm::Heap::free")).1, 0x2000);
        assert_eq!(found(ix.lookup("_ZN2mm7kmallocEj")).1, 0x1000);
        assert_eq!(found(ix.lookup("kernel::main")).1, 0x3000);
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
