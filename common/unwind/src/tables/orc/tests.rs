use super::*;

/// `.orc_unwind_ip` words for entries at `addrs`, the section loaded at `ip_addr`.
pub(crate) fn ip_section(ip_addr: u64, addrs: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        let word_at = ip_addr + 4 * i as u64;
        out.extend_from_slice(&((a.wrapping_sub(word_at)) as i32).to_le_bytes());
    }
    out
}

/// A 6-byte entry in the 6.4 layout.
pub(crate) fn typed(sp_reg: u8, sp_off: i16, bp_reg: u8, bp_off: i16, kind: u8) -> [u8; 6] {
    let [a, b] = sp_off.to_le_bytes();
    let [c, d] = bp_off.to_le_bytes();
    [a, b, c, d, sp_reg | bp_reg << 4, kind]
}

#[test]
fn decodes_each_layout() {
    // 6.1 (Original): CALL 0, REGS 1, REGS_PARTIAL 2, end bit 2.
    let call = OrcEntry::decode(&[16, 0, 0xf0, 0xff, 0x15, 0], OrcLayout::Original);
    assert_eq!(
        call,
        OrcEntry {
            sp_offset: 16,
            bp_offset: -16,
            sp_reg: reg::SP,
            bp_reg: reg::PREV_SP,
            kind: OrcKind::Call,
            signal: false
        }
    );
    let kind = |b: [u8; 6], l| OrcEntry::decode(&b, l).kind;
    use OrcLayout::*;
    assert_eq!(kind([0, 0, 0, 0, 5, 1], Original), OrcKind::Regs);
    assert_eq!(kind([0, 0, 0, 0, 5, 2], Original), OrcKind::RegsPartial);
    assert_eq!(kind([0, 0, 0, 0, 0, 4], Original), OrcKind::EndOfStack);
    assert_eq!(kind([0, 0, 0, 0, 0, 0], Original), OrcKind::Undefined);
    assert_eq!(kind([0, 0, 0, 0, 5, 3], Original), OrcKind::Undefined);
    // 6.3 (Signal): bit 2 is signal, bit 3 end.
    assert_eq!(kind([0, 0, 0, 0, 0, 8], Signal), OrcKind::EndOfStack);
    assert!(OrcEntry::decode(&[8, 0, 0, 0, 5, 4], Signal).signal);
    assert_eq!(kind([8, 0, 0, 0, 5, 4], Signal), OrcKind::Call);
    // 6.4 on (Typed): UNDEFINED 0, END_OF_STACK 1, CALL 2, REGS 3, REGS_PARTIAL 4; signal 8.
    assert_eq!(kind(typed(5, 8, 0, 0, 2), Typed), OrcKind::Call);
    assert_eq!(kind(typed(5, 0, 0, 0, 3), Typed), OrcKind::Regs);
    assert_eq!(kind(typed(5, 0, 0, 0, 4 | 8), Typed), OrcKind::RegsPartial);
    assert!(OrcEntry::decode(&typed(5, 0, 0, 0, 4 | 8), Typed).signal);
    assert_eq!(kind(typed(0, 0, 0, 0, 1), Typed), OrcKind::EndOfStack);
    assert_eq!(kind(typed(0, 0, 0, 0, 0), Typed), OrcKind::Undefined);
    // A frame without a stack pointer is no frame, whatever its type says.
    assert_eq!(kind(typed(0, 8, 0, 0, 2), Typed), OrcKind::Undefined);
    assert_eq!(kind(typed(5, 8, 0, 0, 7), Typed), OrcKind::Undefined);
}

#[test]
fn detects_the_layout() {
    let old = [[8, 0, 0, 0, 5, 0], [0, 0, 0, 0, 0, 4]].concat();
    assert_eq!(OrcLayout::detect(false, &old), OrcLayout::Original);
    let v63 = [[8, 0, 0, 0, 5, 0], [0, 0, 0, 0, 0, 8]].concat();
    assert_eq!(OrcLayout::detect(false, &v63), OrcLayout::Signal);
    assert_eq!(OrcLayout::detect(true, &old), OrcLayout::Typed);
}

#[test]
fn finds_the_entry_covering_an_address() {
    let ip_addr = 0xffff_ffff_8200_0000;
    // Out of order, with a weak terminator at the same address as a real entry.
    let addrs = [
        0xffff_ffff_8100_2000,
        0xffff_ffff_8100_1000,
        0xffff_ffff_8100_3000,
        0xffff_ffff_8100_2000,
    ];
    let entries = [
        typed(5, 16, 0, 0, 2),
        typed(5, 8, 0, 0, 2),
        typed(0, 0, 0, 0, 0),
        typed(0, 0, 0, 0, 0),
    ]
    .concat();
    let t = OrcTable::parse(
        ip_addr,
        &ip_section(ip_addr, &addrs),
        &entries,
        OrcLayout::Typed,
        10,
    )
    .unwrap();
    assert_eq!(t.len(), 4);
    assert_eq!(t.span(), (0xffff_ffff_8100_1000, 0xffff_ffff_8100_3000));
    assert_eq!(t.find(0xffff_ffff_8100_0fff), None);
    assert_eq!(t.find(0xffff_ffff_8100_1000).unwrap().sp_offset, 8);
    assert_eq!(t.find(0xffff_ffff_8100_1fff).unwrap().sp_offset, 8);
    // The real entry wins over the terminator at its address.
    let e = t.find(0xffff_ffff_8100_2000).unwrap();
    assert_eq!((e.kind, e.sp_offset), (OrcKind::Call, 16));
    assert_eq!(
        t.find(0xffff_ffff_8100_3000).unwrap().kind,
        OrcKind::Undefined
    );
    assert_eq!(t.find(0xffff_ffff_8100_3001), None);
}

#[test]
fn finds_entries_across_a_wide_table() {
    // 3 GiB of code: blocks larger than 256 bytes keep the index small.
    let base = 0x1_0000_0000u64;
    let addrs: Vec<u64> = (0..40)
        .map(|i| base + i * 0x0480_0000 + (i & 1) * 0x80)
        .collect();
    let entries: Vec<u8> = (0..40)
        .flat_map(|i| typed(5, 8 * i as i16, 0, 0, 2))
        .collect();
    let ip_addr = base + 0x5800_0000;
    let t = OrcTable::parse(
        ip_addr,
        &ip_section(ip_addr, &addrs),
        &entries,
        OrcLayout::Typed,
        100,
    )
    .unwrap();
    assert!(t.heap_bytes() < 8 << 20, "{}", t.heap_bytes());
    for (i, &a) in addrs.iter().enumerate() {
        assert_eq!(t.find(a).unwrap().sp_offset, 8 * i as i16);
        assert_eq!(
            t.find(a.saturating_sub(1)).map(|e| e.sp_offset),
            i.checked_sub(1).map(|j| 8 * j as i16)
        );
        if i + 1 < addrs.len() {
            assert_eq!(t.find(addrs[i + 1] - 1).unwrap().sp_offset, 8 * i as i16);
        }
    }
}

#[test]
fn refuses_bad_tables() {
    let e = typed(5, 8, 0, 0, 2);
    let ips = ip_section(0x1000, &[0x10, 0x20]);
    assert_eq!(
        OrcTable::parse(0x1000, &ips, &e, OrcLayout::Typed, 10).unwrap_err(),
        TableError::OrcSizes { ips: 8, entries: 6 }
    );
    assert_eq!(
        OrcTable::parse(0x1000, &ips[..7], &[e, e].concat(), OrcLayout::Typed, 10).unwrap_err(),
        TableError::OrcSizes {
            ips: 7,
            entries: 12
        }
    );
    assert_eq!(
        OrcTable::parse(0x1000, &[], &[], OrcLayout::Typed, 10).unwrap_err(),
        TableError::OrcEmpty
    );
    let err = OrcTable::parse(0x1000, &ips, &[e, e].concat(), OrcLayout::Typed, 1).unwrap_err();
    assert_eq!(
        err,
        TableError::TooLarge {
            what: "ORC entries",
            count: 2,
            cap: 1
        }
    );
    assert!(err.to_string().contains("memory bound"), "{err}");
    // Offsets that spread the entries over more than 4 GiB.
    let mut wide = 0x7fff_ffffi32.to_le_bytes().to_vec();
    wide.extend_from_slice(&(-0x7fff_ffffi32).to_le_bytes());
    wide.extend_from_slice(&0x7fff_ffffi32.to_le_bytes());
    let err = OrcTable::parse(
        0x1_0000_0000,
        &wide,
        &[e, e, e].concat(),
        OrcLayout::Typed,
        10,
    );
    assert!(matches!(err, Err(TableError::OrcSpan { .. })), "{err:?}");
}

#[test]
fn an_entry_takes_8_bytes() {
    // Limits::default's memory bound counts on it: an address and an id each, the distinct
    // entries few, the index a word per 128 bytes of code and a fixed cache.
    let n = 100_000u64;
    let addrs: Vec<u64> = (0..n).map(|i| 0x1000 + 16 * i).collect();
    let entries: Vec<u8> = (0..n)
        .flat_map(|i| typed(5, 8 * (i % 4) as i16, 0, 0, 2))
        .collect();
    let ip_addr = 0x1000_0000;
    let ips = ip_section(ip_addr, &addrs);
    let t = OrcTable::parse(ip_addr, &ips, &entries, OrcLayout::Typed, n as usize).unwrap();
    let index = (16 * n / 128 + 2) * 4 + (64 << 10) + 32 * 8 + 4 * 8;
    assert!(t.heap_bytes() as u64 <= 8 * n + index, "{}", t.heap_bytes());
    assert_eq!(t.find(0x1000 + 16 * 5 + 3).unwrap().sp_offset, 8);
}

#[test]
fn entries_outside_the_text_or_twice_at_an_address_are_refused_alone() {
    use crate::tables::stats::Refusal;
    use crate::tables::text::TextRanges;
    let ip_addr = 0xffff_ffff_8200_0000;
    let text = TextRanges::new([(0xffff_ffff_8100_0000, 0xffff_ffff_8100_3000)]);
    // A call frame, one far below the kernel (which would also spread the table over more
    // than 4 GiB), a second real entry at the first one's address, a weak terminator there
    // (kept: it is how Linux ends a function), and the terminator at the text's end.
    let addrs = [
        0xffff_ffff_8100_1000,
        0x1000,
        0xffff_ffff_8100_1000,
        0xffff_ffff_8100_2000,
        0xffff_ffff_8100_2000,
        0xffff_ffff_8100_3000,
    ];
    let entries = [
        typed(5, 8, 0, 0, 2),
        typed(5, 16, 0, 0, 2),
        typed(5, 24, 0, 0, 2),
        typed(5, 32, 0, 0, 2),
        typed(0, 0, 0, 0, 0),
        typed(0, 0, 0, 0, 0),
    ]
    .concat();
    let ips = ip_section(ip_addr, &addrs);
    let t = OrcTable::parse_in(ip_addr, &ips, &entries, OrcLayout::Typed, 10, &text).unwrap();
    let s = t.stats();
    assert_eq!(
        (
            s.used,
            s.refused_for(Refusal::OutsideText),
            s.refused_for(Refusal::Overlapping)
        ),
        (4, 1, 1),
        "{s}"
    );
    assert_eq!(t.len(), 4);
    assert_eq!(t.span(), (0xffff_ffff_8100_1000, 0xffff_ffff_8100_3000));
    assert_eq!(t.find(0xffff_ffff_8100_1000).unwrap().sp_offset, 8);
    assert_eq!(t.find(0xffff_ffff_8100_2000).unwrap().sp_offset, 32);
    assert_eq!(t.find(0x1000), None);
    let checked = OrcTable::check(ip_addr, &ips, &entries, OrcLayout::Typed, &text).unwrap();
    assert_eq!(checked, s);
    // Every entry refused: an empty table that finds nothing, and says why.
    let far = ip_section(ip_addr, &[0x1000, 0x2000]);
    let two = [typed(5, 8, 0, 0, 2), typed(0, 0, 0, 0, 0)].concat();
    let t = OrcTable::parse_in(ip_addr, &far, &two, OrcLayout::Typed, 10, &text).unwrap();
    assert!(t.is_empty());
    assert_eq!(t.find(0x1000), None);
    assert_eq!(t.find(0), None);
    assert_eq!(t.stats().refused_for(Refusal::OutsideText), 2);
}
