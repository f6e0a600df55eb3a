//! A hostile guest: the example kernel's `hostile=on` spins with its frame pointer on chains
//! no compiler makes (src/hostile.rs): a cycle, unmapped memory, a misaligned address and a
//! chain of one frame per page. Each ends its stacks with the right stop reason, no sample
//! reads more than its budget or stores more than the depth, nothing is dropped, and the
//! guest finishes. The misaligned address is odd, which x86 allows a frame pointer (a
//! FreePascal kernel's are all odd): the record there is read, and the zeroed memory it lies
//! in names no caller (a null return address; before odd frame pointers were followed, a
//! misaligned frame pointer).

use std::collections::BTreeMap;
use std::path::Path;

use kern_profile_e2e::*;
use kern_profile_format::{RawReader, Record, StopReason};

/// The plugin's per-sample fetch budget (plugin/sampler/src/window.rs): one frame per page can
/// give at most this many frames.
const FETCH_BUDGET: usize = 32;
const PERIOD: u64 = 10_000;

/// Case name -> the [start, end) of its code that runs with the hostile frame pointer, from
/// COM1's `hostile: NAME 0xS 0xE` lines.
fn cases(com1: &str) -> BTreeMap<String, (u64, u64)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    com1.lines()
        .filter_map(|l| l.strip_prefix("hostile: "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), (hex(f[1]), hex(f[2])))
        })
        .collect()
}

/// Per case: samples, their stop reasons, and the most frames one of them held.
#[derive(Default, Debug)]
struct CaseStops {
    samples: u64,
    stops: BTreeMap<Option<StopReason>, u64>,
    max_frames: usize,
}

fn stops_by_case(raw: &Path, cases: &BTreeMap<String, (u64, u64)>) -> BTreeMap<String, CaseStops> {
    let mut r = RawReader::new(std::fs::File::open(raw).unwrap()).unwrap();
    let mut out: BTreeMap<String, CaseStops> = BTreeMap::new();
    while let Some(rec) = r.next_record().expect("no corrupt record") {
        let Record::Sample(s) = rec else { continue };
        let Some((name, _)) = cases.iter().find(|(_, (a, b))| (*a..*b).contains(&s.pc)) else {
            continue;
        };
        let c = out.entry(name.clone()).or_default();
        c.samples += 1;
        // The reason alone (`stop_reason`): the stop byte also says which walker ended it.
        *c.stops.entry(s.stop_reason()).or_default() += 1;
        c.max_frames = c.max_frames.max(s.frame_count());
    }
    assert!(r.truncation().is_none());
    out
}

fn hostile_run(name: &str, plugin_args: &str, rounds: u32) -> (Run, BTreeMap<String, CaseStops>) {
    let append = format!("hostile=on rounds={rounds} alloc_rounds=0");
    let run = boot(name, plugin_args, &append);
    let cases = cases(&run.com1);
    assert_eq!(cases.len(), 4, "{}", run.com1);
    let stops = stops_by_case(&run.raw, &cases);
    println!("{name}: {stops:#?}");
    let c = census(&run.raw);
    assert_eq!(c.stats.expect("a statistics record").dropped, 0, "{name}");
    (run, stops)
}

/// Every sample of `case` stopped for `reason`, and there are enough of them.
fn all_stop(stops: &BTreeMap<String, CaseStops>, case: &str, reason: StopReason, min: u64) {
    let c = &stops[case];
    assert!(c.samples >= min, "{case}: {c:?}");
    assert_eq!(
        c.stops.get(&Some(reason)),
        Some(&c.samples),
        "{case}: {c:?}"
    );
}

#[test]
fn hostile_chains_end_with_their_stop_reasons_within_the_read_budget() {
    if skip_i386() {
        return;
    }
    // 2000 x 1000 iterations of 4 instructions per case: ~800 samples each.
    let (_, stops) = hostile_run(
        "hostile-period",
        &format!("period={PERIOD},depth=1024"),
        2000,
    );
    all_stop(&stops, "cycle", StopReason::NotIncreasing, 700);
    all_stop(&stops, "unmapped", StopReason::Unreadable, 700);
    all_stop(&stops, "misaligned", StopReason::NullReturnAddress, 700);
    all_stop(&stops, "deep", StopReason::ReadBudget, 700);
    // One frame per page: the budget, not the depth of 1024, bounds a sample (reading the
    // word at [SP], in another page, is one of its fetches).
    assert_eq!(stops["deep"].max_frames, FETCH_BUDGET - 1);
    // A cycle goes round once per allowed stack switch (2), with a marker each, then stops.
    assert!(stops["cycle"].max_frames <= 8, "{:?}", stops["cycle"]);
    assert_eq!(stops["unmapped"].max_frames, 0);
    assert_eq!(stops["misaligned"].max_frames, 0);
}

#[test]
fn a_depth_below_the_budget_stops_the_deep_chain_first() {
    if skip_i386() {
        return;
    }
    let (_, stops) = hostile_run("hostile-depth", &format!("period={PERIOD},depth=16"), 2000);
    all_stop(&stops, "deep", StopReason::DepthLimit, 700);
    assert_eq!(stops["deep"].max_frames, 16);
}

#[test]
fn hostile_chains_under_delay_finish_without_drops() {
    if skip_i386() {
        return;
    }
    // Ten times longer spins (tens of ms each): enough host-timer ticks per case.
    let (run, stops) = hostile_run("hostile-delay", "delay=10,depth=1024", 20_000);
    assert!(run.com1.contains("phase hostile: done"), "{}", run.com1);
    for (case, reason) in [
        ("cycle", StopReason::NotIncreasing),
        ("unmapped", StopReason::Unreadable),
        ("misaligned", StopReason::NullReturnAddress),
        ("deep", StopReason::ReadBudget),
    ] {
        all_stop(&stops, case, reason, 10);
    }
    let t = census(&run.raw).host_timer.expect("a host-timer record");
    println!("hostile-delay: host timer {t:?}");
}
