//! The `.debug_frame` FreePascal 3.2 writes (the symbols tests' program,
//! common/symbols/tests/data/freepascal, built by its build.sh): 32-bit DWARF with 8-byte CIE
//! pointers, read as such, every FDE used where its routine is.

use std::path::Path;

use kern_profile_unwind::tables::{refusals_line, CfaBase, Rule, TableStats};
use kern_profile_unwind::{Limits, UnwindTables};

fn elf() -> Vec<u8> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../symbols/tests/data/freepascal/kernel.elf");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn freepascal_fdes_cover_their_routines() {
    let data = elf();
    let t = UnwindTables::from_elf(&data, Limits::default()).unwrap();
    let s = t.stats().cfi.unwrap();
    // Its nine FDEs (readelf --debug-dump=frames), every one in .text.
    assert_eq!((s.used, s.refused(), s.wide_cie_pointers), (9, 0, 9), "{s}");
    assert_eq!(TableStats::of_elf(&data).unwrap(), t.stats());
    assert_eq!(refusals_line("kernel.elf", &data), None);
    let cfi = t.cfi.as_ref().unwrap();
    // `main` at 0x100000: push rbp (CFA = rsp + 16 after it), mov rbp, rsp (CFA = rbp + 16
    // from 0x100004).
    let first = cfi.find(0x100000).unwrap();
    assert_eq!(
        (first.cfa_base, first.cfa_offset, first.ra),
        (CfaBase::StackPointer, 8, Rule::AtCfa(-8))
    );
    assert_eq!(cfi.find(0x100001).unwrap().cfa_offset, 16);
    assert_eq!(cfi.find(0x100004).unwrap().cfa_base, CfaBase::FramePointer);
    assert_eq!(cfi.find(0x100044).unwrap().cfa_base, CfaBase::FramePointer);
    assert_eq!(cfi.find(0x100045), None);
}
