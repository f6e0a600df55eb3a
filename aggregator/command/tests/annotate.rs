//! `kern-profile annotate RAW ELF FUNCTION` on the synthetic run against tests/data/tiny.elf
//! (the example kernel's `hot_leaf`: e2e/tests/annotate.rs).

mod common;

use common::kp;
use kern_profile_test_support::reports::annotate_line_counts as line_counts;

fn setup(name: &str) -> std::path::PathBuf {
    common::kernel_dir(name, &[("raw-data", &common::synthetic_raw(true))])
}

#[test]
fn self_samples_by_line_and_instruction() {
    let dir = setup("annotate");
    let o = kp(&dir, &["annotate", "raw-data", "kernel.elf", "leaf"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // 20 in the inlined square, 10 in the loop, one at the entry, one at the ret.
    assert!(out.contains("# 32 self samples of 45 (71.11%)"), "{out}");
    assert_eq!(line_counts(&out).iter().sum::<u64>(), 32, "{out}");
    assert!(line_counts(&out).len() > 1, "{out}");
    let ins = |addr: &str| {
        out.lines()
            .find(|l| l.contains(addr))
            .unwrap_or_else(|| panic!("{addr} in {out}"))
            .to_string()
    };
    assert!(ins("0xc0100000 ").contains("push ebp"), "{out}");
    assert!(ins("0xc0100000 ").contains(" 1  "), "{out}");
    let square = ins("0xc0100019 ");
    assert!(
        square.contains("imul") && square.contains(" 20  "),
        "{square}"
    );
    // Golden: the whole view.
    common::golden("annotate-leaf.txt", out.as_bytes());
}

#[test]
fn exact_counts() {
    let dir = setup("annotate-exact");
    let o = kp(
        &dir,
        &["annotate", "raw-data", "kernel.elf", "leaf", "--exact"],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("# 10000 instructions executed of 10057 (99.43%)"),
        "{out}"
    );
    assert_eq!(line_counts(&out).iter().sum::<u64>(), 10000, "{out}");
}

#[test]
fn unknown_function_suggests_close_names() {
    let dir = setup("annotate-unknown");
    let o = kp(&dir, &["annotate", "raw-data", "kernel.elf", "midle"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("no function `midle`") && err.contains("did you mean middle"),
        "{err}"
    );
}
