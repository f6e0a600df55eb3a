use super::*;

pub(crate) const X86_64: CfiRegisters = CfiRegisters {
    sp: 7,
    fp: 6,
    ra: 16,
};

/// A `.debug_frame` of one CIE (CFA = rsp + 8, return address at CFA - 8) and one FDE over
/// `[start, start + len)`: after one byte CFA = rsp + 16 with rbp saved at CFA - 16, after
/// four more CFA = rbp + 16, then `tail`'s instructions.
pub(crate) fn debug_frame(start: u64, len: u64, tail: &[u8]) -> Vec<u8> {
    let mut cie = vec![0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16];
    cie.extend_from_slice(&[0x0c, 7, 8, 0x90, 1]);
    while !(cie.len() + 4).is_multiple_of(8) {
        cie.push(0);
    }
    let mut out = (cie.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&cie);
    let mut fde = 0u32.to_le_bytes().to_vec();
    fde.extend_from_slice(&start.to_le_bytes());
    fde.extend_from_slice(&len.to_le_bytes());
    fde.extend_from_slice(&[0x41, 0x0e, 16, 0x86, 2, 0x44, 0x0d, 6]);
    fde.extend_from_slice(tail);
    while !(fde.len() + 4).is_multiple_of(8) {
        fde.push(0);
    }
    out.extend_from_slice(&(fde.len() as u32).to_le_bytes());
    out.extend_from_slice(&fde);
    out
}

fn section(data: &[u8]) -> [CfiSection<'_>; 1] {
    [CfiSection {
        name: ".debug_frame",
        data,
        address: 0,
        text: None,
    }]
}

#[test]
fn reads_the_rows_of_a_debug_frame() {
    let data = debug_frame(0x1000, 0x40, &[]);
    let t = CfiTable::parse(&section(&data), 8, X86_64, 100).unwrap();
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let row = |cfa_base, cfa_offset, fp| CfiRow::call(cfa_base, cfa_offset, fp, Rule::AtCfa(-8));
    assert_eq!(t.find(0xfff), None);
    assert_eq!(
        t.find(0x1000),
        Some(row(CfaBase::StackPointer, 8, Rule::Unchanged))
    );
    assert_eq!(
        t.find(0x1001),
        Some(row(CfaBase::StackPointer, 16, Rule::AtCfa(-16)))
    );
    assert_eq!(
        t.find(0x1005),
        Some(row(CfaBase::FramePointer, 16, Rule::AtCfa(-16)))
    );
    assert_eq!(
        t.find(0x103f),
        Some(row(CfaBase::FramePointer, 16, Rule::AtCfa(-16)))
    );
    assert_eq!(t.find(0x1040), None);
}

#[test]
fn leaves_uncovered_what_the_walk_cannot_follow() {
    // DW_CFA_def_cfa_register r3 (rbx): a CFA on a register the walk does not know.
    let data = debug_frame(0x1000, 0x40, &[0x48, 0x0d, 3]);
    let t = CfiTable::parse(&section(&data), 8, X86_64, 100).unwrap();
    assert!(t.find(0x100c).is_some());
    assert_eq!(t.find(0x100d), None);
}

#[test]
fn bounds_the_rows_and_keeps_what_parsed_before_an_error() {
    let data = debug_frame(0x1000, 0x40, &[]);
    let err = CfiTable::parse(&section(&data), 8, X86_64, 2).unwrap_err();
    assert!(
        matches!(
            err,
            TableError::TooLarge {
                what: "CFI rows",
                cap: 2,
                ..
            }
        ),
        "{err:?}"
    );
    // A second FDE cut short: the first one's rows stay, with a warning.
    let mut cut = data.clone();
    cut.extend_from_slice(&debug_frame(0x2000, 0x10, &[])[..30]);
    let t = CfiTable::parse(&section(&cut), 8, X86_64, 100).unwrap();
    assert!(t.find(0x1001).is_some());
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    assert!(
        t.warnings[0].starts_with(".debug_frame: "),
        "{:?}",
        t.warnings
    );
}

#[test]
fn a_row_is_32_bytes() {
    // Limits::default's memory bound counts on it: the rows as read, before they are
    // indexed (12 bytes each then).
    assert_eq!(std::mem::size_of::<Row>(), 32);
}

#[test]
fn reads_a_signal_frame_with_its_saved_stack_pointer() {
    // A CIE with augmentation "zS" (.cfi_signal_frame; no augmentation data): CFA = rsp + 40,
    // rip (16) at CFA - 40, rsp (7) at CFA - 16: Linux's INTR_FRAME at an interrupt's first
    // instruction.
    let mut cie = vec![0xff, 0xff, 0xff, 0xff, 1, b'z', b'S', 0, 1, 0x78, 16, 0];
    cie.extend_from_slice(&[0x0c, 7, 40, 0x90, 5, 0x87, 2]);
    while !(cie.len() + 4).is_multiple_of(8) {
        cie.push(0);
    }
    let mut data = (cie.len() as u32).to_le_bytes().to_vec();
    data.extend_from_slice(&cie);
    let mut fde = 0u32.to_le_bytes().to_vec();
    fde.extend_from_slice(&0x1000u64.to_le_bytes());
    fde.extend_from_slice(&0x10u64.to_le_bytes());
    fde.push(0);
    data.extend_from_slice(&(fde.len() as u32).to_le_bytes());
    data.extend_from_slice(&fde);
    let t = CfiTable::parse(&section(&data), 8, X86_64, 100).unwrap();
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let want = CfiRow {
        sp_saved: NonZeroI16::new(-16),
        signal: true,
        ..CfiRow::call(CfaBase::StackPointer, 40, Rule::Unchanged, Rule::AtCfa(-40))
    };
    assert_eq!(t.find(0x1008), Some(want));
    // The stack pointer at the CFA itself, or in another register: uncovered.
    let mut at_cfa = data.clone();
    let i = at_cfa.iter().position(|&b| b == 0x87).unwrap();
    at_cfa[i + 1] = 0;
    let t = CfiTable::parse(&section(&at_cfa), 8, X86_64, 100).unwrap();
    assert_eq!(t.find(0x1008), None);
}

#[test]
fn finds_rows_over_any_span() {
    let row = |o: i32| CfiRow::call(CfaBase::StackPointer, o, Rule::Unchanged, Rule::AtCfa(-8));
    // Offsets from the lowest row in 32 bits, and rows farther apart than 4 GiB.
    for (low, gap) in [(0x1000u64, 0x100u64), (0, 0x4000_0000_0000)] {
        let rows: Vec<(u64, Option<CfiRow>)> = (0..50)
            .map(|i| (low + i * gap, (i % 5 != 4).then(|| row(8 * i as i32))))
            .collect();
        let t = CfiTable::from_rows(&rows);
        for _ in 0..2 {
            for &(a, r) in &rows {
                assert_eq!(t.find(a), r, "{a:#x}");
                for p in [a.wrapping_sub(1), a + 1] {
                    assert_eq!(t.find(p), t.find_by_search(p), "{p:#x}");
                }
            }
        }
        // Below the first row, and far beyond the last (an end).
        assert_eq!(t.find(low.wrapping_sub(1)), None);
        assert_eq!(t.find(u64::MAX), None);
    }
}
