//! Names in a FreePascal program (tests/data/freepascal, built by its build.sh): mangled
//! routines demangled, and a routine exported under a name in no known scheme named from
//! DWARF.

mod common;

use kern_profile_symbols::Symbolizer;

fn symbolizer() -> Symbolizer {
    common::load("freepascal/kernel.elf")
}

/// The frames at each code symbol's start (the symbol table's name, then what frames show).
fn names(s: &mut Symbolizer) -> Vec<(String, String)> {
    common::symbol_starts(s)
        .into_iter()
        .map(|(at, table)| {
            let frames = s.frames(at);
            (table, frames.last().unwrap().function.to_string())
        })
        .collect()
}

#[test]
fn mangled_routines_are_demangled() {
    let mut s = symbolizer();
    let names = names(&mut s);
    for want in [
        "KERNEL.FILL",
        "KERNEL.SPIN",
        "CRUNCH.QUICKSORT",
        "CRUNCH.QUICKSORT.SWAP",
        "CRUNCH.SUM",
        "CRUNCH.TVEC.DOT",
    ] {
        assert!(
            names.iter().any(|(t, f)| t == want && f == want),
            "{want} in {names:?}"
        );
    }
    // Both overloads of SUM share their name.
    assert_eq!(names.iter().filter(|(t, _)| t == "CRUNCH.SUM").count(), 2);
    assert!(s.warnings().is_empty());
}

#[test]
fn a_name_in_no_scheme_is_named_from_dwarf() {
    let mut s = symbolizer();
    let names = names(&mut s);
    // DWARF: TICK in the compilation unit crunch.pas.
    assert!(
        names
            .iter()
            .any(|(t, f)| t == "crunch$tick" && f == "CRUNCH.TICK"),
        "{names:?}"
    );
    // Plain names stay as they are.
    assert!(
        names.iter().any(|(t, f)| t == "main" && f == "main"),
        "{names:?}"
    );
}

/// A FreePascal kernel is no Linux: the stack walks take none of Linux's layouts on it
/// (its odd frame pointers are no encoded `pt_regs` pointers).
#[test]
fn a_freepascal_kernel_is_no_linux() {
    use kern_profile_linux_image::{open, Options};
    use kern_profile_symbols::{kernel_os_of_image, KernelFile};
    use kern_profile_unwind::KernelOs;
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/freepascal/kernel.elf");
    assert_eq!(
        KernelFile::load(&path).unwrap().kernel_os(),
        KernelOs::Other
    );
    let image = open(&path, &Options::default()).unwrap();
    assert_eq!(kernel_os_of_image(&image), KernelOs::Other);
}
