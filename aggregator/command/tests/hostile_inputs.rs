//! Inputs made to hurt: compressed debug sections that claim gigabytes or do not
//! decompress, huge files that are no ELF or symbol map, streams that never end. Each is
//! refused or warned about by name, within a heap bounded by the input (the limits of
//! README.md).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::tiny::*;
use kern_profile::symbolize::{symbol_map, ElfImage, SymbolError, Symbolizer};
use object::{Object, ObjectSection};
use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// Tests run on threads of one process and the meter is global: one test at a time, whole
/// (another test's allocations would count in a measurement).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held for a whole test.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes of heap `f` used at its peak, above what was live when it started.
fn peak_heap<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = HEAP.current_usage();
    HEAP.reset_peak_usage();
    let out = f();
    (out, HEAP.peak_usage().saturating_sub(base))
}

/// tiny.elf with its debug sections compressed by objcopy (`zlib` or `zstd`).
fn compressed_tiny(dir: &Path, how: &str) -> PathBuf {
    let out = dir.join(format!("tiny-{how}.elf"));
    let ok = Command::new("objcopy")
        .arg(format!("--compress-debug-sections={how}"))
        .arg(common::tiny_elf())
        .arg(&out)
        .status()
        .expect("objcopy (binutils) runs");
    assert!(ok.success(), "objcopy --compress-debug-sections={how}");
    out
}

/// File offset of the named section's bytes (for a compressed one, its `Elf32_Chdr`).
fn section_offset(bytes: &[u8], name: &str) -> usize {
    let file = object::File::parse(bytes).unwrap();
    let s = file.section_by_name(name).unwrap();
    s.file_range().unwrap().0 as usize
}

/// The ELF's warnings, one a line, as a user reads them.
fn warnings(elf: &ElfImage) -> String {
    let lines: Vec<String> = elf.warnings.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

fn frames(elf: ElfImage, addr: u64) -> String {
    let mut sym = Symbolizer::new(Some(elf), Vec::new()).unwrap();
    format!("{:?}", sym.frames(addr))
}

#[test]
fn compressed_debug_sections_give_the_same_frames() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-compressed");
    let plain = frames(ElfImage::load(&common::tiny_elf()).unwrap(), LEAF_SQUARE);
    assert!(plain.contains("inlined: true"), "{plain}");
    for how in ["zlib", "zstd"] {
        let elf = ElfImage::load(&compressed_tiny(&dir, how)).unwrap();
        assert!(
            elf.dwarf.is_some() && elf.warnings.is_empty(),
            "{how}: {:?}",
            elf.warnings
        );
        assert_eq!(frames(elf, LEAF_SQUARE), plain, "{how}");
    }
}

#[test]
fn a_compressed_section_claiming_gigabytes_is_refused_before_any_buffer() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-bomb");
    for how in ["zlib", "zstd"] {
        let mut bytes = std::fs::read(compressed_tiny(&dir, how)).unwrap();
        // Elf32_Chdr: ch_type, ch_size, ch_addralign; claim 4 GiB less a little.
        let at = section_offset(&bytes, ".debug_info") + 4;
        bytes[at..at + 4].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        let (elf, peak) = peak_heap(|| ElfImage::parse(&bytes, Path::new("bomb.elf")).unwrap());
        assert!(
            peak < 4 << 20,
            "{how}: {peak} bytes of heap for {} bytes",
            bytes.len()
        );
        assert!(elf.dwarf.is_none(), "{how}");
        let w = warnings(&elf);
        assert!(
            w.contains(".debug_info") && w.contains("claims 4294967280 bytes"),
            "{how}: {w}"
        );
        // The symbol table still names functions.
        assert!(frames(elf, LEAF).contains("leaf"));
    }
}

/// `objcopy ARGS IN OUT`.
fn objcopy(args: &[&str], input: &Path, out: &Path) {
    let ok = Command::new("objcopy")
        .args(args)
        .arg(input)
        .arg(out)
        .status()
        .expect("objcopy (binutils) runs");
    assert!(ok.success(), "objcopy {args:?}");
}

#[test]
fn decompression_is_bounded_per_file_not_per_section() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-total");
    // .debug_str as 8 MiB of zeros, which zlib packs 1026:1: a ratio real compression
    // reaches, but 8 MiB from a 14 KB file is over its bound (FORMAT.md section 4).
    let zeros = dir.join("zeros");
    std::fs::write(&zeros, vec![0u8; 8 << 20]).unwrap();
    let update = format!(".debug_str={}", zeros.display());
    let big = dir.join("big-str.elf");
    objcopy(&["--update-section", &update], &common::tiny_elf(), &big);
    let packed = dir.join("big-str-zlib.elf");
    objcopy(&["--compress-debug-sections=zlib"], &big, &packed);
    let bytes = std::fs::read(&packed).unwrap();
    let bound = (1 << 20) + 32 * bytes.len();
    assert!(
        bound < 8 << 20,
        "{} bytes: the test needs a smaller file",
        bytes.len()
    );

    let (elf, peak) = peak_heap(|| ElfImage::parse(&bytes, Path::new("big-str.elf")).unwrap());
    assert!(
        peak < bound,
        "{peak} bytes of heap for {} bytes",
        bytes.len()
    );
    assert!(elf.dwarf.is_none());
    let w = warnings(&elf);
    assert!(
        w.contains(".debug_str") && w.contains("claims 8388608 bytes") && w.contains("in all"),
        "{w}"
    );
    assert!(
        frames(elf, LEAF).contains("leaf"),
        "the symbol table still names functions"
    );
}

#[test]
fn a_section_that_does_not_decompress_is_a_warning_not_an_empty_section() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-corrupt");
    for how in ["zlib", "zstd"] {
        let mut bytes = std::fs::read(compressed_tiny(&dir, how)).unwrap();
        // Garble the compressed stream after its 12-byte header.
        let at = section_offset(&bytes, ".debug_abbrev") + 12;
        for b in &mut bytes[at..at + 16] {
            *b ^= 0x5a;
        }
        let elf = ElfImage::parse(&bytes, Path::new("garbled.elf")).unwrap();
        let w = warnings(&elf);
        assert!(
            w.contains("unreadable DWARF") && w.contains(".debug_abbrev"),
            "{how}: {w}"
        );
        assert!(elf.dwarf.is_none());
    }
    // Too few bytes for the size the header claims.
    let mut bytes = std::fs::read(compressed_tiny(&dir, "zlib")).unwrap();
    let at = section_offset(&bytes, ".debug_line") + 4;
    let size = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    bytes[at..at + 4].copy_from_slice(&(size + 1).to_le_bytes());
    let elf = ElfImage::parse(&bytes, Path::new("short.elf")).unwrap();
    let w = warnings(&elf);
    assert!(
        w.contains(".debug_line") && w.contains(&format!("header says {}", size + 1)),
        "{w}"
    );
}

/// A 2 GiB sparse file (no disk used), zeros throughout or after a few given bytes.
fn sparse(dir: &Path, name: &str, start: &[u8]) -> PathBuf {
    let p = common::write(dir, name, start);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    p
}

#[test]
fn huge_files_that_are_no_elf_or_map_are_refused_from_their_first_bytes() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-sparse");
    let zeros = sparse(&dir, "zeros", b"");
    let (e, peak) = peak_heap(|| ElfImage::load(&zeros).err().unwrap());
    assert!(matches!(e, SymbolError::NotElf { .. }), "{e}");
    assert!(
        peak < 1 << 20,
        "{peak} bytes of heap to refuse a 2 GiB non-ELF"
    );
    let (e, peak) = peak_heap(|| symbol_map::load(&zeros).err().unwrap());
    assert!(
        matches!(e, SymbolError::BadSymbolMap { line: 1, .. }),
        "{e}"
    );
    assert!(
        peak < 1 << 20,
        "{peak} bytes of heap to refuse a 2 GiB non-map"
    );
    // A map whose first lines are fine, then one endless line.
    let map = sparse(&dir, "map", b"c0100000 T start\nc0100010 T next\n");
    let (e, peak) = peak_heap(|| symbol_map::load(&map).err().unwrap());
    assert!(e.to_string().contains(":3: line longer than"), "{e}");
    assert!(peak < 1 << 20, "{peak} bytes of heap");
}

#[test]
fn symbol_maps_still_load_line_by_line() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-map");
    let map = common::write(
        &dir,
        "System.map",
        b"c0100000 T leaf\r\n\nc0100030 t middle\nc0100060 T kernel_work",
    );
    let table = symbol_map::load(&map).unwrap();
    assert_eq!(table.lookup(0xc010_0031).unwrap().name.as_ref(), "middle");
    assert_eq!(
        table.lookup(0xc010_0061).unwrap().name.as_ref(),
        "kernel_work"
    );
}

#[test]
fn endless_devices_are_refused_as_every_input() {
    let _serial = serial();
    let zero = Path::new("/dev/zero");
    for e in [
        ElfImage::load(zero).err().unwrap().to_string(),
        symbol_map::load(zero).err().unwrap().to_string(),
    ] {
        assert!(
            e.contains("/dev/zero") && e.contains("character device"),
            "{e}"
        );
    }
}

/// Runs the `kern-profile` binary; returns its exit code and standard error.
fn kp(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = common::kp(dir, args);
    (o.status.code(), common::stderr(&o))
}

#[test]
fn the_cli_refuses_endless_streams_as_samples_and_traces() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-cli-dev");
    let elf = common::tiny_elf();
    let elf = elf.to_str().unwrap();
    for args in [
        &["/dev/zero", elf][..],
        &["/dev/urandom", elf][..],
        &["--alloc", "/dev/zero", elf][..],
    ] {
        let (code, err) = kp(&dir, args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains("character device"), "{args:?}: {err}");
    }
}

#[test]
fn every_cause_is_printed_once() {
    let _serial = serial();
    let dir = common::temp_dir("hostile-cli-errors");
    let elf = common::tiny_elf();
    let elf = elf.to_str().unwrap();
    std::fs::create_dir_all(dir.join("a-dir")).unwrap();
    for (args, cause) in [
        (&["missing.raw", elf][..], "No such file or directory"),
        (
            &["--alloc", "missing.trace", elf][..],
            "No such file or directory",
        ),
        (&["a-dir", elf][..], "is a directory"),
        (&["--alloc", "a-dir", elf][..], "is a directory"),
        (
            &["--symbols", "missing.map", "a-dir"][..],
            "No such file or directory",
        ),
    ] {
        let (code, err) = kp(&dir, args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert_eq!(err.matches(cause).count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn the_alloc_report_sums_saturate_where_stacks_merge_by_name() {
    let _serial = serial();
    // Two live blocks of 2^63 units on two address stacks that name the same: their sum is
    // past u64::MAX, and used to wrap to 0 (a panic in debug builds).
    let mut t = common::trace::Trace::new();
    t.alloc("heap", 0x10, 1 << 63, &[0xa])
        .alloc("heap", 0x20, 1 << 63, &[0xb]);
    let a = t.analyze(kern_profile_alloc::View::Live);
    let mut out = Vec::new();
    kern_profile::output::alloc_report::write_report(&mut out, &a, &mut |_| "same".into(), 5)
        .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(&format!("{}  100.0%  same", u64::MAX)),
        "{out}"
    );
}

#[test]
fn compressed_call_frame_information_is_held_to_the_same_bound() {
    let _serial = serial();
    // tiny-riscv64.elf's .eh_frame flagged SHF_COMPRESSED, its first bytes an Elf64_Chdr
    // (zlib) that claims 1 GiB: the claim is refused before any buffer is made.
    let mut bytes = std::fs::read(common::data("tiny-riscv64.elf")).unwrap();
    let index = {
        let file = object::File::parse(&*bytes).unwrap();
        file.section_by_name(".eh_frame").unwrap().index().0
    };
    let le64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let shoff = le64(&bytes, 0x28) as usize;
    let shentsize = u16::from_le_bytes([bytes[0x3a], bytes[0x3b]]) as usize;
    let flags_at = shoff + index * shentsize + 8;
    let flags = le64(&bytes, flags_at) | 0x800;
    bytes[flags_at..flags_at + 8].copy_from_slice(&flags.to_le_bytes());
    let at = section_offset(&bytes, ".eh_frame");
    bytes[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    bytes[at + 8..at + 16].copy_from_slice(&(1u64 << 30).to_le_bytes());
    let (elf, peak) = peak_heap(|| ElfImage::parse(&bytes, Path::new("cfi-bomb.elf")).unwrap());
    assert!(
        peak < 4 << 20,
        "{peak} bytes of heap for {} bytes",
        bytes.len()
    );
    let w = warnings(&elf);
    assert!(
        w.contains(".eh_frame") && w.contains("claims 1073741824 bytes"),
        "{w}"
    );
}
