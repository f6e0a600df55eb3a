//! The cost of a stack walk by the kernel's ORC table against a frame-pointer walk of the
//! same depth, over a stack in memory (no QEMU: the unwinders' own cost), on Debian's amd64
//! 6.1 kernel (385 Ki ORC entries).
//!
//! usage: cargo run --release -p kern-profile-unwind --example walk_cost [-- VMLINUZ]
//! (default target/linux/x86_64/vmlinuz)

use std::time::Instant;

use kern_profile_linux_image::{open, Options};
use kern_profile_unwind::tables::{orc::reg, OrcKind};
use kern_profile_unwind::{
    walk_across, walk_tables, Crossings, Limits, PtrWidth, StartRegs, UnwindTables,
};

const DEPTH: usize = 12;
const RUNS: u32 = 200_000;
const STACK: u64 = 0xffff_c900_0001_0000;

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or("target/linux/x86_64/vmlinuz".into());
    let t0 = Instant::now();
    let image = open(path.as_ref(), &Options::default()).expect("the kernel image");
    let unpacked = t0.elapsed();
    let syms = image.kallsyms().expect("its kallsyms");
    let t1 = Instant::now();
    let tables = UnwindTables::from_elf(&image.bytes, Limits::default()).expect("its tables");
    println!(
        "{path}: unpacked in {:.0} ms; {} read in {:.0} ms",
        unpacked.as_secs_f64() * 1e3,
        tables.summary(),
        t1.elapsed().as_secs_f64() * 1e3
    );
    let orc = tables.orc.as_ref().expect("an ORC table");
    // Functions whose first instruction's rule is a plain call frame, then a thread's end.
    let funcs: Vec<u64> = syms
        .symbols
        .iter()
        .filter(|s| s.is_text())
        .map(|s| s.address)
        .filter(|&a| {
            orc.find(a)
                .is_some_and(|e| e.kind == OrcKind::Call && e.sp_reg == reg::SP && e.sp_offset == 8)
        })
        .step_by(997)
        .take(DEPTH)
        .collect();
    let root = syms.address_of("ret_from_fork").expect("ret_from_fork");
    // At each function's first instruction the return address is at the stack pointer.
    let mut words: Vec<u64> = funcs[1..].iter().map(|a| a + 1).collect();
    words.push(root + 1);
    let stack: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    // The same depth as frame records: {saved fp, return address}.
    let mut records = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let next = if i + 1 == words.len() {
            0
        } else {
            STACK + 16 * (i as u64 + 1)
        };
        records.extend_from_slice(&next.to_le_bytes());
        records.extend_from_slice(&w.to_le_bytes());
    }
    let read = |mem: &[u8]| {
        let mem = mem.to_vec();
        move |a: u64, out: &mut [u8]| {
            let Some(o) = a.checked_sub(STACK).map(|o| o as usize) else {
                return false;
            };
            match mem.get(o..o + out.len()) {
                Some(b) => {
                    out.copy_from_slice(b);
                    true
                }
                None => false,
            }
        }
    };
    let (mut by_orc, mut by_fp) = (read(&stack), read(&records));
    let mut out = [0u64; 64];
    let start = StartRegs {
        pc: funcs[0],
        sp: STACK,
        fp: 0,
        ra: None,
    };
    let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut by_orc, &mut out).unwrap();
    assert_eq!(w.frames, DEPTH, "{w:?}");
    let w = walk_across(
        STACK,
        STACK,
        PtrWidth::W8,
        64,
        Crossings::ALL,
        &mut by_fp,
        &mut out,
    );
    assert_eq!(w.frames, DEPTH, "{w:?}");
    let time = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..RUNS {
            f();
        }
        t.elapsed().as_nanos() as f64 / RUNS as f64
    };
    let orc_ns = time(&mut || {
        let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut by_orc, &mut out);
        std::hint::black_box(w);
    });
    let fp_ns = time(&mut || {
        let w = walk_across(
            STACK,
            STACK,
            PtrWidth::W8,
            64,
            Crossings::ALL,
            &mut by_fp,
            &mut out,
        );
        std::hint::black_box(w);
    });
    println!(
        "{DEPTH} frames: ORC {orc_ns:.0} ns a walk, frame pointers {fp_ns:.0} ns ({:.2}x)",
        orc_ns / fp_ns
    );
}
