//! Each check refuses its FDE alone and counts it; the others are kept and found.

use crate::tables::cfi::tests::X86_64;
use crate::tables::cfi::{CfiSection, CfiTable};
use crate::tables::stats::Refusal;
use crate::tables::text::TextRanges;

/// The rows every FDE of [`Frame`] gives (the instructions of `cfi::tests::debug_frame`).
const INSNS: [u8; 8] = [0x41, 0x0e, 16, 0x86, 2, 0x44, 0x0d, 6];

/// A `.debug_frame` built entry by entry: a CIE at offset 0 (CFA = rsp + 8, return address
/// at CFA - 8), then FDEs naming it.
struct Frame(Vec<u8>);

impl Frame {
    fn new() -> Frame {
        let mut cie = vec![
            0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1,
        ];
        while !(cie.len() + 4).is_multiple_of(8) {
            cie.push(0);
        }
        let mut out = (cie.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&cie);
        Frame(out)
    }

    /// An entry of `body`, its length before it.
    fn entry(&mut self, body: &[u8]) -> &mut Frame {
        self.0.extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.0.extend_from_slice(body);
        self
    }

    /// An FDE over `[start, start + len)` in the standard layout, its CIE at `cie`.
    fn fde_of(&mut self, cie: u32, start: u64, len: u64) -> &mut Frame {
        let mut b = cie.to_le_bytes().to_vec();
        b.extend_from_slice(&start.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&INSNS);
        self.entry(&b)
    }

    fn fde(&mut self, start: u64, len: u64) -> &mut Frame {
        self.fde_of(0, start, len)
    }

    /// The same FDE as FreePascal writes it: the 32-bit format, an 8-byte CIE pointer.
    fn freepascal_fde(&mut self, start: u64, len: u64) -> &mut Frame {
        let mut b = 0u64.to_le_bytes().to_vec();
        b.extend_from_slice(&start.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&INSNS);
        self.entry(&b)
    }

    fn table(&self, text: &TextRanges) -> CfiTable {
        let s = [CfiSection {
            name: ".debug_frame",
            data: &self.0,
            address: 0,
            text: None,
        }];
        CfiTable::parse_in(&s, 8, X86_64, 1000, text).unwrap()
    }
}

/// The kernel's text in these tests.
fn text() -> TextRanges {
    TextRanges::new([(0x1000, 0x2000), (0x8000, 0x8100)])
}

/// Whether `t` covers `[start, start + 0x40)`, an FDE of [`Frame`].
fn covers(t: &CfiTable, start: u64) -> bool {
    t.find(start).is_some() && t.find(start + 0x3f).is_some()
}

#[test]
fn an_fde_outside_the_text_is_refused_alone() {
    let t = Frame::new()
        .fde(0x1000, 0x40)
        .fde(0x9000, 0x40)
        .fde(0x1f00, 0x200)
        .fde(0x8000, 0x40)
        .table(&text());
    let s = t.stats();
    assert_eq!((s.used, s.refused_for(Refusal::OutsideText)), (2, 2));
    assert!(covers(&t, 0x1000) && covers(&t, 0x8000));
    assert_eq!(t.find(0x1040), None);
    assert_eq!(t.find(0x9000), None);
    assert_eq!(t.find(0x1f00), None);
    assert_eq!(
        s.to_string(),
        "2 entries used, 2 refused (outside the kernel's text 2)"
    );
}

#[test]
fn of_two_overlapping_fdes_the_first_is_kept() {
    let t = Frame::new()
        .fde(0x1000, 0x40)
        .fde(0x1020, 0x40)
        .fde(0x1000, 0x100)
        .fde(0x1040, 0x40)
        .table(&text());
    let s = t.stats();
    assert_eq!((s.used, s.refused_for(Refusal::Overlapping)), (2, 2));
    // Side by side is no overlap.
    assert!(covers(&t, 0x1000) && covers(&t, 0x1040));
    assert_eq!(t.find(0x1080), None);
    // The refused ones' rows are not there: the first FDE's are.
    assert_eq!(t.find(0x1020), t.find(0x1010));
}

#[test]
fn freepascal_fdes_are_read_with_their_8_byte_cie_pointers() {
    // Functions at 0x1000 and 0x8000, and one the linker discarded (at 0, 0x27 bytes): read
    // as DWARF says, that one covers 0 to 0x27_0000_0000, the kernel's text with it.
    let mut f = Frame::new();
    f.freepascal_fde(0x1000, 0x40)
        .freepascal_fde(0, 0x27)
        .freepascal_fde(0x8000, 0x40);
    let t = f.table(&text());
    let s = t.stats();
    assert_eq!(
        (
            s.used,
            s.refused_for(Refusal::OutsideText),
            s.wide_cie_pointers
        ),
        (2, 1, 2),
        "{s}"
    );
    assert!(covers(&t, 0x1000) && covers(&t, 0x8000));
    assert_eq!(t.find(0x1800), None);
    // The rows are those of the same FDEs in the standard layout.
    let plain = Frame::new()
        .fde(0x1000, 0x40)
        .fde(0x8000, 0x40)
        .table(&text());
    for a in [0x1000, 0x1001, 0x1005, 0x103f, 0x8004] {
        assert_eq!(t.find(a), plain.find(a), "{a:#x}");
    }
    // The kernel's text unknown, nothing tells the layouts apart: read as DWARF says, every
    // FDE is far from the code (and the discarded one over it).
    let blind = f.table(&TextRanges::unknown());
    assert_eq!(blind.stats().wide_cie_pointers, 0);
    assert!(blind
        .find(0x1001)
        .is_none_or(|r| Some(r) != plain.find(0x1001)));
}

#[test]
fn a_length_past_the_section_ends_it_there() {
    let mut f = Frame::new();
    f.fde(0x1000, 0x40);
    // Claims 0x100 bytes; 24 follow.
    f.0.extend_from_slice(&0x100u32.to_le_bytes());
    f.0.extend_from_slice(&[0; 20]);
    let t = f.table(&text());
    assert_eq!(
        (t.stats().used, t.stats().refused_for(Refusal::Length)),
        (1, 1)
    );
    assert!(covers(&t, 0x1000));
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    // Too short for its addresses: refused alone, the next one read.
    let mut f = Frame::new();
    f.entry(&[0, 0, 0, 0, 1, 2, 3]).fde(0x1000, 0x40);
    let t = f.table(&text());
    assert_eq!(
        (t.stats().used, t.stats().refused_for(Refusal::Length)),
        (1, 1)
    );
    assert!(t.warnings.is_empty());
}

#[test]
fn wrapping_ranges_foreign_pointer_sizes_and_bad_cie_pointers_are_refused_alone() {
    let mut f = Frame::new();
    // A CIE of version 4 with 4-byte addresses, in a 64-bit ELF.
    let cie4 = f.0.len() as u32;
    f.entry(&[
        0xff, 0xff, 0xff, 0xff, 4, 0, 4, 0, 1, 0x78, 16, 0x0c, 7, 8, 0, 0,
    ]);
    let mut narrow = cie4.to_le_bytes().to_vec();
    narrow.extend_from_slice(&0x1100u32.to_le_bytes());
    narrow.extend_from_slice(&0x40u32.to_le_bytes());
    f.entry(&narrow)
        .fde(u64::MAX - 0x10, 0x40)
        .fde(0x1200, 0)
        // A CIE pointer to the first FDE: no CIE there.
        .fde_of(44, 0x1300, 0x40)
        .fde(0x1000, 0x40);
    let t = f.table(&text());
    let s = t.stats();
    assert_eq!(s.used, 1, "{s}");
    assert_eq!(s.refused_for(Refusal::PointerSize), 1, "{s}");
    assert_eq!(s.refused_for(Refusal::Range), 2, "{s}");
    assert_eq!(s.refused_for(Refusal::Unreadable), 1, "{s}");
    assert!(covers(&t, 0x1000));
    assert_eq!(t.find(0x1101), None);
}
