//! `kallsyms_token_table` and `kallsyms_token_index`: found by the digit tokens, confirmed
//! by the index.

use super::{align_up, reject, u16_at, Reject};

/// Longest token accepted.
const MAX_TOKEN: usize = 256;

/// The token table whose code 0x30 is at `digits`: (its start, the token index's offset,
/// the 256 tokens).
pub(super) fn tokens_at(data: &[u8], digits: usize) -> Result<(usize, usize, Vec<&[u8]>), Reject> {
    // The end of token 0xff: walk the tokens from 0x30 on.
    let mut end = digits;
    for code in 0x30..256 {
        let len = memchr::memchr(0, &data[end..data.len().min(end + MAX_TOKEN + 1)])
            .filter(|&len| len > 0)
            .ok_or_else(|| {
                reject(
                    "kallsyms_token_table",
                    end,
                    format!("token {code:#x} is not a NUL-terminated string"),
                )
            })?;
        end += len + 1;
    }
    let mut why = String::from("no kallsyms_token_index after it");
    for index in [end, align_up(end, 2), align_up(end, 4), align_up(end, 8)] {
        let Some(offsets) = (0..256)
            .map(|i| u16_at(data, index + 2 * i).map(usize::from))
            .collect::<Option<Vec<usize>>>()
        else {
            break;
        };
        if offsets[0] != 0 || offsets[0x30] > digits {
            why = format!("no kallsyms_token_index at {index:#x}");
            continue;
        }
        let start = digits - offsets[0x30];
        let tokens = (0..256).map(|i| {
            let at = start + offsets[i];
            let next = if i == 255 {
                end
            } else {
                start + offsets[i + 1]
            };
            let token = data.get(at..next.checked_sub(1)?)?;
            (data.get(next - 1) == Some(&0) && !token.is_empty() && !token.contains(&0))
                .then_some(token)
        });
        match tokens.collect::<Option<Vec<&[u8]>>>() {
            Some(tokens) => return Ok((start, index, tokens)),
            None => {
                why = format!("the kallsyms_token_index at {index:#x} does not match the tokens")
            }
        }
    }
    Err(reject("kallsyms_token_table", digits, why))
}
