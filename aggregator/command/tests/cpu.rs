//! The CPU path end to end on synthetic files against tests/data/tiny.elf: every output
//! format (golden files; `KP_BLESS=1` rewrites them), filters, fixes, both input formats,
//! and errors.

mod common;

use std::path::{Path, PathBuf};

use common::tiny::*;
use common::Recording;
use kern_profile::{run_cpu, CpuList, ModeFilter, Options, OutputFormat, ProfileError, RunReport};

fn raw_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = common::temp_dir(name);
    common::write(&dir, "raw", bytes)
}

fn run(raw: &Path, opts: &Options) -> (String, RunReport) {
    let (out, report) =
        common::runs::cpu(raw, Some(&common::tiny_elf()), opts).unwrap_or_else(|e| panic!("{e}"));
    (String::from_utf8(out).unwrap(), report)
}

/// The error of a run of `raw` against tiny.elf, which must fail.
fn run_err(raw: &Path, opts: &Options) -> ProfileError {
    run_cpu(raw, Some(&common::tiny_elf()), opts, &mut Vec::new()).unwrap_err()
}

fn folded_opts() -> Options {
    Options {
        format: OutputFormat::Folded,
        progress: false,
        ..Options::default()
    }
}

fn in_format(format: OutputFormat) -> Options {
    Options {
        format,
        ..folded_opts()
    }
}

#[test]
fn folded_golden() {
    let raw = raw_file("folded", &common::synthetic_raw(false));
    let (out, report) = run(&raw, &folded_opts());
    common::golden("synthetic.folded", out.as_bytes());
    assert!(
        out.contains("_start;kernel::work;middle;leaf;square_[i] 20\n"),
        "{out}"
    );
    // The entry and ret fixes put middle back: 10 in leaf's loop plus the two fixed samples.
    assert!(
        out.contains("_start;kernel::work;middle;leaf 12\n"),
        "{out}"
    );
    assert!(out.contains("_start;kernel::work;[unknown] 1\n"), "{out}");
    assert!(out.contains("[user] 2\n"), "{out}");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn text_golden() {
    let raw = raw_file("text", &common::synthetic_raw(false));
    let opts = in_format(OutputFormat::Text);
    let (out, _) = run(&raw, &opts);
    let dir = raw.parent().unwrap().display().to_string();
    common::golden("synthetic.txt", out.replace(&dir, "$DIR").as_bytes());
    assert!(
        out.contains("samples: 45 read, 45 kept; 0 dropped by the plugin"),
        "{out}"
    );
    assert!(
        out.contains("unwind stops (statistics record): null frame pointer 44"),
        "{out}"
    );
    assert!(
        out.contains("per vCPU: cpu 0 22 (48.9%), cpu 1 23 (51.1%)"),
        "{out}"
    );
}

#[test]
fn svg_goldens_are_deterministic() {
    let raw = raw_file("svg", &common::synthetic_raw(false));
    let opts = in_format(OutputFormat::Svg);
    let (a, _) = run(&raw, &opts);
    let (b, _) = run(&raw, &opts);
    assert_eq!(a, b);
    assert!(a.contains("tiny.elf: 45 samples"));
    common::golden("synthetic.svg", a.as_bytes());
    let reverse = Options {
        reverse: true,
        title: Some("reversed".into()),
        ..opts
    };
    let (r, _) = run(&raw, &reverse);
    assert!(r.contains(">reversed<"));
    common::golden("synthetic-reverse.svg", r.as_bytes());
}

#[test]
fn per_cpu_filters_and_naming_options() {
    let raw = raw_file("percpu", &common::synthetic_raw(false));
    let per_cpu = Options {
        per_cpu: true,
        cpus: Some(CpuList::parse("1").unwrap()),
        mode: ModeFilter::KernelOnly,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &per_cpu);
    common::golden("synthetic-cpu1-kernel.folded", out.as_bytes());
    assert!(out.lines().all(|l| l.starts_with("cpu 1;")), "{out}");
    assert!(!out.contains("[user]"));

    let user = Options {
        mode: ModeFilter::UserOnly,
        addresses: true,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &user);
    assert_eq!(
        out,
        "[user];0x8049000;0x8048000 1\n[user];0x8049000;0x8048001 1\n"
    );

    let misc = Options {
        inline: false,
        lines: true,
        addresses: true,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &misc);
    common::golden("synthetic-noinline-lines-addresses.folded", out.as_bytes());
    assert!(!out.contains("square"), "{out}");
    assert!(out.contains("0x5678;0x1234 1"), "{out}");
}

#[test]
fn firefox_profile_has_one_thread_per_vcpu() {
    let raw = raw_file("firefox", &common::synthetic_raw(false));
    let opts = in_format(OutputFormat::Firefox);
    let (out, report) = run(&raw, &opts);
    assert!(
        report.summary.contains("45 of 45 samples"),
        "{}",
        report.summary
    );
    let (again, _) = run(&raw, &opts);
    assert_eq!(out, again, "the profile must be deterministic");
    common::golden("synthetic.json", out.as_bytes());

    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let meta = &v["meta"];
    assert!(meta["interval"].as_f64().unwrap() > 0.0);
    assert_eq!(meta["product"], "tiny.elf");
    assert_eq!(meta["startTime"].as_f64().unwrap(), 1_700_000_000_000.0);
    assert!(meta["categories"].as_array().unwrap().len() >= 3);
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    let shared = &v["shared"];
    let mut total = 0;
    for (i, t) in threads.iter().enumerate() {
        assert_eq!(t["name"], format!("vCPU {i}"));
        let samples = &t["samples"];
        let n = samples["length"].as_u64().unwrap() as usize;
        assert_eq!(samples["stack"].as_array().unwrap().len(), n);
        assert_eq!(samples["time"].as_array().map_or(n, Vec::len), n);
        total += samples["weight"]
            .as_array()
            .map_or(n as i64, |w| w.iter().map(|x| x.as_i64().unwrap()).sum());
        // The thread's samples' stacks, through the tables its threads share.
        let func_names: Vec<&str> = samples["stack"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| shared_stack(shared, s))
            .collect();
        assert!(func_names.contains(&"leaf"), "{func_names:?}");
        assert!(func_names.contains(&"kernel::work"), "{func_names:?}");
    }
    assert_eq!(total, 45);
    // The tables are shared (processed format 60), no thread has its own.
    assert_eq!(meta["preprocessedProfileVersion"], 60);
    assert!(threads.iter().all(|t| t.get("stackTable").is_none()));
    let stacks = &shared["stackTable"];
    let ns = stacks["length"].as_u64().unwrap() as usize;
    assert_eq!(stacks["frame"].as_array().unwrap().len(), ns);
    assert_eq!(stacks["prefix"].as_array().unwrap().len(), ns);
    let frames = &shared["frameTable"];
    let nf = frames["length"].as_u64().unwrap() as usize;
    assert_eq!(frames["func"].as_array().unwrap().len(), nf);
    let funcs = &shared["funcTable"];
    let nfn = funcs["length"].as_u64().unwrap() as usize;
    assert_eq!(funcs["name"].as_array().unwrap().len(), nfn);
    // Every stack's frame and earlier prefix, every frame's func, every name: in range.
    for (i, (f, p)) in stacks["frame"]
        .as_array()
        .unwrap()
        .iter()
        .zip(stacks["prefix"].as_array().unwrap())
        .enumerate()
    {
        assert!((f.as_u64().unwrap() as usize) < nf);
        assert!(p.as_u64().is_none_or(|p| (p as usize) < i));
    }
    for f in frames["func"].as_array().unwrap() {
        assert!((f.as_u64().unwrap() as usize) < nfn);
    }
    let strings = shared["stringArray"].as_array().unwrap();
    for n in funcs["name"].as_array().unwrap() {
        assert!((n.as_u64().unwrap() as usize) < strings.len());
    }
}

/// The function names of a sample's stack (`null`: none), leaf first, through the
/// profile's shared tables.
fn shared_stack<'a>(shared: &'a serde_json::Value, stack: &serde_json::Value) -> Vec<&'a str> {
    let mut names = Vec::new();
    let mut at = stack.as_u64();
    while let Some(s) = at.map(|s| s as usize) {
        let frame = shared["stackTable"]["frame"][s].as_u64().unwrap() as usize;
        let func = shared["frameTable"]["func"][frame].as_u64().unwrap() as usize;
        let name = shared["funcTable"]["name"][func].as_u64().unwrap() as usize;
        names.push(shared["stringArray"][name].as_str().unwrap());
        at = shared["stackTable"]["prefix"][s].as_u64();
    }
    names
}

#[test]
fn exact_flat_profile() {
    let raw = raw_file("exact", &common::synthetic_raw(true));
    let text = Options {
        exact: true,
        format: OutputFormat::Text,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &text);
    let dir = raw.parent().unwrap().display().to_string();
    common::golden("synthetic-exact.txt", out.replace(&dir, "$DIR").as_bytes());
    let folded = Options {
        exact: true,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &folded);
    common::golden("synthetic-exact.folded", out.as_bytes());
    // 10 instructions of leaf's loop, 1000 times: square's and leaf's own.
    let total: u64 = out
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 10 * 1000 + 5 * 10 + 2 + 5);
    assert!(out.contains("leaf;square_[i] "), "{out}");
    assert!(out.contains("middle 55\n"), "{out}");
    let no_inline = Options {
        exact: true,
        inline: false,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &no_inline);
    assert!(out.contains("leaf 10000\n"), "{out}");
    let svg = Options {
        exact: true,
        format: OutputFormat::Svg,
        ..folded_opts()
    };
    let (out, _) = run(&raw, &svg);
    common::golden("synthetic-exact.svg", out.as_bytes());

    // Without exact data: a clear error.
    let plain = raw_file("exact-none", &common::synthetic_raw(false));
    let e = run_err(&plain, &folded);
    assert!(matches!(e, ProfileError::NoExactData { .. }), "{e}");
    assert!(e.to_string().contains("exact=on"));
}

/// `exact=only` (header sampling mode off): no samples, so every output but Firefox shows the
/// exact counts without `--exact`, as `--exact` shows those of a recording with samples.
#[test]
fn exact_only_recordings_show_their_exact_counts() {
    let sampled = raw_file("exact-sampled", &common::synthetic_raw(true));
    let only = raw_file("exact-only", &common::exact_only_raw());
    for format in [OutputFormat::Folded, OutputFormat::Svg] {
        let opts = Options {
            format,
            ..folded_opts()
        };
        let exact = Options {
            exact: true,
            ..opts.clone()
        };
        let (asked, _) = run(&sampled, &exact);
        let (out, report) = run(&only, &opts);
        assert_eq!(out, asked, "{format:?}");
        assert!(
            report.summary.contains("instructions executed"),
            "{}",
            report.summary
        );
        let w = common::joined(&report.warnings);
        assert!(!w.contains("holds no samples"), "{w}");
    }
    let text = in_format(OutputFormat::Text);
    let (out, _) = run(&only, &text);
    assert!(out.contains("instructions executed: 10057 at "), "{out}");
    // No samples to compare.
    let diff = Options {
        diff_base: Some(sampled.clone()),
        ..folded_opts()
    };
    let e = run_err(&only, &diff);
    assert!(matches!(e, ProfileError::Unsupported(_)), "{e}");
    // Firefox shows samples only: an empty profile, no error.
    let firefox = in_format(OutputFormat::Firefox);
    let (_, report) = run(&only, &firefox);
    assert!(
        report.summary.starts_with("0 of 0 samples"),
        "{}",
        report.summary
    );
}

/// The text report of a `delay=10` file of one sample on `vcpus` vCPUs and host-timer record
/// `t`.
fn text_with_host_timer(name: &str, vcpus: u32, t: kern_profile_format::HostTimerStats) -> String {
    use kern_profile_format::SamplingMode;
    let mut r = Recording::new(&kern_profile_format::Header {
        sampling: SamplingMode::DelayMicros(10),
        ..common::header(vcpus, false)
    });
    r.sample(0, LEAF_LOOP, &[RET_MIDDLE, RET_WORK, RET_START]);
    t.encode(&mut r.bytes);
    let raw = raw_file(name, &r.bytes);
    let text = in_format(OutputFormat::Text);
    run(&raw, &text).0
}

/// `delay=`: the host-timer record's ticks, late wake-ups, throttled ticks and halted time in
/// the text report.
#[test]
fn host_timer_in_the_text_report() {
    use kern_profile_format::{HostTimerStats, VcpuTime};
    let t = HostTimerStats {
        interval_ns: 10_000,
        ticks: 95_210,
        late: 12,
        vcpus: vec![
            VcpuTime {
                idle_ns: 520_000_000,
                ..VcpuTime::default()
            },
            VcpuTime {
                throttled_ticks: 3,
                ..VcpuTime::default()
            },
        ],
        interrupts: None,
    };
    let out = text_with_host_timer("host-timer", 2, t);
    assert!(
        out.contains(
            "host timer: 95210 ticks (every 10 µs on average; 12 skipped, the host woke the \
             timer late); 3 vCPU ticks skipped because stack walks were slow (sampling kept \
             under a tenth of the run); halted, so not sampled: cpu 0 0.52 s\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("sampling: every 10 µs of host time per vCPU (delay)"),
        "{out}"
    );
}

/// `delay=` on a host whose timer wake-ups were costly: the record's mean spacing is wider
/// than the header's delay, and the report says why.
#[test]
fn a_spread_host_timer_is_explained() {
    use kern_profile_format::{HostTimerStats, VcpuTime};
    let t = HostTimerStats {
        interval_ns: 190_000,
        ticks: 5_000,
        late: 0,
        vcpus: vec![VcpuTime::default()],
        interrupts: None,
    };
    let out = text_with_host_timer("host-timer-spread", 1, t);
    assert!(
        out.contains(
            "host timer: 5000 ticks (every 190 µs on average, wider than delay= asked: the \
             host's timer wake-ups were costly, and the timer kept under a tenth of a core)\n"
        ),
        "{out}"
    );
}

#[test]
fn differential_against_a_base() {
    let dir = common::temp_dir("diff");
    let this = common::write(&dir, "new.raw", &common::synthetic_raw(false));
    let mut base = Recording::new(&common::header(1, false));
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    for t in 0..10 {
        let pc = if t < 8 { LEAF_LOOP } else { START_LOOP };
        let frames: &[u64] = if t < 8 { &full } else { &[] };
        base.record(&common::sample(0, t, pc, frames));
    }
    let base = common::write(&dir, "old.raw", &base.bytes);
    let folded = Options {
        diff_base: Some(base.clone()),
        ..folded_opts()
    };
    let (out, _) = run(&this, &folded);
    common::golden("diff.folded", out.as_bytes());
    assert!(
        out.contains("_start;kernel::work;middle;leaf 8 12\n"),
        "{out}"
    );
    assert!(out.contains("_start 2 5\n"), "{out}");
    let svg = Options {
        diff_base: Some(base),
        format: OutputFormat::Svg,
        ..folded_opts()
    };
    let (out, _) = run(&this, &svg);
    common::golden("diff.svg", out.as_bytes());
}

#[test]
fn legacy_files_are_detected_and_read() {
    let bytes = common::legacy(&[
        &[LEAF_SQUARE, RET_MIDDLE, RET_WORK, RET_START],
        &[LEAF_SQUARE, RET_MIDDLE, RET_WORK, RET_START],
        // An interrupt frame in the middle: not split, one [unknown] frame.
        &[LEAF_LOOP, 0x0000_0042, RET_WORK, RET_START],
        &[],
    ]);
    let raw = raw_file("legacy", &bytes);
    let (out, report) = run(&raw, &folded_opts());
    common::golden("legacy.folded", out.as_bytes());
    assert_eq!(
        out,
        "_start;kernel::work;[unknown];leaf 1\n_start;kernel::work;middle;leaf;square_[i] 2\n"
    );
    assert!(report
        .warnings
        .iter()
        .any(|w| w.to_string().contains("without any address")));
    // Cut in the middle of the last sample: the complete ones are used, with a warning.
    let raw = raw_file("legacy-cut", &bytes[..bytes.len() - 12]);
    let (out, report) = run(&raw, &folded_opts());
    assert!(out.contains("square_[i] 2\n"), "{out}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("ends inside a record")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn truncated_raw_files_keep_complete_records() {
    let bytes = common::synthetic_raw(false);
    // Cut inside the statistics record: every sample is there.
    let raw = raw_file("cut", &bytes[..bytes.len() - 3]);
    let (out, report) = run(&raw, &folded_opts());
    let (full, _) = run(&raw_file("uncut", &bytes), &folded_opts());
    assert_eq!(out, full);
    let w = common::joined(&report.warnings);
    assert!(w.contains("ends inside a record at byte offset"), "{w}");
    // No statistics record at all (QEMU killed between records).
    let cut = bytes.len() - 3 - 60;
    let (_, report) = run(&raw_file("nostats", &bytes[..cut]), &folded_opts());
    assert!(!report.warnings.is_empty());
}

#[test]
fn corrupt_records_name_their_offset() {
    let mut bytes = common::synthetic_raw(false);
    let header_len = {
        let mut h = Vec::new();
        common::header(2, false).encode(&mut h);
        h.len()
    };
    // The first sample's frame count no longer fits its length.
    bytes[header_len + 5 + 6] = 9;
    let raw = raw_file("corrupt", &bytes);
    let e = run_err(&raw, &folded_opts());
    let m = e.to_string();
    assert!(m.contains(&format!("byte offset {header_len}")), "{m}");
    assert!(m.contains("/raw"), "{m}");
}

#[test]
fn wrong_inputs_are_errors_not_panics() {
    let dir = common::temp_dir("wrong");
    let e = run_err(&dir.join("missing.raw"), &folded_opts());
    assert!(matches!(e, ProfileError::Open { .. }) && e.to_string().contains("missing.raw"));
    // An x86_64 run against the i386 ELF.
    let mut bytes = Vec::new();
    let mut h = common::header(1, false);
    h.arch = kern_profile_format::Arch::X86_64;
    h.encode(&mut bytes);
    let raw = common::write(&dir, "x64.raw", &bytes);
    let e = run_err(&raw, &folded_opts());
    assert!(e.to_string().contains("x86_64"), "{e}");
    // The firefox output does not do --exact.
    let opts = Options {
        format: OutputFormat::Firefox,
        exact: true,
        ..folded_opts()
    };
    let raw = common::write(&dir, "ok.raw", &common::synthetic_raw(true));
    assert!(matches!(
        run_cpu(&raw, Some(&common::tiny_elf()), &opts, &mut Vec::new()),
        Err(ProfileError::Unsupported(_))
    ));
}

#[test]
fn symbol_map_instead_of_an_elf() {
    let dir = common::temp_dir("map");
    let raw = common::write(&dir, "raw", &common::synthetic_raw(false));
    let map = common::write(
        &dir,
        "System.map",
        b"c0100000 T leaf\nc0100040 T middle\nc0100060 T _ZN6kernel4work17h0123456789abcdefE\nc0100080 T _start\nc0101000 T _end\n",
    );
    let opts = Options {
        symbols: vec![map],
        ..folded_opts()
    };
    let mut out = Vec::new();
    run_cpu(&raw, None, &opts, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    // No DWARF: no inline frame; the entry fix still works from the map's starts.
    assert!(
        out.contains("_start;kernel::work;middle;leaf 31\n"),
        "{out}"
    );
}

#[test]
fn random_and_cut_inputs_never_panic() {
    let dir = common::temp_dir("fuzz");
    let good = common::synthetic_raw(true);
    let mut x = 0x2545_f491u32;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    let formats = [
        OutputFormat::Folded,
        OutputFormat::Text,
        OutputFormat::Firefox,
        OutputFormat::Svg,
    ];
    let rounds = std::env::var("KP_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    for round in 0..rounds {
        let bytes: Vec<u8> = match round % 3 {
            // Cut anywhere.
            0 => good[..next() as usize % good.len()].to_vec(),
            // A few bytes flipped.
            1 => {
                let mut b = good.clone();
                for _ in 0..4 {
                    let i = next() as usize % b.len();
                    b[i] = next() as u8;
                }
                b
            }
            // Noise (read as the legacy format).
            _ => (0..next() % 2000).map(|_| next() as u8).collect(),
        };
        let raw = common::write(&dir, "fuzz.raw", &bytes);
        let opts = Options {
            format: formats[round % formats.len()],
            exact: round % 5 == 0,
            ..folded_opts()
        };
        let _ = run_cpu(&raw, Some(&common::tiny_elf()), &opts, &mut Vec::new());
    }
}

#[test]
fn suspicious_inputs_are_flagged() {
    let dir = common::temp_dir("suspicious");
    // A memtrace passed as CPU samples reads as legacy garbage: flagged.
    let memtrace = common::data("example/memtrace");
    let mut out = Vec::new();
    let r = run_cpu(
        &memtrace,
        Some(&common::tiny_elf()),
        &folded_opts(),
        &mut out,
    )
    .unwrap();
    let w = common::joined(&r.warnings);
    assert!(
        w.contains("legacy format") && w.contains("no function tiny.elf knows"),
        "{w}"
    );
    // A raw file cut inside its magic is a raw file with a short header.
    let raw = common::write(&dir, "cut", b"KPROF");
    let e = run_err(&raw, &folded_opts());
    assert!(e.to_string().contains("too short for a header"), "{e}");
    // An empty file: no samples, a warning, a valid empty SVG.
    let raw = common::write(&dir, "empty", b"");
    let svg = in_format(OutputFormat::Svg);
    let mut out = Vec::new();
    let r = run_cpu(&raw, Some(&common::tiny_elf()), &svg, &mut out).unwrap();
    assert!(r
        .warnings
        .iter()
        .any(|w| w.to_string().contains("holds no samples")));
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with("<?xml") && out.contains("no samples to draw"),
        "{out}"
    );
}

/// A vCPU that spun in one stack for the whole run, while the other worked, is named in a
/// warning with that stack; the working one is not.
#[test]
fn a_vcpu_that_never_left_one_stack_is_warned_of() {
    let mut r = Recording::new(&common::header(2, false));
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    for t in 0..400u64 {
        let work = match t % 3 {
            0 => common::sample(0, t, LEAF_SQUARE, &full),
            1 => common::sample(0, t, MIDDLE_BODY, &full[1..]),
            _ => common::sample(0, t, START_LOOP, &[]),
        };
        let pc = if t % 2 == 0 { LEAF_LOOP } else { LEAF_SQUARE };
        r.record(&work).record(&common::sample(1, t, pc, &full));
    }
    let raw = raw_file("stuck", &r.bytes);
    let (_, report) = run(&raw, &folded_opts());
    let w = common::joined(&report.warnings);
    assert!(
        w.contains(
            "vCPU 1 never left one stack (100.0% of its 400 samples in _start;kernel::work;middle;leaf)"
        ),
        "{w}"
    );
    assert!(!w.contains("vCPU 0 never"), "{w}");
}

/// A crafted statistics record whose counts overflow any sum: totals saturate, so no share
/// passes 100% (it printed 107374181581.2% before) and nothing panics, in debug builds too.
#[test]
fn statistics_counts_that_overflow_sums_saturate() {
    let mut r = Recording::new(&common::header(1, false));
    r.record(&common::sample(0, 1, LEAF_LOOP, &[]));
    r.stats(u64::MAX, u64::MAX, &[u64::MAX, u64::MAX, 7], &[u64::MAX]);
    let raw = raw_file("overflow", &r.bytes);
    let opts = in_format(OutputFormat::Text);
    let (out, report) = run(&raw, &opts);
    let line = out
        .lines()
        .find(|l| l.starts_with("# unwind stops"))
        .unwrap_or_else(|| panic!("{out}"));
    for pct in line.split('(').skip(2).filter_map(|p| p.split('%').next()) {
        let v: f64 = pct.parse().unwrap_or_else(|_| panic!("{line}"));
        assert!((0.0..=100.0).contains(&v), "{line}");
    }
    assert!(
        common::joined(&report.warnings).contains("dropped"),
        "{report:?}"
    );
}

/// A kernel stack whose return address lies in the image but outside its code (tiny.elf's
/// first segment holds only its headers) ends there, counted in the unwind-stop lines.
#[test]
fn a_return_address_that_is_no_code_ends_the_stack() {
    let mut r = Recording::new(&common::header(1, false));
    r.sample(0, LEAF_LOOP, &[RET_MIDDLE, 0xc00f_f050, RET_START])
        .sample(0, LEAF_LOOP, &[RET_MIDDLE, RET_WORK, RET_START]);
    let raw = raw_file("no-code", &r.bytes);
    let (out, _) = run(&raw, &folded_opts());
    assert!(
        out.contains("\nmiddle;leaf 1\n") || out.starts_with("middle;leaf 1\n"),
        "{out}"
    );
    assert!(out.contains("_start;kernel::work;middle;leaf 1\n"), "{out}");
    let text = in_format(OutputFormat::Text);
    let (out, _) = run(&raw, &text);
    assert!(
        out.contains("unwind stops (aggregator): return address that is no code 1 (50.0% of the kept samples)\n"),
        "{out}"
    );
    assert!(out.contains("  return address that is no code: "), "{out}");
}

/// The text report's unwind stops by place, from a version-2 recording: kernel samples
/// (paging on) whose walk stayed in the kernel, kernel samples whose walk went on past a
/// kernel entry, user samples and boot samples (paging off), each with its own stops.
#[test]
fn text_report_breaks_unwind_stops_down_by_place() {
    use kern_profile_format::{
        encode_sample_v2, encode_stats, frame_marker, CpuMode, Privilege, SampleExtras, StopReason,
        VERSION_2,
    };
    let dir = common::temp_dir("stops-by-place");
    let mut out = Vec::new();
    let mut h = common::header(1, false);
    h.markers = true;
    h.encode_version(VERSION_2, &mut out);
    let full = [RET_MIDDLE, RET_WORK, RET_START];
    let entry = [
        RET_MIDDLE,
        frame_marker::KERNEL_ENTRY,
        0x0804_8010,
        0x0804_9000,
    ];
    let mut t = 0;
    let mut push = |pc, frames: &[u64], stop: StopReason, mode, privilege| {
        t += 1000;
        let mut s = common::sample(0, t, pc, frames);
        s.stop = stop.into();
        let x = SampleExtras {
            mode,
            privilege,
            return_register: None,
            page_table_base: None,
        };
        encode_sample_v2(&mut out, 4, &s, &x);
    };
    use CpuMode::*;
    use Privilege::{Kernel, User};
    use StopReason::*;
    for _ in 0..3 {
        push(LEAF_LOOP, &full, NullFramePointer, Paging, Kernel);
    }
    push(LEAF_LOOP, &full[..1], OffStack, Paging, Kernel);
    push(LEAF_LOOP, &entry, Unreadable, Paging, Kernel);
    push(0x0804_8000, &[0x0804_9000], Misaligned, Paging, User);
    push(0x0804_8000, &[], NotIncreasing, Paging, User);
    push(0x0010_0000, &[], Misaligned, PagingOff, Kernel);
    encode_stats(&mut out, 8, 0, &[3, 2, 1, 1, 0, 0, 0, 1], &[800_000]);
    let raw = common::write(&dir, "raw", &out);
    let opts = Options {
        format: OutputFormat::Text,
        progress: false,
        ..Options::default()
    };
    let mut text = Vec::new();
    run_cpu(&raw, Some(&common::tiny_elf()), &opts, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# unwind stops"))
        .collect();
    assert_eq!(
        lines,
        [
            "# unwind stops (statistics record): null frame pointer 3 (37.5%), misaligned \
             frame pointer 2 (25.0%), frame pointer not increasing 1 (12.5%), unreadable \
             memory 1 (12.5%), frame pointer off the stack 1 (12.5%)",
            "# unwind stops of 4 kernel samples (paging on) walked within the kernel: null \
             frame pointer 3 (75.0%), frame pointer off the stack 1 (25.0%)",
            "# unwind stops of 1 kernel samples (paging on) walked on past a kernel entry \
             (their stops end the interrupted context's stack, e.g. a program's after a \
             system call): unreadable memory 1 (100.0%)",
            "# unwind stops of 2 user samples: misaligned frame pointer 1 (50.0%), frame \
             pointer not increasing 1 (50.0%)",
            "# unwind stops of 1 boot and firmware samples (paging off or real mode): \
             misaligned frame pointer 1 (100.0%)",
        ],
        "{text}"
    );
    // Every stop shown is explained.
    for what in [
        "frame pointer off the stack:",
        "unreadable memory:",
        "frame pointer not increasing:",
    ] {
        assert!(text.contains(&format!("#   {what}")), "{what}: {text}");
    }
    // Kept samples of one place whose stops are the run's: no second line says it again.
    let opts = Options {
        mode: ModeFilter::UserOnly,
        ..opts
    };
    let mut text = Vec::new();
    run_cpu(&raw, Some(&common::tiny_elf()), &opts, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("# unwind stops of 2 user samples: "),
        "{text}"
    );
    assert!(!text.contains("kernel samples"), "{text}");
}

/// Kernel entries are interval markers of the Firefox profile, on the vCPU's thread, from
/// the first sample inside to the next sample outside; the names are embedded (offline).
#[test]
fn firefox_kernel_entries_are_markers() {
    let dir = common::temp_dir("firefox-markers");
    let (raw, map) = common::kernel_entries_run(&dir);
    let opts = Options {
        format: OutputFormat::Firefox,
        symbols: vec![map],
        progress: false,
        ..Options::default()
    };
    let mut out = Vec::new();
    run_cpu(&raw, None, &opts, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["meta"]["symbolicated"], true);
    let mut found = Vec::new();
    let strings = v["shared"]["stringArray"].as_array().unwrap();
    for (tid, t) in v["threads"].as_array().unwrap().iter().enumerate() {
        let m = &t["markers"];
        let n = m["length"].as_u64().unwrap() as usize;
        for i in 0..n {
            let name = strings[m["name"][i].as_u64().unwrap() as usize]
                .as_str()
                .unwrap();
            let start = m["startTime"][i].as_f64().unwrap();
            let end = m["endTime"][i].as_f64().unwrap();
            let samples = m["data"][i]["samples"].as_f64().unwrap() as u64;
            // Milliseconds from the profile's start.
            let us = |ms: f64| (ms * 1000.0).round() as u64;
            found.push((tid, name.to_string(), us(start), us(end), samples));
        }
    }
    found.sort();
    assert_eq!(
        found,
        [
            (0, "[interrupt]".to_string(), 200, 400, 2),
            (1, "[syscall]".to_string(), 100, 300, 2),
        ]
    );
}
