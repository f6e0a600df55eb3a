//! Symbol name demangling: Rust (legacy and v0, without hash suffixes), then C++ (Itanium),
//! then FreePascal.

mod freepascal;

use std::borrow::Cow;

/// Demangles a linker symbol name. Rust names lose their `::h0123…` hash (legacy) or crate
/// disambiguators (v0); C++ names are demangled too; FreePascal's become `UNIT.NAME`
/// (`UNIT.CLASS.METHOD`) without parameter types; anything else is returned unchanged.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` is the alternate form: no hash, no disambiguators.
        return Cow::Owned(format!("{d:#}"));
    }
    if name.starts_with("_Z") {
        if let Some(d) = addr2line::demangle(name, addr2line::gimli::DW_LANG_C_plus_plus) {
            return Cow::Owned(d);
        }
    }
    if let Some(d) = freepascal::demangle(name) {
        return Cow::Owned(d);
    }
    Cow::Borrowed(name)
}

/// True when `name`, whose [`demangle`]d form is `demangled`, is a linkage name in no scheme
/// the demangler knows: left as it is, and no plain C or assembly name (letters, digits, `_`,
/// and `.` for compilers' clone suffixes such as `.isra.0`), which is its function's own name.
/// Such a function is better named by its DWARF name.
pub(crate) fn is_foreign(name: &str, demangled: &str) -> bool {
    let plain = name
        .chars()
        .all(|c| c == '_' || c == '.' || c.is_ascii_alphanumeric());
    !plain && demangled == name
}

/// Makes a name safe for the folded format, whose frames are separated by `;` and whose
/// lines end with a count: `;` becomes the full-width `；` (so `[u8; 4]` still reads as an
/// array type) and control characters become spaces.
pub fn sanitize(name: &str) -> Cow<'_, str> {
    if !name.chars().any(|c| c == ';' || c.is_control()) {
        return Cow::Borrowed(name);
    }
    Cow::Owned(
        name.chars()
            .map(|c| match c {
                ';' => '；',
                c if c.is_control() => ' ',
                c => c,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_without_hash() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        // LLVM's local-symbol suffix goes too.
        assert_eq!(
            demangle("_ZN6kernel4main17h0123456789abcdefE.llvm.1234"),
            "kernel::main"
        );
    }

    #[test]
    fn rust_v0_without_disambiguators() {
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    }

    #[test]
    fn cpp_and_plain() {
        assert_eq!(demangle("_Z3fooi"), "foo(int)");
        assert_eq!(demangle("kmain"), "kmain");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[test]
    fn freepascal() {
        assert_eq!(
            demangle("P$CRUNCH_$$_QUICKSORT$LONGINT$LONGINT"),
            "CRUNCH.QUICKSORT"
        );
        assert_eq!(
            demangle("CRUNCH$_$TSORTER_$__$$_SORT$array_of_LONGINT"),
            "CRUNCH.TSORTER.SORT"
        );
        assert_eq!(demangle("DEBUGSTART_$CRUNCH"), "DEBUGSTART_$CRUNCH");
    }

    #[test]
    fn foreign_names() {
        for known in [
            "kmain",
            "foo.isra.0",
            "_ZN4core3fmt5write17h0123456789abcdefE",
            "_RNvCs1234_7mycrate3foo",
            "_Z3fooi",
            "_Zgarbage",
            "P$KERNEL_$$_SPIN",
        ] {
            assert!(!is_foreign(known, &demangle(known)), "{known}");
        }
        for foreign in ["weird$name", "DEBUGSTART_$CRUNCH", "?foo@@YAXXZ", "f@plt"] {
            assert!(is_foreign(foreign, &demangle(foreign)), "{foreign}");
        }
    }

    #[test]
    fn sanitizes_separators() {
        assert_eq!(sanitize("<[u8; 4] as Foo>::bar"), "<[u8； 4] as Foo>::bar");
        assert_eq!(sanitize("a\nb"), "a b");
        assert!(matches!(sanitize("plain"), Cow::Borrowed(_)));
    }
}
