//! The largest values the plugin accepts for its numeric arguments: the plugin refuses more,
//! and `kern-profile record` refuses them before QEMU starts.

/// Largest accepted `depth=`.
pub const MAX_DEPTH: u32 = 1024;
/// Largest accepted `delay=` (one hour).
pub const MAX_DELAY_US: u64 = 3_600_000_000;
/// Largest accepted `period=` (keeps instruction budgets far from counter overflow).
pub const MAX_PERIOD: u64 = 1 << 40;
/// Smallest accepted `max_size=`: room for the header and a batch.
pub const MIN_MAX_SIZE: u64 = 1 << 20;

/// A size in bytes as `max_size=` and `--max-size` take it: digits, then optionally `K`,
/// `M` or `G` (powers of 1024), at least [`MIN_MAX_SIZE`]. The error says what is wrong.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        _ => return Err("a number of bytes, optionally followed by K, M or G".into()),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| "a number of bytes, optionally followed by K, M or G".to_string())?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| "too large".to_string())?;
    if bytes < MIN_MAX_SIZE {
        return Err(format!("at least {MIN_MAX_SIZE} bytes (1M)"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("300m"), Ok(300 << 20));
        assert!(parse_size("1K").unwrap_err().contains("at least"));
        assert!(parse_size("").is_err());
        assert!(parse_size("5T").is_err());
        assert!(parse_size("G").is_err());
        assert_eq!(parse_size("99999999999G"), Err("too large".into()));
    }
}
