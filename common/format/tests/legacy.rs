//! The original C plugin's format: `u8 n` then `n` u64 addresses.

use kern_profile_format::{detect, CpuFormat, LegacyReader, LEGACY_MAX_EMPTY_RUN};

fn legacy(stacks: &[&[u64]]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in stacks {
        out.push(s.len() as u8);
        for a in *s {
            out.extend_from_slice(&a.to_le_bytes());
        }
    }
    out
}

#[test]
fn reads_samples() {
    let bytes = legacy(&[&[0xc010_0000, 0xc010_0100], &[0xc020_0000], &[]]);
    assert_eq!(detect(&bytes), CpuFormat::Legacy);
    let mut r = LegacyReader::new(&bytes[..]);
    let mut got = Vec::new();
    while let Some(s) = r.next_sample().unwrap() {
        got.push(s.addresses().collect::<Vec<_>>());
    }
    assert_eq!(
        got,
        vec![vec![0xc010_0000, 0xc010_0100], vec![0xc020_0000], vec![]]
    );
    assert_eq!(r.truncation(), None);
}

#[test]
fn truncated_file_keeps_complete_samples() {
    let mut bytes = legacy(&[&[1, 2, 3], &[4, 5]]);
    bytes.truncate(bytes.len() - 3);
    let mut r = LegacyReader::new(&bytes[..]);
    assert_eq!(r.next_sample().unwrap().unwrap().len(), 3);
    assert!(r.next_sample().unwrap().is_none());
    let t = r.truncation().unwrap();
    assert_eq!((t.offset, t.available, t.needed), (25, 14, 17));
}

#[test]
fn a_stream_of_zeros_is_an_error_not_endless_empty_samples() {
    // /dev/zero read as a legacy file: every byte is a sample without any address.
    let mut zeros = std::io::Read::take(std::io::repeat(0), 64 << 20);
    let mut r = LegacyReader::new(&mut zeros);
    let mut empty = 0u32;
    let err = loop {
        match r.next_sample() {
            Ok(Some(s)) => {
                assert!(s.is_empty());
                empty += 1;
            }
            Ok(None) => panic!("64 MiB of zeros read as {empty} empty samples"),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(empty, LEGACY_MAX_EMPTY_RUN);
    assert!(
        err.contains("byte offset 0") && err.contains("without any address"),
        "{err}"
    );
}

#[test]
fn empty_samples_between_real_ones_are_kept() {
    let empties = vec![&[][..]; LEGACY_MAX_EMPTY_RUN as usize];
    let mut stacks: Vec<&[u64]> = vec![&[0xc010_0000]];
    stacks.extend(&empties);
    stacks.push(&[0xc020_0000]);
    stacks.extend(&empties);
    let bytes = legacy(&stacks);
    let mut r = LegacyReader::new(&bytes[..]);
    let mut n = 0;
    while r.next_sample().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, stacks.len());
}
