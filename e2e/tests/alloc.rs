//! The example kernel's memtrace, captured from COM2, gives its documented numbers.

use kern_profile_e2e::*;

#[test]
fn memtrace_gives_documented_totals() {
    if skip_i386() {
        return;
    }
    let run = boot("alloc", "period=1000000", "");
    let k = kernel();
    let report = alloc_of(&run.memtrace, &k, &["-f", "text", "-o", "-"]);
    let e = expected();
    let allocators = e["memtrace"]["allocator"].as_table().unwrap();
    assert_eq!(allocators.len(), 2);
    let folded_dir = run.dir.join("folded");
    alloc_of(
        &run.memtrace,
        &k,
        &["-f", "folded", "-o", folded_dir.to_str().unwrap()],
    );
    for (name, want) in allocators {
        let int = |k: &str| want[k].as_integer().unwrap() as u64;
        let block = allocator_block(&report, name);
        assert_eq!(report_value(block, "allocations"), int("alloc"), "{name}");
        assert_eq!(
            report_value(block, "reallocations"),
            int("realloc"),
            "{name}"
        );
        assert_eq!(report_value(block, "frees"), int("free"), "{name}");
        assert_eq!(report_value(block, "peak live"), int("peak_live"), "{name}");
        assert_eq!(
            report_value(block, "live at end"),
            int("live_at_end"),
            "{name}"
        );
        assert_eq!(report_value(block, "double frees"), 0, "{name}");
        // Stacks are listed once per name, as the flamegraph draws them.
        let rows: Vec<&str> = block.lines().filter(|l| l.contains("%  ")).collect();
        let mut names: Vec<&str> = rows
            .iter()
            .map(|l| l.rsplit("%  ").next().unwrap())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            rows.len(),
            "{name}: a stack listed twice:\n{block}"
        );
        // The leak view puts every leaked unit under the leaking function.
        let folded =
            std::fs::read_to_string(folded_dir.join(format!("mem-{name}.folded"))).unwrap();
        let leak_fn = want["leak_function"].as_str().unwrap();
        let leaked = count_through(&parse_folded(&folded), leak_fn);
        assert_eq!(leaked, int("leaked"), "{name}: units leaked by {leak_fn}");
    }
}

#[test]
fn default_alloc_run_draws_one_svg_per_allocator() {
    if skip_i386() {
        return;
    }
    let run = boot("alloc-svg", "period=1000000", "");
    let k = kernel();
    let out = run.dir.join("svg");
    alloc_of(
        &run.memtrace,
        &k,
        &["-o", out.to_str().unwrap(), "--timeline"],
    );
    for name in expected()["memtrace"]["allocator"]
        .as_table()
        .unwrap()
        .keys()
    {
        let svg = std::fs::read_to_string(out.join(format!("mem-{name}.svg"))).unwrap();
        assert!(
            svg.contains("leaky_cache_fill"),
            "mem-{name}.svg lacks the leaking function"
        );
        let timeline =
            std::fs::read_to_string(out.join(format!("mem-{name}-timeline.svg"))).unwrap();
        assert!(timeline.contains(name.as_str()));
    }
}
