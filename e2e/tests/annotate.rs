//! `kern-profile annotate RAW ELF hot_leaf` on the example kernel: its lines add up to its self
//! share in the text report (`--no-inline`: the annotation counts every PC in the function);
//! on every architecture, its code disassembled.

use kern_profile_e2e::*;

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
    let lines = annotate_line_counts(&text);
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

/// x86_64, riscv64 and aarch64 too: the hottest function's lines add up to its self count,
/// its code is disassembled (no `.word`, no sample inside an instruction: the decoder's
/// instruction lengths agree with the PCs the plugin sampled).
fn every_architecture_is_disassembled(arch: &'static str, need: Need) {
    if skip_unless(&[Need::Qemu(arch), Need::Plugin, Need::Bin, need]) {
        return;
    }
    let kernel = example_kernel(arch);
    let run = boot_kernel(arch, &kernel, "annotate", "period=10000", "rounds=400");
    let (raw, k) = (run.raw.to_str().unwrap(), kernel.to_str().unwrap());
    let hot = expected_of(arch)["kernel"]["hottest"]
        .as_str()
        .unwrap()
        .to_string();
    let text = kern_profile(&["annotate", raw, k, &hot]);
    let sum: u64 = annotate_line_counts(&text).iter().sum();
    let counts = self_counts(&folded_of(&run.raw, &kernel, &["--no-inline"]));
    assert!(counts[&hot] > 100, "{counts:?}");
    assert_eq!(sum, counts[&hot], "{text}");
    assert!(!text.contains(".word"), "{text}");
    assert!(!text.contains("fell inside an instruction"), "{text}");
    assert!(!text.contains("raw words"), "{text}");
}

#[test]
fn x86_64_is_disassembled() {
    every_architecture_is_disassembled("x86_64", Need::Kernel64);
}

#[test]
fn riscv64_is_disassembled() {
    every_architecture_is_disassembled("riscv64", Need::VirtKernel("riscv64"));
}

#[test]
fn aarch64_is_disassembled() {
    every_architecture_is_disassembled("aarch64", Need::VirtKernel("aarch64"));
}
