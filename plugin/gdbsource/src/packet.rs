//! Packet framing of GDB's remote serial protocol: `$body#xx`, `xx` the modulo-256 sum of
//! the body's bytes in hex; in replies, `}` escapes the next byte (XOR 0x20) and `*n`
//! repeats the previous byte `n - 29` times (run-length encoding).

/// Frames `body` as a packet, escaping the bytes the protocol reserves.
pub fn encode(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.push(b'$');
    let mut sum = 0u8;
    for &b in body {
        let (esc, b) = match b {
            b'$' | b'#' | b'}' | b'*' => (true, b ^ 0x20),
            b => (false, b),
        };
        if esc {
            out.push(b'}');
            sum = sum.wrapping_add(b'}');
        }
        out.push(b);
        sum = sum.wrapping_add(b);
    }
    out.push(b'#');
    out.extend_from_slice(&hex_byte(sum));
    out
}

/// The modulo-256 sum the trailer must carry.
pub fn checksum(raw: &[u8]) -> u8 {
    raw.iter().fold(0u8, |s, &b| s.wrapping_add(b))
}

/// A decoding failure: what was wrong with the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The body ends inside an escape or a run.
    Truncated,
    /// A run with nothing before it, or a count out of range.
    BadRun,
    /// The decoded body would exceed the limit.
    TooLong,
}

/// Decodes a received body (between `$` and `#`): escapes and runs, into at most `limit`
/// bytes.
pub fn decode(raw: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(raw.len().min(limit));
    let mut it = raw.iter().copied();
    while let Some(b) = it.next() {
        match b {
            b'}' => out.push(it.next().ok_or(DecodeError::Truncated)? ^ 0x20),
            b'*' => {
                let n = it.next().ok_or(DecodeError::Truncated)?;
                let prev = *out.last().ok_or(DecodeError::BadRun)?;
                // Counts are printable characters: ' ' + 3 and up (3 to 97 repeats).
                let repeat = (n as usize).checked_sub(29).filter(|&r| r >= 3);
                let repeat = repeat.ok_or(DecodeError::BadRun)?;
                if out.len() + repeat > limit {
                    return Err(DecodeError::TooLong);
                }
                out.extend(std::iter::repeat_n(prev, repeat));
            }
            b => out.push(b),
        }
        if out.len() > limit {
            return Err(DecodeError::TooLong);
        }
    }
    Ok(out)
}

pub fn hex_byte(b: u8) -> [u8; 2] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    [HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The bytes of a hex string; `xx` (a register the stub cannot read) reads as 0.
pub fn from_hex(s: &[u8]) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| match p {
            [b'x', b'x'] => Some(0),
            [h, l] => Some(nibble(*h)? << 4 | nibble(*l)?),
            _ => None,
        })
        .collect()
}

/// A hex number as the stub writes thread ids and counts (no prefix).
pub fn parse_hex_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.iter()
        .try_fold(0u64, |v, &c| Some(v << 4 | nibble(c)? as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_sums_and_escapes() {
        assert_eq!(encode(b"g"), b"$g#67");
        assert_eq!(encode(b"qfThreadInfo"), b"$qfThreadInfo#bb");
        // `#` goes as `}` then 0x03.
        assert_eq!(&encode(b"a#")[..4], b"$a}\x03");
        let e = encode(b"a#");
        assert_eq!(e[5..], hex_byte(checksum(&e[1..4])));
    }

    #[test]
    fn decode_runs_and_escapes() {
        // "0* " is '0' then 3 more.
        assert_eq!(decode(b"0* ", 64).unwrap(), b"0000");
        assert_eq!(decode(b"ab}\x03c", 64).unwrap(), b"ab#c");
        assert_eq!(decode(b"*!", 64), Err(DecodeError::BadRun));
        assert_eq!(decode(b"0}", 64), Err(DecodeError::Truncated));
        assert_eq!(decode(b"0*~", 16), Err(DecodeError::TooLong));
        assert_eq!(decode(b"0*\x10", 16), Err(DecodeError::BadRun));
    }

    #[test]
    fn hex() {
        assert_eq!(from_hex(b"00ffxx1A").unwrap(), [0, 255, 0, 0x1a]);
        assert_eq!(from_hex(b"0"), None);
        assert_eq!(from_hex(b"zz"), None);
        assert_eq!(parse_hex_u64(b"1f"), Some(31));
        assert_eq!(parse_hex_u64(b""), None);
        assert_eq!(parse_hex_u64(b"11111111111111111"), None);
    }
}
