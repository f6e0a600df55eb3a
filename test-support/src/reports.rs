//! Readers of the command's text outputs that tests of several crates check.

/// The `Count` column of `kern-profile annotate`'s "Source lines:" table.
pub fn annotate_line_counts(text: &str) -> Vec<u64> {
    text.lines()
        .skip_while(|l| *l != "Source lines:")
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect()
}
