//! Golden files of every output on runs of the example kernel recorded with the real plugin
//! (tests/data/example, see its README). `KP_BLESS=1` rewrites the goldens.

mod common;

use std::path::{Path, PathBuf};

use common::runs::in_format;
use kern_profile::alloc_cmd::{run_alloc_to, AllocFormat, AllocOptions, AllocView};
use kern_profile::{Options, OutputFormat};

fn example(name: &str) -> PathBuf {
    common::data("example").join(name)
}

fn run(raw: &str, opts: &Options) -> String {
    common::runs::recorded_text("example", raw, opts)
}

/// `name` and the share of its self samples, from a text report's first table.
fn self_share(report: &str, name: &str) -> f64 {
    let line = report
        .lines()
        .find(|l| l.ends_with(&format!("  {name}")))
        .unwrap_or_else(|| panic!("{name} not in\n{report}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    cols[1].trim_end_matches('%').parse().unwrap()
}

#[test]
fn period_run_in_every_format() {
    let folded = run("raw-period-exact", &in_format(OutputFormat::Folded));
    common::golden("example-period.folded", folded.as_bytes());
    let text = run("raw-period-exact", &in_format(OutputFormat::Text));
    common::golden("example-period.txt", text.as_bytes());
    let svg = run("raw-period-exact", &in_format(OutputFormat::Svg));
    common::golden("example-period.svg", svg.as_bytes());
    let json = run("raw-period-exact", &in_format(OutputFormat::Firefox));
    common::golden("example-period.json", json.as_bytes());

    assert!(
        text.contains("# samples: 1257 read, 1257 kept; 0 dropped by the plugin"),
        "{text}"
    );
    // The workload's known shape: hot_leaf about half the time.
    let hot = self_share(&text, "kernel::workload::hot_leaf");
    assert!((40.0..60.0).contains(&hot), "hot_leaf {hot}%");
    assert!(folded
        .contains("_start;kmain;kernel::workload::run_workload;kernel::workload::stage_outer;"));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["threads"].as_array().unwrap().len(), 1);
}

#[test]
fn exact_counts_attribute_inlined_code() {
    let text = run(
        "raw-period-exact",
        &Options {
            exact: true,
            ..in_format(OutputFormat::Text)
        },
    );
    common::golden("example-exact.txt", text.as_bytes());
    let folded = run(
        "raw-period-exact",
        &Options {
            exact: true,
            ..in_format(OutputFormat::Folded)
        },
    );
    common::golden("example-exact.folded", folded.as_bytes());
    // mix_inlined only exists inlined into blend: exact counts see it.
    assert!(
        folded.contains("kernel::workload::blend;kernel::workload::mix_inlined_[i] "),
        "{folded}"
    );
    let outer = run(
        "raw-period-exact",
        &Options {
            exact: true,
            inline: false,
            ..in_format(OutputFormat::Folded)
        },
    );
    assert!(!outer.contains("mix_inlined"));
}

#[test]
fn delay_run() {
    let folded = run("raw-delay", &in_format(OutputFormat::Folded));
    common::golden("example-delay.folded", folded.as_bytes());
    let text = run("raw-delay", &in_format(OutputFormat::Text));
    assert!(
        text.contains("every 200 µs of host time per vCPU (delay)"),
        "{text}"
    );
    let json = run("raw-delay", &in_format(OutputFormat::Firefox));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["meta"]["interval"].as_f64().unwrap(), 0.2);
}

#[test]
fn allocation_mode() {
    let dir = common::temp_dir("alloc-recorded");
    let opts = |format, view| AllocOptions {
        format,
        view,
        progress: false,
        ..AllocOptions::default()
    };
    let elf = example("kernel.elf");
    let memtrace = example("memtrace");
    let r = run_alloc_to(
        &memtrace,
        Some(&elf),
        &dir,
        &opts(AllocFormat::Svg, AllocView::Live),
        None,
    )
    .unwrap();
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let names: Vec<String> = r
        .files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["mem-kmalloc.svg", "mem-pages.svg"]);
    common::golden(
        "example-mem-kmalloc.svg",
        &std::fs::read(dir.join("mem-kmalloc.svg")).unwrap(),
    );

    for (view, name) in [
        (AllocView::Live, "live"),
        (AllocView::Peak, "peak"),
        (AllocView::Count, "count"),
        (AllocView::Allocated, "allocated"),
    ] {
        run_alloc_to(
            &memtrace,
            Some(&elf),
            &dir,
            &opts(AllocFormat::Folded, view),
            None,
        )
        .unwrap();
        let f = std::fs::read(dir.join("mem-kmalloc.folded")).unwrap();
        common::golden(&format!("example-mem-kmalloc-{name}.folded"), &f);
        // Allocation stacks are return addresses: every frame is named.
        assert!(!String::from_utf8_lossy(&f).contains("[unknown]"));
    }

    let mut text = Vec::new();
    run_alloc_to(
        &memtrace,
        Some(&elf),
        &dir,
        &opts(AllocFormat::Text, AllocView::Live),
        Some(&mut text),
    )
    .unwrap();
    common::golden("example-mem-report.txt", &text);

    let timeline = AllocOptions {
        timeline: true,
        ..opts(AllocFormat::Folded, AllocView::Live)
    };
    let r = run_alloc_to(&memtrace, Some(&elf), &dir, &timeline, None).unwrap();
    assert!(r.files.contains(&dir.join("mem-pages-timeline.svg")));
    let svg = std::fs::read_to_string(dir.join("mem-pages-timeline.svg")).unwrap();
    assert!(svg.contains("<svg"));
    let _ = Path::new("");
}
