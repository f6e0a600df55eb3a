//! Text symbol maps: `nm` output (with or without `-S` sizes, with or without `-C`),
//! `System.map`, and `/proc/kallsyms` (with `[module]` suffixes).
//!
//! Each line is `ADDRESS [SIZE] TYPE NAME`. Only code symbols are kept (types `T t W w i`);
//! undefined symbols (no address), data and absolute symbols are skipped, and so are the
//! `file.o:` headers nm prints for archives.

use std::path::Path;

use super::table::{RawSymbol, SymbolTable};
use super::SymbolError;

/// Parses a symbol map's text. `path` only names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<Vec<RawSymbol>, SymbolError> {
    let mut out = Vec::new();
    let mut zero_addresses = 0usize;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        // `nm` on an archive prints `member.o:` headers.
        if trimmed.ends_with(':') && !trimmed.contains(char::is_whitespace) {
            continue;
        }
        // An undefined symbol has no address: the line starts with blanks then `U name`.
        if line.starts_with(char::is_whitespace) {
            continue;
        }
        let bad = |what: &str| SymbolError::BadSymbolMap {
            path: path.to_path_buf(),
            line: i + 1,
            what: format!("{what}: `{}`", excerpt(line)),
        };
        let (addr_tok, rest) = split_token(trimmed);
        let start = parse_hex(addr_tok).ok_or_else(|| {
            bad("expected `ADDRESS [SIZE] TYPE NAME` (nm, System.map or /proc/kallsyms)")
        })?;
        let (tok2, rest2) = split_token(rest);
        let (size, ty, name) = if tok2.len() == 1 {
            (None, tok2, rest2)
        } else {
            // `nm -S`: a size column before the type.
            let size = parse_hex(tok2).ok_or_else(|| bad("expected a one-letter symbol type"))?;
            let (ty, name) = split_token(rest2);
            if ty.len() != 1 {
                return Err(bad("expected a one-letter symbol type"));
            }
            (Some(size), ty, name)
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("missing symbol name"));
        }
        if !matches!(ty, "T" | "t" | "W" | "w" | "i") {
            continue;
        }
        if start == 0 {
            zero_addresses += 1;
        }
        // kallsyms: `name\t[module]` becomes `name [module]`.
        let name = match name.split_once('\t') {
            Some((n, module)) => format!("{} {}", n.trim(), module.trim()),
            None => name.to_string(),
        };
        out.push(RawSymbol {
            start,
            size,
            name,
            is_function: true,
        });
    }
    if out.is_empty() {
        return Err(SymbolError::EmptySymbolMap {
            path: path.to_path_buf(),
        });
    }
    if zero_addresses == out.len() {
        return Err(SymbolError::ZeroAddresses {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// Reads and parses a symbol map file into a table.
pub fn load(path: &Path) -> Result<SymbolTable, SymbolError> {
    let bytes = std::fs::read(path).map_err(|source| SymbolError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let raw = parse(&text, path)?;
    Ok(SymbolTable::new(raw, |_| None))
}

fn split_token(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

fn excerpt(line: &str) -> String {
    let mut s: String = line.chars().take(60).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Vec<RawSymbol>, SymbolError> {
        parse(text, Path::new("map"))
    }

    #[test]
    fn nm_output() {
        let syms = p("c0100000 T _start\nc0100010 t helper\nc0200000 D data\n         U undefined\nc0100020 W weak\n")
            .unwrap();
        let names: Vec<_> = syms.iter().map(|s| (s.start, s.name.as_str())).collect();
        assert_eq!(
            names,
            [
                (0xc0100000, "_start"),
                (0xc0100010, "helper"),
                (0xc0100020, "weak")
            ]
        );
        assert!(syms.iter().all(|s| s.size.is_none()));
    }

    #[test]
    fn nm_with_sizes_and_demangled_names() {
        let syms =
            p("c0100000 0000001a T foo::bar<T>\n00000010 00000004 t baz(int, char)\n").unwrap();
        assert_eq!(syms[0].size, Some(0x1a));
        assert_eq!(syms[0].name, "foo::bar<T>");
        assert_eq!(syms[1].name, "baz(int, char)");
    }

    #[test]
    fn kallsyms_with_modules() {
        let syms = p("ffffffff81000000 T _text\nffffffffc0a01000 t ext4_foo\t[ext4]\nffffffff82000000 d some_data\n")
            .unwrap();
        assert_eq!(syms.len(), 2);
        assert_eq!(syms[0].start, 0xffffffff81000000);
        assert_eq!(syms[1].name, "ext4_foo [ext4]");
    }

    #[test]
    fn system_map_and_archive_headers() {
        let syms = p("\nfoo.o:\nc0100000 T a\n# comment\nc0100100 T b\n").unwrap();
        assert_eq!(syms.len(), 2);
    }

    #[test]
    fn table_from_map_resolves_to_next_symbol() {
        let t = SymbolTable::new(p("10 T a\n20 T b\n").unwrap(), |_| None);
        assert_eq!(t.lookup(0x1f).unwrap().name.as_ref(), "a");
        assert_eq!(t.lookup(0x20).unwrap().name.as_ref(), "b");
    }

    #[test]
    fn errors_name_the_line() {
        match p("10 T a\nnot a map line\n") {
            Err(SymbolError::BadSymbolMap { line, .. }) => assert_eq!(line, 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            p("10 TT a\n"),
            Err(SymbolError::BadSymbolMap { .. })
        ));
        assert!(matches!(p("10 T\n"), Err(SymbolError::BadSymbolMap { .. })));
        assert!(matches!(
            p("10 D data\n"),
            Err(SymbolError::EmptySymbolMap { .. })
        ));
        assert!(matches!(
            p("0000000000000000 T a\n0000000000000000 T b\n"),
            Err(SymbolError::ZeroAddresses { .. })
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x = 0x1234_5678u32;
        for _ in 0..200 {
            let mut s = String::new();
            for _ in 0..(x % 200) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let alphabet = b" \t\nTt0x1fa:;[]";
                s.push(alphabet[x as usize % alphabet.len()] as char);
            }
            let _ = p(&s);
        }
    }
}
