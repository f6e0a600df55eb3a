//! Allocation mode's text report and SVG timeline, on traces built record by record.

mod common;

use std::path::PathBuf;

use common::trace::Trace;
use kern_profile::alloc_cmd::draw_timeline;
use kern_profile::output::alloc_report::write_report;
use kern_profile::output::timeline::timeline_file_name;
use kern_profile_alloc::{analyze, Analysis, Options, View};

fn name_stack(frames: &[u64]) -> String {
    frames
        .iter()
        .map(|f| format!("f{f:x}"))
        .collect::<Vec<_>>()
        .join(" <- ")
}

fn report(a: &Analysis, top: usize) -> String {
    let mut out = Vec::new();
    write_report(&mut out, a, &mut name_stack, top).unwrap();
    String::from_utf8(out).unwrap()
}

/// `name` in a fresh temporary directory, removed when the returned guard drops.
fn temp_path(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

#[test]
fn report_of_a_small_trace() {
    let mut t = Trace::new();
    t.alloc("malloc", 0x10, 100, &[0xa, 0xb])
        .alloc("malloc", 0x20, 50, &[0xc])
        .alloc("malloc", 0x30, 30, &[0xa, 0xb]) // peak 180, operation #2
        .free("malloc", 0x10, 0)
        .free("malloc", 0x10, 0) // double free
        .free("malloc", 0x99, 0) // unknown
        .alloc("buddy", 0x1000, 4, &[0xd]);
    let a = t.analyze(View::Live);
    let want = format!(
        "memtrace: 7 records, 2 allocator(s)

allocator `buddy` (sizes in the trace's units)
  operations                               1
  allocations                              1
  reallocations                            0
  frees                                    0
  units allocated                          4  (allocations and reallocations' new sizes)
  peak live                                4  at operation #0 (byte offset {b0})
  live at end                              4  in 1 block(s)
  frees of unknown pointers                0
  double frees                             0
  top 1 of 1 stack(s) still holding memory:
               4  100.0%  fd

allocator `malloc` (sizes in the trace's units)
  operations                               6
  allocations                              3
  reallocations                            0
  frees                                    3
  units allocated                        180  (allocations and reallocations' new sizes)
  peak live                              180  at operation #2 (byte offset {m2})
  live at end                             80  in 2 block(s)
  frees of unknown pointers                1
  double frees                             1
  top 1 of 2 stack(s) still holding memory:
              50   62.5%  fc
",
        b0 = t.offsets[6],
        m2 = t.offsets[2],
    );
    assert_eq!(report(&a, 1), want);
    // With room for both stacks, the smaller one follows.
    assert!(report(&a, 10).contains("              30   37.5%  fa <- fb\n"));
    // top = 0: counters only.
    assert!(!report(&a, 0).contains("top "));
}

#[test]
fn report_warns_about_truncation_and_skips_and_explains_reallocations() {
    let mut t = Trace::new();
    t.alloc("heap", 0xa, 8, &[1])
        .alloc("heap", 0xb, 1, &[1])
        .realloc("heap", 0xa, 16, &[2])
        .alloc("heap", 0xa, 4, &[3]) // the realloc moved
        .realloc("heap", 0xc, 40, &[2]) // where it moved to
        .alloc("heap", 0xd, 1, &[1]);
    let bad = t.offsets[1] as usize + 5;
    t.bytes[bad] = 9;
    let cut = t.bytes.len() - 3;
    let a = analyze(
        &t.bytes[..cut],
        &Options {
            lenient: true,
            ..Options::default()
        },
    )
    .unwrap();
    let r = report(&a, 5);
    let skipped = t.offsets[2] - t.offsets[1];
    for line in [
        "memtrace: 4 records, 1 allocator(s)\n".to_string(),
        format!(
            "warning: file ends inside a record at byte offset {} (28 of 31 bytes present); \
             everything before it was used\n",
            t.offsets[5]
        ),
        "warning: skipped 1 unreadable region(s), 31 bytes in all (lenient):\n".to_string(),
        format!("  {skipped} bytes at byte offset {}\n", t.offsets[1]),
        "  reallocations                            2  (1 of a pointer not live)\n".to_string(),
        "  live at end                             44  in 2 block(s)\n".to_string(),
        "    of which last reallocated             40  (kept at the old pointer, may have moved)\n"
            .to_string(),
        "  reallocs proven moved                    1  (their old pointer was allocated again)\n"
            .to_string(),
        "  taken as moved blocks                    1  (unknown/double frees and reallocs matched \
         to a block a realloc may have moved)\n"
            .to_string(),
        "              40   90.9%  f2\n".to_string(),
        "               4    9.1%  f3\n".to_string(),
    ] {
        assert!(r.contains(&line), "missing {line:?} in\n{r}");
    }
    assert_eq!(skipped, 31);
}

#[test]
fn empty_report() {
    let a = analyze(&[][..], &Options::default()).unwrap();
    assert_eq!(report(&a, 10), "memtrace: 0 records, 0 allocator(s)\n");
}

#[test]
fn timeline_svg_is_written_with_the_allocator_name_and_peak() {
    let mut t = Trace::new();
    for i in 0..5000u64 {
        t.alloc(
            "kmalloc",
            0x1000 + i * 16,
            1 + i % 64,
            &[0xc000_0000 + i % 5],
        );
        if i % 2 == 1 {
            t.free("kmalloc", 0x1000 + (i - 1) * 16, 0);
        }
    }
    let a = t.analyze(View::Live);
    let p = &a.allocators[0];
    let (_dir, path) = temp_path(&timeline_file_name(&p.name));
    assert!(path.ends_with("mem-kmalloc-timeline.svg"));
    draw_timeline(&path, p).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    assert!(svg.contains("kmalloc"));
    assert!(svg.contains(&format!(
        "peak {} at operation #{}",
        p.stats.peak_live, p.stats.peak_at_op
    )));
    assert!(svg.contains("<polyline"));
    assert!(svg.trim_end().ends_with("</svg>"));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn timeline_svg_of_an_allocator_that_never_holds_memory() {
    let mut t = Trace::new();
    t.free("odd<&>name", 0x10, 0);
    let a = t.analyze(View::Live);
    let p = &a.allocators[0];
    let (_dir, path) = temp_path(&timeline_file_name(&p.name));
    assert!(path.ends_with("mem-odd___name-timeline.svg"));
    draw_timeline(&path, p).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("odd&lt;&amp;&gt;name"));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn timeline_into_a_missing_directory_is_an_error() {
    let mut t = Trace::new();
    t.alloc("heap", 1, 1, &[]);
    let a = t.analyze(View::Live);
    let (_dir, dir) = temp_path("no-such-dir");
    let path = dir.join("x").join("t.svg");
    let err = draw_timeline(&path, &a.allocators[0]).unwrap_err();
    assert!(err.to_string().contains("t.svg"), "{err}");
}
