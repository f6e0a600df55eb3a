//! The ORC tables of Debian's amd64 kernels (6.1: the original entry layout; 6.12: the 6.4
//! one), read from the vmlinux inside their bzImages (scripts/setup/ downloads them into
//! target/linux/; the tests skip without them), checked against the functions kallsyms
//! names.

use std::path::{Path, PathBuf};

use kern_profile_linux_image::{open, Options};
use kern_profile_unwind::tables::{orc::reg, OrcKind, OrcLayout};
use kern_profile_unwind::{Limits, UnwindTables};

fn image(dir: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let p = root.join("target/linux").join(dir).join("vmlinuz");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: no {}", p.display());
        None
    }
}

fn check(dir: &str, entries: usize, layout: OrcLayout, fork: &str) {
    let Some(path) = image(dir) else { return };
    let image = open(&path, &Options::default()).unwrap();
    let syms = image.kallsyms().unwrap();
    let tables = UnwindTables::from_elf(&image.bytes, Limits::default()).unwrap();
    let orc = tables.orc.as_ref().expect("an ORC table");
    assert_eq!((orc.len(), orc.layout), (entries, layout));
    // Every entry is in an executable section (.text, .init.text, .altinstr_replacement…),
    // and none shares its address with another real one.
    let stats = tables.stats();
    println!("{dir}: {stats}");
    assert_eq!(stats.refused(), 0, "{stats}");
    // No CFI: Linux's amd64 build discards .eh_frame.
    assert!(tables.cfi.is_none());
    let at = |name: &str, off: u64| {
        let a = syms
            .address_of(name)
            .unwrap_or_else(|| panic!("{name} in kallsyms"));
        orc.find(a + off)
            .unwrap_or_else(|| panic!("an entry for {name}+{off:#x}"))
    };
    // A C function's first instruction: the return address right at the stack pointer.
    for f in ["ksys_read", "schedule", "do_syscall_64"] {
        let e = at(f, 0);
        assert_eq!(
            (e.kind, e.sp_reg, e.sp_offset, e.bp_reg),
            (OrcKind::Call, reg::SP, 8, reg::UNDEFINED),
            "{f}"
        );
    }
    // The system-call entry once it has pushed pt_regs; interrupt entries at their start
    // (the hardware's frame alone).
    let e = at("entry_SYSCALL_64_after_hwframe", 0x60);
    assert_eq!(e.kind, OrcKind::Regs, "{e:?}");
    let e = at("asm_sysvec_apic_timer_interrupt", 0);
    assert_eq!(e.kind, OrcKind::RegsPartial, "{e:?}");
    // A new task's first frame is the stack's end.
    assert_eq!(at(fork, 0).kind, OrcKind::EndOfStack);
    // The block index (and its cache, the second time) finds what a binary search over
    // every entry finds, at each entry's first address and around it.
    let addrs: Vec<u64> = orc.addresses().collect();
    assert_eq!(addrs.len(), entries);
    for _ in 0..2 {
        for &a in &addrs {
            for p in [a - 1, a, a + 1] {
                assert_eq!(orc.find(p), orc.find_by_search(p), "{p:#x}");
            }
        }
    }
    println!("{}: {}", dir, tables.summary());
}

#[test]
fn debian_6_1_amd64() {
    check("x86_64", 384_849, OrcLayout::Original, "ret_from_fork");
}

#[test]
fn debian_6_12_amd64() {
    check(
        "x86_64-6.12",
        440_189,
        OrcLayout::Typed,
        "ret_from_fork_asm",
    );
}
