//! A 64-bit ELF marked i386 (e_machine EM_386), as Asterinas' OSDK leaves its x86_64 kernels:
//! its symbols, DWARF (inline frames, lines) and unwind tables read as the unmarked file's,
//! as x86_64's, with a warning that says so. On tiny-x86_64.elf (aggregator/command/tests/data)
//! always, and on the x86_64 example kernel when `scripts/build.sh` has built it
//! (target/examples/kernel64.elf).

use std::path::{Path, PathBuf};

use kern_profile_arch::{elf_guest, ElfGuest};
use kern_profile_format::Arch;
use kern_profile_symbols::{ElfImage, KernelFile, SymbolWarning, Symbolizer};
use kern_profile_unwind::tables::{kernel_tables_of_elf, Limits};
use kern_profile_unwind::UnwindTables;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A copy of `elf` whose e_machine (the 2 bytes at offset 18) says EM_386, as OSDK patches it.
fn remarked(elf: &[u8]) -> Vec<u8> {
    let mut copy = elf.to_vec();
    copy[18..20].copy_from_slice(&3u16.to_le_bytes());
    copy
}

/// Reads `path` and its re-marked copy, and checks that they read alike.
fn reads_as_unmarked(path: &Path) {
    let data = std::fs::read(path).unwrap();
    let copy = remarked(&data);
    let object = object::File::parse(&*copy).unwrap();
    assert_eq!(
        elf_guest(object::Object::architecture(&object), true),
        Some(ElfGuest {
            arch: Arch::X86_64,
            remarked: true
        })
    );

    let plain = ElfImage::parse(&data, path).unwrap();
    let image = ElfImage::parse(&copy, path).unwrap();
    assert_eq!(plain.arch, Some(Arch::X86_64));
    assert_eq!(image.arch, Some(Arch::X86_64));
    let note = SymbolWarning::RemarkedElf {
        path: path.to_path_buf(),
    };
    assert!(!plain.warnings.contains(&note), "{:?}", plain.warnings);
    assert_eq!(
        image.warnings,
        std::slice::from_ref(&note),
        "nothing else is amiss"
    );
    let text = note.to_string();
    assert!(
        text.starts_with(&path.display().to_string())
            && text.contains("marked i386")
            && text.contains("64-bit")
            && text.ends_with("taken as x86_64"),
        "{text}"
    );
    assert!(image.dwarf.is_some(), "the DWARF reads (8-byte addresses)");

    // The same names at every function's inside, inline frames and lines included.
    let starts: Vec<u64> = plain.symbols.starts().collect();
    assert!(!starts.is_empty());
    let mut a = Symbolizer::new(Some(plain), Vec::new()).unwrap();
    let mut b = Symbolizer::new(Some(image), Vec::new()).unwrap();
    b.check_arch(Arch::X86_64).unwrap();
    let e = b.check_arch(Arch::I386).unwrap_err().to_string();
    assert!(e.contains("an ELF for x86_64"), "{e}");
    let mut with_lines = 0;
    for s in &starts {
        for at in [*s, s + 4] {
            let (fa, fb) = (a.frames(at), b.frames(at));
            assert_eq!(fa, fb, "at {at:#x}");
            with_lines += fb.iter().filter(|f| f.line.is_some()).count();
        }
    }
    assert!(with_lines > 0, "no line from the DWARF");

    // The unwind tables: x86_64's, every row as the unmarked file's.
    let (tables, guest) = UnwindTables::from_elf_guest(&copy, Limits::default()).unwrap();
    assert_eq!((tables.arch, guest.remarked), (Arch::X86_64, true));
    let unmarked = UnwindTables::from_elf(&data, Limits::default()).unwrap();
    let (cfi, plain_cfi) = (tables.cfi.as_ref(), unmarked.cfi.as_ref());
    assert!(cfi.is_some(), "the CFI reads");
    assert_eq!(tables.orc.is_some(), unmarked.orc.is_some());
    let mut rows = 0;
    for s in &starts {
        let row = cfi.and_then(|c| c.find(*s));
        assert_eq!(row, plain_cfi.and_then(|c| c.find(*s)), "at {s:#x}");
        rows += usize::from(row.is_some());
    }
    assert!(rows > 0, "no CFI row at any function");
    let k = kernel_tables_of_elf(path, &copy, Arch::X86_64).unwrap();
    assert!(k.remarked && k.tables.is_some());
    let e = kernel_tables_of_elf(path, &copy, Arch::I386).unwrap_err();
    assert!(e.to_string().contains("a kernel for x86_64"), "{e}");
}

#[test]
fn tiny_x86_64_remarked_reads_as_x86_64() {
    reads_as_unmarked(&root().join("aggregator/command/tests/data/tiny-x86_64.elf"));
}

#[test]
fn the_x86_64_example_kernel_remarked_reads_as_x86_64() {
    let kernel = root().join("target/examples/kernel64.elf");
    if !kernel.exists() {
        eprintln!("skipped: no {} (bash scripts/build.sh)", kernel.display());
        return;
    }
    reads_as_unmarked(&kernel);
}

/// Through the kernel argument's loader (what `record` and the reports read): the copy on
/// disk, loaded by path, carries the warning.
#[test]
fn a_remarked_file_is_loaded_with_the_warning() {
    let data = std::fs::read(root().join("aggregator/command/tests/data/tiny-x86_64.elf")).unwrap();
    let dir = std::env::temp_dir().join(format!("kp-remarked-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("remarked.elf");
    std::fs::write(&path, remarked(&data)).unwrap();
    let kernel = KernelFile::load(&path).unwrap();
    let elf = kernel.elf.as_ref().unwrap();
    assert_eq!(elf.arch, Some(Arch::X86_64));
    assert!(elf
        .warnings
        .contains(&SymbolWarning::RemarkedElf { path: path.clone() }));
    let sym = Symbolizer::load(Some(&path), &[]).unwrap();
    assert_eq!(
        sym.warnings(),
        [SymbolWarning::RemarkedElf { path: path.clone() }]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
