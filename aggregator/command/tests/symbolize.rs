//! Symbolization against tests/data/tiny.elf: DWARF inline frames, the symbol table's Rust
//! names, lines, and loading errors.

mod common;

use std::path::{Path, PathBuf};

use common::tiny::*;
use kern_profile::stacks::{NameStyle, StackNamer};
use kern_profile::symbolize::{ElfImage, SymbolError, Symbolizer};
use kern_profile_format::Arch;

fn names(style: NameStyle, addrs: &[u64], first_is_pc: bool) -> String {
    let mut sym = Symbolizer::load(Some(&common::tiny_elf()), &[]).unwrap();
    let mut namer = StackNamer::new(&mut sym, style);
    let mut out = Vec::new();
    namer.name_addrs(addrs, first_is_pc, &mut out);
    out.iter().map(|s| &**s).collect::<Vec<_>>().join(";")
}

const DEFAULT: NameStyle = NameStyle {
    inline: true,
    lines: false,
    addresses: false,
    inline_suffix: true,
};

#[test]
fn dwarf_inline_frames_and_rust_names() {
    assert_eq!(
        names(
            DEFAULT,
            &[LEAF_SQUARE, RET_MIDDLE, RET_WORK, RET_START],
            true
        ),
        "_start;kernel::work;middle;leaf;square_[i]"
    );
    let plain = NameStyle {
        inline_suffix: false,
        ..DEFAULT
    };
    assert_eq!(names(plain, &[LEAF_SQUARE], true), "leaf;square");
    let no_inline = NameStyle {
        inline: false,
        ..DEFAULT
    };
    assert_eq!(
        names(no_inline, &[LEAF_SQUARE, RET_MIDDLE], true),
        "middle;leaf"
    );
}

#[test]
fn return_addresses_are_looked_up_before_the_call() {
    // 0xc0100060 is work's first byte; as a return address it belongs to the call before
    // it, the end of middle (padding there) or nothing, never kernel::work.
    let s = names(DEFAULT, &[RET_WORK], false);
    assert_eq!(s, "kernel::work");
    assert_eq!(names(DEFAULT, &[0xc010_0060], true), "kernel::work");
    assert_ne!(names(DEFAULT, &[0xc010_0060], false), "kernel::work");
}

#[test]
fn lines_come_from_dwarf() {
    let lines = NameStyle {
        lines: true,
        ..DEFAULT
    };
    let s = names(lines, &[LEAF_SQUARE], true);
    let re_ok = s.starts_with("leaf (") && s.contains("tiny.c:") && s.ends_with(")_[i]");
    assert!(re_ok, "{s}");
    assert!(s.contains(";square ("), "{s}");
}

#[test]
fn elf_facts_and_the_entry_points() {
    let mut sym = Symbolizer::load(Some(&common::tiny_elf()), &[]).unwrap();
    assert_eq!(sym.elf().unwrap().arch, Some(Arch::I386));
    assert!(sym.check_arch(Arch::I386).is_ok());
    match sym.check_arch(Arch::X86_64) {
        Err(e @ SymbolError::ArchMismatch { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("tiny.elf") && m.contains("x86_64") && m.contains("i386"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(sym.caller_skipped(LEAF, RET_MIDDLE));
    assert!(!sym.caller_skipped(LEAF, 0), "0 is no return address");
    assert!(sym.caller_skipped(LEAF_RET, RET_MIDDLE));
    assert!(
        !sym.caller_skipped(LEAF_RET, LEAF_LOOP),
        "a local, not a return address"
    );
    assert!(!sym.caller_skipped(LEAF_LOOP, 0));
    // Near the start, [SP] holding the return address of a direct call of `leaf` means
    // the frame is not set up yet (a shrink-wrapped prologue); any other word does not.
    assert!(sym.caller_skipped(LEAF_LOOP, RET_MIDDLE));
    assert!(!sym.caller_skipped(LEAF_LOOP, RET_WORK));
    assert!(!sym.caller_skipped(RET_WORK, RET_MIDDLE));
}

#[test]
fn loading_errors_name_the_file_and_the_problem() {
    let dir = common::temp_dir("symerr");
    let missing = dir.join("nope.elf");
    let e = Symbolizer::load(Some(&missing), &[]).err().unwrap();
    assert!(matches!(e, SymbolError::Open { .. }) && e.to_string().contains("nope.elf"));

    let text = common::write(&dir, "text.elf", b"hello, world");
    let e = ElfImage::load(&text).err().unwrap();
    assert!(matches!(e, SymbolError::NotElf { .. }), "{e}");
    assert!(e.to_string().contains("text.elf"));

    let raw = common::write(&dir, "raw", &common::synthetic_raw(false));
    let e = ElfImage::load(&raw).err().unwrap();
    assert!(e.to_string().contains("the ELF comes second"), "{e}");

    // A stripped copy: no symbols, no DWARF.
    if let Some(stripped) = stripped_tiny(&dir) {
        let e = Symbolizer::load(Some(&stripped), &[]).err().unwrap();
        assert!(matches!(e, SymbolError::Stripped { .. }), "{e}");
        assert!(e.to_string().contains("force-frame-pointers"));
        // A symbol map rescues it.
        let map = common::write(&dir, "System.map", b"c0100000 T leaf\nc0100040 T middle\n");
        let mut sym = Symbolizer::load(Some(&stripped), std::slice::from_ref(&map)).unwrap();
        assert_eq!(&*sym.frames(0xc010_0010)[0].function, "leaf");
    }
    let _ = Path::new("");
}

#[test]
fn truncated_elves_never_panic() {
    let bytes = std::fs::read(common::tiny_elf()).unwrap();
    for cut in (0..bytes.len()).step_by(97) {
        let _ = ElfImage::parse(&bytes[..cut], Path::new("cut.elf"));
    }
    let mut x = 0x9e37_79b9u32;
    let rounds = std::env::var("KP_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    for _ in 0..rounds {
        let mut b = bytes.clone();
        for _ in 0..16 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let i = x as usize % b.len();
            b[i] = (x >> 8) as u8;
        }
        if let Ok(img) = ElfImage::parse(&b, Path::new("fuzzed.elf")) {
            if let Ok(mut s) = Symbolizer::new(Some(img), Vec::new()) {
                for a in [LEAF_SQUARE, RET_WORK, RET_START - 1, LEAF, 0, u64::MAX] {
                    let _ = s.frames(a);
                    let _ = s.caller_skipped(a, a);
                }
            }
        }
    }
}

#[test]
fn addresses_outside_the_code_get_no_dwarf_name() {
    // The example kernel's DWARF still describes functions the linker discarded, at ranges
    // from address 0: a garbage return address such as 0x20 must not be named after them.
    let elf = common::data("example/kernel.elf");
    let mut sym = Symbolizer::load(Some(&elf), &[]).unwrap();
    for a in [0x0u64, 0x20, 0x30, 0x100] {
        assert!(sym.frames(a).is_empty(), "{a:#x} named {:?}", sym.frames(a));
    }
}

/// A copy of tiny.elf without symbols or DWARF in `dir`, made by binutils' `strip` when it
/// is there.
fn stripped_tiny(dir: &Path) -> Option<PathBuf> {
    let stripped = dir.join("stripped.elf");
    std::process::Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(common::tiny_elf())
        .status()
        .is_ok_and(|s| s.success())
        .then_some(stripped)
}

/// The function `sym` names at `probe` (the real one, last).
fn named(sym: &mut Symbolizer, probe: u64) -> Option<String> {
    sym.frames(probe).last().map(|f| f.function.to_string())
}

#[test]
fn several_symbol_maps_are_looked_up_in_order() {
    // The kernel's map, and a second covering a low range (a decompressor's, say), which
    // also names one kernel address: the first source given wins there.
    let (_, [kernel, low]) = common::temp_files(
        "symmaps",
        [
            (
                "System.map",
                b"c0100000 T leaf\nc0100040 T middle\nc0100080 T _start\n",
            ),
            (
                "boot.map",
                b"00001000 T low_one\n00005000 T low_two\nc0100000 T shadowed\n",
            ),
        ],
    );
    let mut sym = Symbolizer::load(None, &[kernel.clone(), low.clone()]).unwrap();
    assert_eq!(named(&mut sym, 0xc010_0010).as_deref(), Some("leaf"));
    assert_eq!(named(&mut sym, 0xc010_0050).as_deref(), Some("middle"));
    assert_eq!(named(&mut sym, 0x1234).as_deref(), Some("low_one"));
    assert_eq!(named(&mut sym, 0x5677).as_deref(), Some("low_two"));
    assert_eq!(named(&mut sym, 0x800), None);
    // Both maps are text maps of the kernel: its range starts at their lowest function.
    assert!(sym.kernel_holds(0x1000) && !sym.kernel_holds(0xfff));
    // The other order: the low map's name wins at the address both name.
    let mut sym = Symbolizer::load(None, &[low, kernel]).unwrap();
    assert_eq!(named(&mut sym, 0xc010_0010).as_deref(), Some("shadowed"));
}

#[test]
fn an_extra_elf_contributes_its_symbol_table() {
    // A map, then an ELF (told by its magic, whatever its name): tiny.elf's functions at
    // 0xc0100000 are named from its symbol table, after the map.
    let tiny = std::fs::read(common::tiny_elf()).unwrap();
    let (dir, [map, elf]) = common::temp_files(
        "symelf",
        [
            ("kallsyms", b"c1000000 T startup_32\nc1000100 T other\n"),
            ("vmlinux.bin", &tiny),
        ],
    );
    let mut sym = Symbolizer::load(None, &[map.clone(), elf.clone()]).unwrap();
    assert_eq!(named(&mut sym, LEAF_LOOP).as_deref(), Some("leaf"));
    assert_eq!(
        named(&mut sym, RET_WORK - 1).as_deref(),
        Some("kernel::work")
    );
    assert_eq!(named(&mut sym, 0xc100_0010).as_deref(), Some("startup_32"));
    // Only its symbol table: no DWARF, so no inlined frame at `square`'s code.
    assert_eq!(sym.frames(LEAF_SQUARE).len(), 1);
    // An ELF among the sources is another image: the kernel's range stays the map's.
    assert!(sym.kernel_holds(0xc100_0000) && !sym.kernel_holds(LEAF_LOOP));
    // Its architecture is checked as the kernel's is.
    assert!(sym.check_arch(Arch::I386).is_ok());
    let e = sym.check_arch(Arch::X86_64).unwrap_err();
    assert!(matches!(e, SymbolError::ArchMismatch { .. }), "{e}");
    assert!(e.to_string().contains("vmlinux.bin"), "{e}");

    // After the kernel ELF: the ELF's own names first, the extra sources' for the rest.
    let low = common::write(
        &dir,
        "boot.map",
        b"00001000 T low_one\nc0100000 T shadowed\n",
    );
    let mut sym = Symbolizer::load(Some(&common::tiny_elf()), &[low, elf]).unwrap();
    assert_eq!(named(&mut sym, LEAF_LOOP).as_deref(), Some("leaf"));
    assert_eq!(named(&mut sym, 0x1234).as_deref(), Some("low_one"));

    // An ELF without symbols names nothing: an error naming it.
    if let Some(stripped) = stripped_tiny(&dir) {
        let e = Symbolizer::load(None, &[map, stripped]).err().unwrap();
        assert!(matches!(e, SymbolError::NoElfSymbols { .. }), "{e}");
        assert!(e.to_string().contains("stripped.elf"), "{e}");
    }
}
