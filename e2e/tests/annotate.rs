//! `kern-profile annotate RAW ELF hot_leaf` on the example kernel: its lines add up to its self
//! share in the text report (`--no-inline`: the annotation counts every PC in the function).

use kern_profile_e2e::*;

/// The `Count` column of the "Source lines:" table.
fn line_counts(text: &str) -> Vec<u64> {
    text.lines()
        .skip_while(|l| *l != "Source lines:")
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn hot_leaf_lines_add_up_to_its_self_share() {
    if skip_i386() {
        return;
    }
    let run = boot("annotate", "period=10000", "rounds=400 alloc_rounds=0");
    let (raw, k) = (run.raw.to_str().unwrap(), kernel());
    let k = k.to_str().unwrap();
    let hot = hottest();
    let text = kern_profile(&["annotate", raw, k, &hot]);
    let lines = line_counts(&text);
    assert!(lines.len() > 1, "{text}");
    let sum: u64 = lines.iter().sum();
    // The report's self count of hot_leaf, by its real function.
    let counts = self_counts(&folded_of(&run.raw, &kernel(), &["--no-inline"]));
    let want = counts[&hot];
    assert!(want > 100, "{counts:?}");
    assert_eq!(sum, want, "{text}");
    let total: u64 = counts.values().sum();
    let head = format!("# {want} self samples of {total} (");
    assert!(text.contains(&head), "{head} in\n{text}");
    // Disassembled, and no sample fell inside an instruction.
    assert!(text.contains("ret"), "{text}");
    assert!(!text.contains("fell inside an instruction"), "{text}");
}
