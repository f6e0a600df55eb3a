//! `-f pprof` on runs of the example kernel recorded with the real plugin (tests/data/example
//! and example-modes): a golden text dump of the decoded profile, the profile read back into
//! folded stacks equal to `-f folded`'s, and an independent decoder (npm's `pprof-format`,
//! when `node` and `npm` are there) agreeing with `-f text`. `KP_BLESS=1` rewrites the
//! goldens; `KP_PPROF_NODE=require` makes a missing node/npm a failure instead of a skip.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::runs::recorded;
use kern_profile::output::pprof_proto::{decode, dump, Profile};
use kern_profile::{Options, OutputFormat};

fn data(dir: &str, name: &str) -> PathBuf {
    common::data(dir).join(name)
}

fn run(dir: &str, raw: &str, opts: &Options) -> Vec<u8> {
    recorded(dir, raw, opts).unwrap_or_else(|e| panic!("{e}"))
}

fn pprof(dir: &str, raw: &str, opts: &Options) -> Profile {
    let bytes = run(dir, raw, opts);
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzipped");
    decode(&bytes, 1 << 30).unwrap()
}

fn with(format: OutputFormat, opts: &Options) -> Options {
    Options {
        format,
        ..opts.clone()
    }
}

fn pprof_opts() -> Options {
    Options {
        format: OutputFormat::Pprof,
        ..Options::default()
    }
}

/// `opts` with `-f text`: the report.
fn text_of(dir: &str, raw: &str, opts: &Options) -> String {
    String::from_utf8(run(dir, raw, &with(OutputFormat::Text, opts))).unwrap()
}

/// Asserts that `p`, read back as folded stacks, is `-f folded`'s output with `opts`.
fn assert_same_stacks_as_folded(p: &Profile, dir: &str, raw: &str, opts: &Options) {
    let folded = run(dir, raw, &with(OutputFormat::Folded, opts));
    assert_eq!(refolded(p), String::from_utf8(folded).unwrap());
}

/// The profile as folded stacks: each sample's locations root first, a location's lines
/// outer function first, inlined ones marked `_[i]`; `cpu N;` first from a `vcpu` label.
fn refolded(p: &Profile) -> String {
    let s = |i: i64| p.string_table[i as usize].as_str();
    let mut lines: BTreeMap<String, i64> = BTreeMap::new();
    for smp in &p.sample {
        let mut frames: Vec<String> = Vec::new();
        for l in &smp.label {
            assert_eq!(s(l.key), "vcpu");
            frames.push(format!("cpu {}", s(l.str)));
        }
        for id in smp.location_id.iter().rev() {
            let loc = &p.location[*id as usize - 1];
            assert_eq!(loc.id, *id);
            for (i, line) in loc.line.iter().enumerate().rev() {
                let f = &p.function[line.function_id as usize - 1];
                assert_eq!(f.id, line.function_id);
                let inlined = if i + 1 < loc.line.len() { "_[i]" } else { "" };
                frames.push(format!("{}{inlined}", s(f.name)));
            }
        }
        *lines.entry(frames.join(";")).or_insert(0) += smp.value[0];
    }
    lines.iter().map(|(k, n)| format!("{k} {n}\n")).collect()
}

/// Self values by function name (the innermost line of each sample's leaf location).
fn self_by_function(p: &Profile) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for smp in &p.sample {
        let leaf = &p.location[smp.location_id[0] as usize - 1];
        let f = &p.function[leaf.line[0].function_id as usize - 1];
        *m.entry(p.string_table[f.name as usize].clone())
            .or_insert(0) += smp.value[0];
    }
    m
}

/// The first row of a text report's first table: (self count, function).
fn text_top(text: &str) -> (i64, String) {
    let table = text
        .lines()
        .skip_while(|l| !l.starts_with("Top "))
        .nth(2)
        .unwrap_or_else(|| panic!("no table in\n{text}"));
    let cols: Vec<&str> = table.split_whitespace().collect();
    (cols[0].parse().unwrap(), cols[4..].join(" "))
}

/// The total a text report's first table is of: `(of N)`.
fn text_total(text: &str) -> i64 {
    let line = text.lines().find(|l| l.starts_with("Top ")).unwrap();
    let n = line.rsplit("(of ").next().unwrap();
    n.trim_end_matches("):").parse().unwrap()
}

#[test]
fn period_run_golden_and_same_stacks_as_folded() {
    let opts = pprof_opts();
    let bytes = run("example", "raw-period-exact", &opts);
    assert_eq!(
        bytes,
        run("example", "raw-period-exact", &opts),
        "deterministic"
    );
    let p = decode(&bytes, 1 << 30).unwrap();
    common::golden("example-period.pprof.txt", dump(&p).as_bytes());

    assert_same_stacks_as_folded(&p, "example", "raw-period-exact", &opts);
    let text = text_of("example", "raw-period-exact", &opts);
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, text_total(&text));
    let (n, top) = text_top(&text);
    assert_eq!(self_by_function(&p)[&top], n);
    // A recording's facts: period=100000 instructions, its start time.
    let s = |i: i64| p.string_table[i as usize].as_str();
    let pt = p.period_type.unwrap();
    assert_eq!(
        (s(pt.r#type), s(pt.unit), p.period),
        ("instructions", "count", 100_000)
    );
    assert!(p.time_nanos > 1_600_000_000_000_000_000, "{}", p.time_nanos);
    assert_eq!(s(p.mapping[0].filename), "kernel.elf");
}

#[test]
fn exact_counts_as_instructions_with_inlined_lines() {
    let opts = Options {
        exact: true,
        ..pprof_opts()
    };
    let p = pprof("example", "raw-period-exact", &opts);
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(s(p.sample_type[0].r#type), "instructions");
    assert_same_stacks_as_folded(&p, "example", "raw-period-exact", &opts);
    let text = text_of("example", "raw-period-exact", &opts);
    assert_eq!(
        p.sample.iter().map(|s| s.value[0]).sum::<i64>(),
        text_total(&text)
    );
    let (n, top) = text_top(&text);
    assert_eq!(self_by_function(&p)[&top], n);
    // The example's `mix_inlined`, inlined into `blend`: one location, innermost line first.
    let inlined = p
        .location
        .iter()
        .find(|l| {
            let names: Vec<&str> = l
                .line
                .iter()
                .map(|x| s(p.function[x.function_id as usize - 1].name))
                .collect();
            names == ["kernel::workload::mix_inlined", "kernel::workload::blend"]
        })
        .expect("a location of mix_inlined inlined into blend");
    assert!(inlined.line.iter().all(|l| l.line > 0), "{inlined:?}");
    let f = &p.function[inlined.line[0].function_id as usize - 1];
    assert!(s(f.filename).ends_with(".rs"), "{}", s(f.filename));
}

#[test]
fn per_cpu_samples_carry_a_vcpu_label() {
    let opts = Options {
        per_cpu: true,
        ..pprof_opts()
    };
    let p = pprof("example-modes", "raw-smp", &opts);
    common::golden("example-smp-per-cpu.pprof.txt", dump(&p).as_bytes());
    assert_same_stacks_as_folded(&p, "example-modes", "raw-smp", &opts);
    let cpus: std::collections::BTreeSet<&str> = p
        .sample
        .iter()
        .map(|s| p.string_table[s.label[0].str as usize].as_str())
        .collect();
    assert!(cpus.len() > 1, "{cpus:?}");
    // No `cpu N` frame is left in the stacks.
    assert!(p
        .function
        .iter()
        .all(|f| !p.string_table[f.name as usize].starts_with("cpu ")));
}

#[test]
fn user_frames_map_to_the_user_program() {
    let opts = Options {
        user_binaries: vec![data("example-modes", "user.elf")],
        ..pprof_opts()
    };
    let p = pprof("example-modes", "raw-user", &opts);
    assert_same_stacks_as_folded(&p, "example-modes", "raw-user", &opts);
    let s = |i: i64| p.string_table[i as usize].as_str();
    let names: Vec<&str> = p.mapping.iter().map(|m| s(m.filename)).collect();
    assert_eq!(names, ["kernel.elf", "user.elf"]);
    assert!(p.mapping.iter().all(|m| m.memory_limit > m.memory_start));
    let mapping_of = |name: &str| {
        p.location
            .iter()
            .find(|l| {
                l.line
                    .iter()
                    .any(|x| s(p.function[x.function_id as usize - 1].name) == name)
            })
            .unwrap_or_else(|| panic!("no {name}"))
            .mapping_id
    };
    assert_eq!(mapping_of("user::user_hot"), 2);
    assert_eq!(mapping_of("kmain"), 1);
    assert_eq!(mapping_of("[user] user.elf"), 0);
}

#[test]
fn what_pprof_cannot_show_is_an_error() {
    let diff = Options {
        diff_base: Some(data("example", "raw-delay")),
        ..pprof_opts()
    };
    let e = recorded("example", "raw-period-exact", &diff).unwrap_err();
    assert!(e.to_string().contains("--diff"), "{e}");
    let exact_in_time = Options {
        exact: true,
        from_time: Some(0.0),
        ..pprof_opts()
    };
    let e = recorded("example", "raw-period-exact", &exact_in_time).unwrap_err();
    assert!(e.to_string().contains("--from-time"), "{e}");
    let no_exact = Options {
        exact: true,
        ..pprof_opts()
    };
    let e = recorded("example", "raw-delay", &no_exact).unwrap_err();
    assert!(e.to_string().contains("exact=on"), "{e}");
    // Allocation mode has no pprof output.
    let o = Command::new(env!("CARGO_BIN_EXE_kern-profile"))
        .arg("--alloc")
        .arg(data("example", "memtrace"))
        .arg(data("example", "kernel.elf"))
        .args(["-f", "pprof", "--no-progress"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not firefox or pprof"), "{err}");
    // Garbage is not a profile.
    assert!(decode(b"\x1f\x8b garbage", 1 << 20).is_err());
}

#[test]
fn default_output_file_is_profile_pb_gz() {
    let dir = common::kp_in_fresh_dir(
        &data("example", "raw-delay"),
        &data("example", "kernel.elf"),
        &["-f", "pprof", "--no-progress"],
    );
    let bytes = std::fs::read(dir.path().join("profile.pb.gz")).unwrap();
    let p = decode(&bytes, 1 << 30).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    let pt = p.period_type.unwrap();
    assert_eq!((s(pt.r#type), s(pt.unit)), ("time", "nanoseconds"));
    assert!(p.period > 0);
}

/// Whether `cmd --version` runs.
fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Skips (with a message) or, with `KP_PPROF_NODE=require`, fails.
fn skip(why: &str) {
    if std::env::var_os("KP_PPROF_NODE").is_some_and(|v| v == "require") {
        panic!("{why}");
    }
    eprintln!("skipping the pprof-format check: {why}");
}

const READER: &str = r#"
const fs = require('fs'); const zlib = require('zlib');
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const str = i => p.stringTable.strings[Number(i)];
const fn = new Map(p.function.map(f => [Number(f.id), f]));
const loc = new Map(p.location.map(l => [Number(l.id), l]));
let total = 0; const self = new Map();
for (const s of p.sample) {
  const v = Number(s.value[0]); total += v;
  const leaf = loc.get(Number(s.locationId[0]));
  const name = str(fn.get(Number(leaf.line[0].functionId)).name);
  self.set(name, (self.get(name) || 0) + v);
}
const top = [...self.entries()].sort((a, b) => b[1] - a[1])[0];
console.log(JSON.stringify({ type: str(p.sampleType[0].type), total, top: top[0], self: top[1] }));
"#;

/// Reads `file` with npm's `pprof-format` (installed in `dir`).
fn read_with_node(dir: &Path, file: &Path) -> serde_json::Value {
    let o = Command::new("node")
        .current_dir(dir)
        .arg("read.js")
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn an_independent_decoder_agrees_with_the_text_report() {
    if !have("node") || !have("npm") {
        return skip("node or npm not found");
    }
    let dir = tempfile::tempdir().unwrap();
    let install = Command::new("npm")
        .current_dir(dir.path())
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--no-save",
            "pprof-format@2",
        ])
        .output()
        .unwrap();
    if !install.status.success() {
        return skip(&format!(
            "npm install pprof-format failed: {}",
            String::from_utf8_lossy(&install.stderr)
        ));
    }
    std::fs::write(dir.path().join("read.js"), READER).unwrap();
    for (raw, exact, unit) in [
        ("raw-period-exact", false, "samples"),
        ("raw-delay", false, "samples"),
        ("raw-period-exact", true, "instructions"),
    ] {
        let opts = Options {
            exact,
            ..pprof_opts()
        };
        let file = dir.path().join(format!("{raw}-{exact}.pb.gz"));
        std::fs::write(&file, run("example", raw, &opts)).unwrap();
        let v = read_with_node(dir.path(), &file);
        let text = text_of("example", raw, &opts);
        let (n, top) = text_top(&text);
        assert_eq!(v["type"], unit, "{v}");
        assert_eq!(v["total"], text_total(&text), "{raw} {exact}: {v}");
        // The text report marks inlined functions; pprof has them as lines.
        assert_eq!(v["top"], top.trim_end_matches("_[i]"), "{raw} {exact}: {v}");
        assert_eq!(v["self"], n, "{raw} {exact}: {v}");
    }
}

/// Prints the dump of any profile: `PPROF_FILE=profile.pb.gz cargo test --release -p
/// kern-profile --test pprof dump_a_file -- --ignored --nocapture`.
#[test]
#[ignore]
fn dump_a_file() {
    let b = std::fs::read(std::env::var("PPROF_FILE").unwrap()).unwrap();
    print!("{}", dump(&decode(&b, 1 << 30).unwrap()));
}
