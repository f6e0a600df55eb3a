//! The original C plugin's format: `u8 n` then `n` u64 addresses.

use kern_profile_format::{detect, CpuFormat, LegacyReader};

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
