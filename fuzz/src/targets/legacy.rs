//! The original C plugin's legacy format: `LegacyReader` over any bytes.

use std::hint::black_box;

use crate::{bounded, Trickle};
use kern_profile_format::LegacyReader;

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || read_all(data));
}

fn read_all(data: &[u8]) {
    let mut r = LegacyReader::new(Trickle::new(data));
    let end = data.len() as u64;
    while let Ok(Some(s)) = r.next_sample() {
        assert_eq!(s.addresses().count(), s.len());
        black_box(s.addresses().fold(0, u64::wrapping_add));
        assert!(r.record_offset() < r.offset() && r.offset() <= end);
    }
    if let Some(t) = r.truncation() {
        assert!(t.offset <= end && t.available < t.needed);
        black_box(t.to_string());
    }
}
