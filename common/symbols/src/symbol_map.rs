//! Text symbol maps: `nm` output (with or without `-S` sizes, with or without `-C`),
//! `System.map`, and `/proc/kallsyms` (with `[module]` suffixes).
//!
//! Each line is `ADDRESS [SIZE] TYPE NAME`. Only code symbols are kept (types `T t W w i`);
//! undefined symbols (no address), data and absolute symbols are skipped, and so are the
//! `file.o:` headers nm prints for archives.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::table::{RawSymbol, SymbolTable};
use super::SymbolError;

/// Parses a symbol map's text. `path` only names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<Vec<RawSymbol>, SymbolError> {
    let mut p = Parser::new(path);
    for (i, line) in text.lines().enumerate() {
        p.line(i + 1, line)?;
    }
    p.finish()
}

/// The code symbols of a map's text, skipping the lines that are none (for `alloc=`'s
/// `symbols=`, which takes any text and looks names up: no line is refused).
pub fn parse_lenient(text: &str) -> Vec<RawSymbol> {
    let mut p = Parser::new(Path::new(""));
    for (i, line) in text.lines().enumerate() {
        let _ = p.line(i + 1, line);
    }
    p.out
}

/// Lines longer than this are no symbol map (the longest demangled kernel names are a few
/// hundred bytes); it bounds what one line can buffer.
pub const MAX_LINE: usize = 64 << 10;

/// Reads and parses a symbol map file into a table, line by line: a file that is no symbol
/// map fails at its first line, whatever its size.
pub fn load(path: &Path) -> Result<SymbolTable, SymbolError> {
    let open_err = |source| SymbolError::Open {
        path: path.to_path_buf(),
        source,
    };
    let file = kern_profile_format::open_input(path).map_err(open_err)?;
    let mut reader = BufReader::new(file);
    let mut p = Parser::new(path);
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(open_err)?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && n > MAX_LINE {
            return Err(SymbolError::BadSymbolMap {
                path: path.to_path_buf(),
                line: number,
                what: format!("line longer than {MAX_LINE} bytes: not a symbol map"),
            });
        }
        let text = String::from_utf8_lossy(&line);
        p.line(number, text.trim_end_matches(['\n', '\r']))?;
    }
    Ok(SymbolTable::new(p.finish()?, |_| None))
}

/// The code symbols of a map so far.
struct Parser<'p> {
    path: &'p Path,
    out: Vec<RawSymbol>,
    zero_addresses: usize,
}

impl<'p> Parser<'p> {
    fn new(path: &'p Path) -> Self {
        Parser {
            path,
            out: Vec::new(),
            zero_addresses: 0,
        }
    }

    /// Takes line `number` (from 1), without its end of line.
    fn line(&mut self, number: usize, line: &str) -> Result<(), SymbolError> {
        let path = self.path;
        let line = line.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(());
        }
        // `nm` on an archive prints `member.o:` headers.
        if trimmed.ends_with(':') && !trimmed.contains(char::is_whitespace) {
            return Ok(());
        }
        // An undefined symbol has no address: the line starts with blanks then `U name`.
        if line.starts_with(char::is_whitespace) {
            return Ok(());
        }
        let bad = |what: &str| SymbolError::BadSymbolMap {
            path: path.to_path_buf(),
            line: number,
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
            return Ok(());
        }
        if start == 0 {
            self.zero_addresses += 1;
        }
        // kallsyms: `name\t[module]` becomes `name [module]`.
        let name = match name.split_once('\t') {
            Some((n, module)) => format!("{} {}", n.trim(), module.trim()),
            None => name.to_string(),
        };
        self.out.push(RawSymbol {
            start,
            size,
            name,
            is_function: true,
        });
        Ok(())
    }

    fn finish(self) -> Result<Vec<RawSymbol>, SymbolError> {
        let path = self.path;
        if self.out.is_empty() {
            return Err(SymbolError::EmptySymbolMap {
                path: path.to_path_buf(),
            });
        }
        if self.zero_addresses == self.out.len() {
            return Err(SymbolError::ZeroAddresses {
                path: path.to_path_buf(),
            });
        }
        Ok(self.out)
    }
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
