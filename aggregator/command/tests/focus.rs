//! `--focus`, `--exclude`, `--from-time` and `--to-time` on a run of the example kernel
//! recorded with the real plugin (tests/data/example): every output shaped alike, the
//! counts and headers following the kept samples.

mod common;

use std::path::PathBuf;

use kern_profile::{run_cpu, Options, OutputFormat};

fn example(name: &str) -> PathBuf {
    common::data("example").join(name)
}

fn run(opts: &Options) -> String {
    let (out, _) = common::runs::cpu(&example("raw-delay"), Some(&example("kernel.elf")), opts)
        .unwrap_or_else(|e| panic!("{e}"));
    String::from_utf8(out).unwrap()
}

fn folded(opts: Options) -> Vec<(String, u64)> {
    run(&Options {
        format: OutputFormat::Folded,
        ..opts
    })
    .lines()
    .map(|l| {
        let (s, n) = l.rsplit_once(' ').unwrap();
        (s.to_string(), n.parse().unwrap())
    })
    .collect()
}

fn total(f: &[(String, u64)]) -> u64 {
    f.iter().map(|l| l.1).sum()
}

#[test]
fn focus_roots_every_stack_at_the_function() {
    let all = folded(Options::default());
    let through: u64 = all
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == "kernel::workload::stage_middle"))
        .map(|l| l.1)
        .sum();
    assert!(through > 0);
    let focused = folded(Options {
        focus: Some("stage_middle".into()),
        ..Options::default()
    });
    assert_eq!(
        total(&focused),
        through,
        "the samples through it, all of them"
    );
    for (s, _) in &focused {
        assert!(s.starts_with("kernel::workload::stage_middle"), "{s}");
    }
    // The text report counts and says the same.
    let text = run(&Options {
        format: OutputFormat::Text,
        focus: Some("stage_middle".into()),
        ..Options::default()
    });
    assert!(
        text.contains(&format!("{through} kept (focus on stage_middle)")),
        "{text}"
    );
    // A name nothing matches keeps nothing, and says so.
    let none = folded(Options {
        focus: Some("no_such_function".into()),
        ..Options::default()
    });
    assert!(none.is_empty());
}

#[test]
fn exclude_drops_the_stacks_through_a_function() {
    let all = folded(Options::default());
    let kept = folded(Options {
        exclude: vec!["hot_leaf".into(), "kernel::workload::recurse".into()],
        ..Options::default()
    });
    let expected: u64 = all
        .iter()
        .filter(|(s, _)| {
            !s.split(';')
                .any(|f| f == "kernel::workload::hot_leaf" || f == "kernel::workload::recurse")
        })
        .map(|l| l.1)
        .sum();
    assert!(expected < total(&all));
    assert_eq!(total(&kept), expected);
    assert!(kept.iter().all(|(s, _)| !s.contains("hot_leaf")));
}

#[test]
fn time_ranges_split_the_recording() {
    // The recording spans about 0.3 s: 0.2 s cuts it in two.
    let all = total(&folded(Options::default()));
    let early = total(&folded(Options {
        to_time: Some(0.2),
        ..Options::default()
    }));
    let late = total(&folded(Options {
        from_time: Some(0.2),
        ..Options::default()
    }));
    assert!(early > 0 && late > 0, "{early} {late}");
    assert_eq!(early + late, all);
    let svg = run(&Options {
        from_time: Some(0.2),
        ..Options::default()
    });
    assert!(
        svg.contains("from 0.2 s into the recording"),
        "the subtitle says so"
    );
}

#[test]
fn the_firefox_profile_is_shaped_too() {
    let json = run(&Options {
        format: OutputFormat::Firefox,
        focus: Some("kernel::workload::blend".into()),
        ..Options::default()
    });
    assert!(json.contains("kernel::workload::blend"));
    assert!(
        !json.contains("\"kmain\""),
        "frames above the focus are gone"
    );
    let json = run(&Options {
        format: OutputFormat::Firefox,
        exclude: vec!["blend".into()],
        ..Options::default()
    });
    assert!(!json.contains("kernel::workload::blend"));
    assert!(json.contains("kernel::workload::hot_leaf"));
}

#[test]
fn legacy_files_and_exact_counts_refuse_time_ranges() {
    let dir = common::temp_dir("focus-legacy");
    let legacy = common::write(&dir, "legacy", &common::legacy(&[&[0x1000, 0x2000]]));
    let opts = Options {
        from_time: Some(1.0),
        progress: false,
        ..Options::default()
    };
    let e = run_cpu(&legacy, Some(&common::tiny_elf()), &opts, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("its samples have no time"), "{e}");
    let e = run_cpu(
        &example("raw-period-exact"),
        Some(&example("kernel.elf")),
        &Options {
            exact: true,
            ..opts
        },
        &mut Vec::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("exact counts are totals of the whole run"),
        "{e}"
    );
}
