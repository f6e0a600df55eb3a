//! Instructions as text for `annotate`, each architecture by a kept crate: iced-x86 (i386,
//! x86_64, Intel syntax), yaxpeax-arm (aarch64), raki (riscv64, RV64IMAC and Zicsr; what it
//! does not decode is shown as a `.word`).

use kern_profile_format::Arch;

/// The instructions of `code` at `start`: address, length and text.
pub fn decode(
    arch: Option<Arch>,
    start: u64,
    code: &[u8],
) -> (Vec<(u64, usize, String)>, Option<&'static str>) {
    match arch {
        Some(Arch::I386) => (decode_x86(32, start, code), None),
        Some(Arch::X86_64) => (decode_x86(64, start, code), None),
        Some(Arch::Aarch64) => (decode_aarch64(start, code), None),
        Some(Arch::Riscv64) => (decode_riscv64(start, code), None),
        None => (
            raw_words(start, code, |_| 4),
            Some("instructions as raw words (an architecture kern-profile does not know)"),
        ),
    }
}

fn decode_x86(bitness: u32, start: u64, code: &[u8]) -> Vec<(u64, usize, String)> {
    use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
    let mut decoder = Decoder::with_ip(bitness, code, start, DecoderOptions::NONE);
    let mut formatter = IntelFormatter::new();
    let o = formatter.options_mut();
    o.set_hex_prefix("0x");
    o.set_hex_suffix("");
    o.set_uppercase_hex(false);
    o.set_leading_zeros(false);
    o.set_branch_leading_zeros(false);
    let mut out = Vec::new();
    let mut text = String::new();
    for ins in &mut decoder {
        text.clear();
        if ins.is_invalid() {
            text.push_str("(bad)");
        } else {
            formatter.format(&ins, &mut text);
        }
        out.push((ins.ip(), ins.len(), text.clone()));
    }
    out
}

fn decode_aarch64(start: u64, code: &[u8]) -> Vec<(u64, usize, String)> {
    use yaxpeax_arch::{Decoder, U8Reader};
    let decoder = yaxpeax_arm::armv8::a64::InstDecoder::default();
    code.chunks(4)
        .enumerate()
        .map(|(i, word)| {
            let text = match decoder.decode(&mut U8Reader::new(word)) {
                Ok(ins) => ins.to_string(),
                Err(_) => "(bad)".to_string(),
            };
            (start + 4 * i as u64, word.len(), text)
        })
        .collect()
}

/// RV64GC: a 4-byte instruction where the low two bits are 11, else a 2-byte compressed one;
/// what raki does not decode (floating point, vector, privileged) as a `.word`.
fn decode_riscv64(start: u64, code: &[u8]) -> Vec<(u64, usize, String)> {
    use raki::{Decode, Isa};
    let mut out = Vec::new();
    let mut off = 0;
    while off < code.len() {
        let rest = &code[off..];
        let n = if rest[0] & 3 == 3 { 4 } else { 2 };
        let text = match rest.get(..n) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d])
                .decode(Isa::Rv64)
                .map(|i| i.to_string()),
            Some(&[a, b]) => u16::from_le_bytes([a, b])
                .decode(Isa::Rv64)
                .map(|i| i.to_string()),
            _ => break,
        };
        match text {
            Ok(t) => out.push((start + off as u64, n, t)),
            Err(_) => out.extend(raw_words(start + off as u64, &rest[..n], |_| n)),
        }
        off += n;
    }
    // A cut last instruction: its bytes as they are.
    if off < code.len() {
        out.extend(raw_words(start + off as u64, &code[off..], |r| r.len()));
    }
    out
}

/// Instruction words of `len(first bytes)` bytes each, shown as `.word`s.
fn raw_words(start: u64, code: &[u8], len: impl Fn(&[u8]) -> usize) -> Vec<(u64, usize, String)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < code.len() {
        let n = len(&code[off..]).min(code.len() - off);
        let mut word = 0u64;
        for (i, b) in code[off..off + n].iter().enumerate() {
            word |= u64::from(*b) << (8 * i);
        }
        out.push((
            start + off as u64,
            n,
            format!(".word {word:#0w$x}", w = 2 + 2 * n),
        ));
        off += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_architecture_decodes() {
        // push ebp; mov ebp, esp; ret
        let d = decode_x86(32, 0x1000, &[0x55, 0x89, 0xe5, 0xc3]);
        let texts: Vec<&str> = d.iter().map(|x| x.2.as_str()).collect();
        assert_eq!(texts, ["push ebp", "mov ebp,esp", "ret"]);
        assert_eq!(d[1].0, 0x1001);
        // riscv64: a 4-byte `addi`, a 2-byte compressed `c.nop`, a word raki does not
        // decode (`fadd.d`), and a cut instruction.
        let (w, note) = decode(
            Some(Arch::Riscv64),
            0x8000,
            &[
                0x13, 0x05, 0x15, 0x00, 0x01, 0x00, 0xd3, 0x70, 0x31, 0x02, 0x13,
            ],
        );
        assert!(note.is_none());
        let texts: Vec<(u64, usize, &str)> = w.iter().map(|x| (x.0, x.1, x.2.as_str())).collect();
        assert_eq!(texts[0], (0x8000, 4, "addi a0, a0, 1"));
        assert_eq!((texts[1].0, texts[1].1), (0x8004, 2));
        assert!(texts[1].2.contains("nop"), "{:?}", texts[1]);
        assert_eq!(texts[2], (0x8006, 4, ".word 0x023170d3"));
        assert_eq!(texts[3], (0x800a, 1, ".word 0x13"));
        // Raw words where the architecture is unknown.
        let (r, note) = decode(None, 0x10, &[1, 0, 0, 0]);
        assert!(note.is_some());
        assert_eq!(r[0], (0x10, 4, ".word 0x00000001".to_string()));
        // aarch64: `ret`, then a word that is no instruction.
        let (a, note) = decode(
            Some(Arch::Aarch64),
            0x4000,
            &[0xc0, 0x03, 0x5f, 0xd6, 0, 0, 0, 0],
        );
        assert!(note.is_none());
        assert_eq!(a[0], (0x4000, 4, "ret".to_string()));
        assert_eq!(a[1].0, 0x4004);
    }
}
