//! `flight_trigger=`: the functions whose first instruction writes the flight ring, found by
//! name in the kernel's ELF symbols (a Rust name matches without its crate path or hash) or
//! a Linux image's kallsyms.

use object::{Object, ObjectSymbol, SymbolKind};

/// The preset for the paths into a panic: Linux's `panic` (`vpanic` since 6.12) and
/// `oops_enter`, Rust's `core::panicking::panic_fmt` (every panic passes it) and the panic
/// handler `rust_begin_unwind` where it is a symbol of its own.
pub const PANIC_PRESET: &str = "panic";
const PANIC_FUNCTIONS: [&str; 5] = [
    "panic",
    "vpanic",
    "oops_enter",
    "panic_fmt",
    "rust_begin_unwind",
];

/// The preset for a monitor command: QEMU's `nmi` (HMP) and `inject-nmi` (QMP) send every
/// x86 vCPU a non-maskable interrupt, and Linux's handler is `exc_nmi` (`do_nmi` before 5.8).
/// A plugin cannot add a monitor command; this one, in every QEMU, reaches the guest.
pub const NMI_PRESET: &str = "nmi";
const NMI_FUNCTIONS: [&str; 2] = ["exc_nmi", "do_nmi"];

/// A trigger function's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// The symbol's name as the kernel has it (demangled).
    pub name: String,
    pub entry: u64,
}

/// The names `flight_trigger=` values stand for (`panic`: the preset's).
pub fn wanted(values: &[String]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for v in values {
        match v.as_str() {
            PANIC_PRESET => names.extend(PANIC_FUNCTIONS),
            NMI_PRESET => names.extend(NMI_FUNCTIONS),
            name => names.push(name),
        }
    }
    names.dedup();
    names
}

/// Whether the symbol `raw` (demangled: `demangled`) is the function `want`.
fn matches(raw: &str, demangled: &str, want: &str) -> bool {
    raw == want
        || demangled == want
        || demangled
            .strip_suffix(want)
            .is_some_and(|head| head.ends_with("::"))
}

/// The text symbols of `elf` (an ELF file's bytes) that are among `names`.
pub fn elf_triggers(elf: &[u8], names: &[&str]) -> Vec<Trigger> {
    let Ok(file) = object::File::parse(elf) else {
        return Vec::new();
    };
    let mut found: Vec<Trigger> = file
        .symbols()
        .filter(|s| s.is_definition() && s.kind() == SymbolKind::Text)
        .filter_map(|s| {
            let raw = s.name().ok()?;
            let demangled = format!("{:#}", rustc_demangle::demangle(raw));
            names
                .iter()
                .any(|w| matches(raw, &demangled, w))
                .then(|| Trigger {
                    name: demangled,
                    entry: s.address(),
                })
        })
        .collect();
    found.sort_by_key(|t| t.entry);
    found.dedup_by_key(|t| t.entry);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_without_paths_or_hashes() {
        assert!(matches("panic", "panic", "panic"));
        assert!(matches(
            "_ZN4core9panicking9panic_fmt17h7839be7f9cf7a507E",
            "core::panicking::panic_fmt",
            "panic_fmt"
        ));
        assert!(matches(
            "_RNvCsfLfy6EI15iL_7___rustc17rust_begin_unwind",
            "__rustc::rust_begin_unwind",
            "rust_begin_unwind"
        ));
        assert!(!matches(
            "x",
            "kernel_common::console::panic_message",
            "panic"
        ));
        assert!(!matches("x", "do_panic", "panic"));
        assert_eq!(
            wanted(&["panic".into(), "spin".into()]),
            [
                "panic",
                "vpanic",
                "oops_enter",
                "panic_fmt",
                "rust_begin_unwind",
                "spin"
            ]
        );
        assert_eq!(wanted(&["nmi".into()]), ["exc_nmi", "do_nmi"]);
    }

    /// Every example kernel has a function the preset finds.
    #[test]
    fn the_example_kernels_panic_paths() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/examples");
        for elf in [
            "kernel.elf",
            "kernel64.elf",
            "kernel-riscv64.elf",
            "kernel-aarch64.elf",
        ] {
            let Ok(bytes) = std::fs::read(root.join(elf)) else {
                continue;
            };
            let found = elf_triggers(&bytes, &wanted(&[PANIC_PRESET.into()]));
            assert!(
                found.iter().any(|t| t.name == "core::panicking::panic_fmt"),
                "{elf}: {found:?}"
            );
        }
        assert!(elf_triggers(b"junk", &["panic"]).is_empty());
    }
}
