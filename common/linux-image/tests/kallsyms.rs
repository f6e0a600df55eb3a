//! The kallsyms reader on synthetic tables in every layout Linux has used.

mod common;

use std::path::Path;

use common::{build_tables, many_syms, sym, Encoding, Layout, Order, Sym};
use kern_profile_linux_image::{read_kallsyms, AddressEncoding, ImageError, Kallsyms};

fn layout(ptr: usize, order: Order, encoding: Encoding) -> Layout {
    Layout {
        ptr,
        marker_size: 4,
        order,
        encoding,
        zero_base: false,
    }
}

fn read(data: &[u8], ptr: usize) -> Result<Kallsyms, ImageError> {
    read_kallsyms(Path::new("synthetic.img"), data, ptr)
}

/// The tables give back every symbol: address, type and name, in address order.
fn assert_round_trip(syms: &[Sym], kallsyms: &Kallsyms) {
    let mut want = syms.to_vec();
    want.sort_by_key(|s| s.address);
    assert_eq!(kallsyms.symbols.len(), want.len());
    for (got, want) in kallsyms.symbols.iter().zip(&want) {
        assert_eq!(
            (got.address, got.kind, got.name.as_str()),
            (want.address, want.kind, want.name.as_str())
        );
    }
}

#[test]
fn every_layout_and_encoding_round_trips() {
    for ptr in [4, 8] {
        let base = if ptr == 8 {
            0xffff_ffff_8100_0000
        } else {
            0xc100_0000
        };
        let syms = many_syms(700, base);
        for order in [Order::Old, Order::OldWithSeqs, Order::New] {
            for encoding in [Encoding::Absolute, Encoding::Relative] {
                for marker_size in [4, ptr] {
                    let mut l = layout(ptr, order, encoding);
                    l.marker_size = marker_size;
                    let (data, token_table) = build_tables(&syms, l, 333);
                    let k = read(&data, ptr).unwrap_or_else(|e| {
                        panic!("{ptr} {order:?} {encoding:?} {marker_size}: {e}")
                    });
                    assert_round_trip(&syms, &k);
                    assert_eq!(k.layout.token_table, token_table as u64);
                    assert_eq!(k.layout.num_syms, 700);
                    assert_eq!(k.layout.marker_size, marker_size);
                    assert_eq!(k.layout.addresses_after_tokens, order == Order::New);
                    assert_eq!(
                        k.layout.seqs_of_names.is_some(),
                        order == Order::OldWithSeqs
                    );
                    let want = match encoding {
                        Encoding::Absolute => AddressEncoding::Absolute,
                        _ => AddressEncoding::Relative,
                    };
                    assert_eq!(k.layout.encoding, want, "{ptr} {order:?}");
                    assert_eq!(k.text, Some(base));
                    assert_eq!(k.stext, Some(base));
                    assert_eq!(k.address_of("schedule"), Some(base + 0x40));
                }
            }
        }
    }
}

#[test]
fn absolute_percpu_symbols_keep_their_small_addresses() {
    let base = 0xffff_ffff_8100_0000;
    let mut syms = many_syms(300, base);
    syms.push(sym(0, 'A', "fixed_percpu_data"));
    syms.push(sym(0x8000, 'A', "cpu_number"));
    for order in [Order::OldWithSeqs, Order::New] {
        let (data, _) = build_tables(&syms, layout(8, order, Encoding::AbsolutePercpu), 64);
        let k = read(&data, 8).unwrap();
        assert_round_trip(&syms, &k);
        assert_eq!(k.layout.encoding, AddressEncoding::RelativeAbsolutePercpu);
        assert_eq!(k.symbols[0].name, "fixed_percpu_data");
        assert_eq!(
            k.lookup(base + 0x45).map(|s| s.name.as_str()),
            Some("schedule")
        );
    }
}

#[test]
fn sizes_reach_the_next_higher_address() {
    let base = 0xc100_0000;
    let syms = many_syms(10, base);
    let (data, _) = build_tables(&syms, layout(4, Order::Old, Encoding::Relative), 0);
    let k = read(&data, 4).unwrap();
    // _text and _stext share an address: both reach start_kernel.
    assert_eq!(k.symbols[0].size, 0x10);
    assert_eq!(k.symbols[1].size, 0x10);
    assert_eq!(k.symbols[2].size, 0x30);
    assert_eq!(k.symbols.last().unwrap().size, 0);
    assert!(k.symbols.windows(2).all(|w| w[0].address <= w[1].address));
}

#[test]
fn the_proc_format_is_what_the_guest_prints() {
    let syms = vec![
        sym(0xc100_0000, 'T', "_text"),
        sym(0xc100_0000, 'T', "startup_0123456789"),
        sym(0xc100_1234, 't', "do_int80_syscall_32"),
    ];
    let (data, _) = build_tables(&syms, layout(4, Order::Old, Encoding::Relative), 0);
    let mut out = Vec::new();
    read(&data, 4)
        .unwrap()
        .write_proc_format(&mut out, 4)
        .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "c1000000 T _text\nc1000000 T startup_0123456789\nc1001234 t do_int80_syscall_32\n"
    );
}

#[test]
fn long_names_use_two_length_bytes() {
    let base = 0xffff_8000_0801_0000;
    let mut syms = many_syms(20, base);
    let long = format!("_RNvMs_{}", "Q".repeat(300));
    syms.push(sym(base + 0x10_0000, 'T', &long));
    let (data, _) = build_tables(&syms, layout(8, Order::New, Encoding::Relative), 8);
    let k = read(&data, 8).unwrap();
    assert_round_trip(&syms, &k);
    assert_eq!(k.address_of(&long), Some(base + 0x10_0000));
}

#[test]
fn a_relocatable_image_takes_its_base_from_the_rela_entry() {
    // arm64's Image holds 0 for kallsyms_relative_base; an R_AARCH64_RELATIVE entry (offset:
    // the link address of the base's slot, info 1027, addend: the base) fills it at boot.
    let link = 0xffff_8000_0800_0000u64;
    let stext = link + 0x100;
    let syms = many_syms(40, stext);
    let mut l = layout(8, Order::Old, Encoding::Relative);
    l.zero_base = true;
    let (mut data, _) = build_tables(&syms, l, 64);
    let k0 = read(&data, 8).unwrap_err();
    assert!(k0.to_string().contains("RELA"), "{k0}");
    // The base's slot: right before kallsyms_num_syms, which is right before the names.
    let names = {
        let with_base = {
            let mut l = l;
            l.zero_base = false;
            build_tables(&syms, l, 64).0
        };
        // The only difference is the base's 8 bytes (aligned).
        (0..data.len()).find(|&i| data[i] != with_base[i]).unwrap() / 8 * 8
    };
    while !data.len().is_multiple_of(8) {
        data.push(0);
    }
    let mut rela = Vec::new();
    rela.extend_from_slice(&(link + names as u64).to_le_bytes());
    rela.extend_from_slice(&1027u64.to_le_bytes());
    rela.extend_from_slice(&stext.to_le_bytes());
    // A function pointer to start_kernel, as the scoring of candidates looks for.
    rela.extend_from_slice(&(link + 0x80).to_le_bytes());
    rela.extend_from_slice(&1027u64.to_le_bytes());
    rela.extend_from_slice(&(stext + 0x10).to_le_bytes());
    data.extend_from_slice(&rela);
    let k = read(&data, 8).unwrap();
    assert_round_trip(&syms, &k);
    assert_eq!(k.image_base, Some(link));
}

#[test]
fn an_image_without_tables_says_so_and_names_the_file() {
    let e = read(&[0x11; 4096], 8).unwrap_err();
    assert!(matches!(e, ImageError::NoKallsyms { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with("synthetic.img: no kallsyms tables"),
        "{e}"
    );
}

#[test]
fn cut_or_damaged_tables_are_errors_not_panics() {
    let syms = many_syms(600, 0xc100_0000);
    let (data, token_table) = build_tables(&syms, layout(4, Order::Old, Encoding::Relative), 16);
    // Cut anywhere: an error (or, past the token index, still the full table).
    for cut in (0..data.len()).step_by(97) {
        let _ = read(&data[..cut], 4);
    }
    assert!(read(&data[..token_table + 600], 4).is_err());
    // A marker that does not land on a name.
    let mut bad = data.clone();
    let markers_end = token_table;
    bad[markers_end - 4] ^= 0x01;
    let e = read(&bad, 4).unwrap_err();
    assert!(matches!(e, ImageError::BadKallsyms { .. }), "{e}");
    assert!(e.to_string().contains("kallsyms_markers"), "{e}");
    // Unsorted addresses (the offsets start after the 16-byte prefix).
    let mut bad = data.clone();
    bad[16 + 400..16 + 404].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = read(&bad, 4).unwrap_err();
    assert!(e.to_string().contains("kallsyms_offsets"), "{e}");
    // Every byte flipped in turn: never a panic.
    for i in (0..data.len()).step_by(13) {
        let mut bad = data.clone();
        bad[i] = bad[i].wrapping_add(0x41);
        let _ = read(&bad, 4);
    }
}
