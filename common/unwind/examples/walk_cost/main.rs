//! The cost of a stack walk by unwind tables against a frame-pointer walk of the same depth,
//! over stacks in memory (no QEMU: the unwinders' own cost, the guest-memory reads a copy
//! from a buffer):
//! - ORC: Debian's amd64 6.1 kernel (385 Ki ORC entries), return addresses at functions'
//!   first instructions, ending at `ret_from_fork`; against frame records of the same depth.
//! - CFI: an x86_64 ELF with `.eh_frame` built with frame pointers (the x86_64 example
//!   kernel), return addresses where the CFA is the frame pointer + 16: one stack of frame
//!   records that both walks follow.
//! - ORC, recorded stacks (with `--recording`): the kernel stacks of a raw recording of the
//!   same kernel (`kern-profile record`), rebuilt for the ORC walk ([`recorded`]), in the
//!   recording's sample order; against frame records holding the same return addresses.
//!
//! - A kernel entry crossed (issue 38): the x86_64 example kernel without frame pointers
//!   (`target/examples/nofp/kernel64.elf`), whose timer stub has neither a frame record nor
//!   CFI: from the stub's call return across the CPU's frame (found from the stub's
//!   instructions and checked) into the interrupted function, then callers by CFI; against a
//!   CFI walk of the same depth that crosses nothing.
//! - The same on riscv64 and aarch64 (`--riscv64 ELF`, `--aarch64 ELF`; each row skipped, and
//!   said so, when its kernel is absent): the example kernels without frame pointers, whose
//!   timer stub saves a trap frame with neither a frame record nor CFI: from the stub's call
//!   return across the trap frame (found from the stub's instructions and checked) into the
//!   interrupted function, then callers by CFI, each frame laid out as its row says
//!   ([`risc`]); against a CFI walk of the same stacks that crosses nothing.
//!
//! Each synthetic walk goes through one of `--stacks` different stacks in turn (a sample's
//! stack is not the last one's). Rounds time the walks in a rotated order, each in batches
//! (the round's figure is the median batch's ns a walk: a batch another process interrupted
//! does not count); each round goes on where the last left off. A last `json:` line holds
//! every round's figures (scripts/bench/unwind.py).
//!
//! usage: cargo run --release -p kern-profile-unwind --example walk_cost --
//!        [--rounds N] [--walks N] [--stacks N] [--recording RAW] [--riscv64 ELF]
//!        [--aarch64 ELF] [VMLINUZ [CFI_ELF [BARE_ELF]]]
//! (defaults: 31 rounds, 10000 walks of each kind a round, 64 stacks, no recording,
//! target/examples/nofp/kernel-riscv64.elf and kernel-aarch64.elf (rows skipped where they
//! are absent), target/linux/x86_64/vmlinuz, target/examples/kernel64.elf,
//! target/examples/nofp/kernel64.elf)

use std::sync::Arc;
use std::time::Instant;

use kern_profile_format::Arch;
use kern_profile_linux_image::{open, KernelImage, Options};
use kern_profile_unwind::stubs::FrameAt;
use kern_profile_unwind::tables::{orc::reg, CfaBase, OrcKind, Rule};
use kern_profile_unwind::{
    walk_across, walk_tables, Crossings, Limits, PtrWidth, StartRegs, UnwindTables, Walk,
};
use object::{Object, ObjectSection, ObjectSymbol};

mod recorded;
mod risc;
use recorded::recorded_cases;
use risc::risc_crossing_cases;

/// Frames per walk.
const DEPTH: usize = 12;
/// Batches a round's walks of one kind are timed in.
const BATCHES: usize = 25;
/// Where the stacks lie, each in 256 bytes of its own.
const STACK: u64 = 0xffff_c900_0001_0000;
const STACK_BYTES: u64 = 256;

/// The guest's memory: `mem` at `STACK`.
fn reader(mem: Vec<u8>) -> impl FnMut(u64, &mut [u8]) -> bool {
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
}

/// Frame records `{saved fp, return address}` for each stack's return addresses, the last
/// with a null saved fp.
fn frame_records(stacks: &[Vec<u64>]) -> Vec<u8> {
    let mut mem = vec![0u8; stacks.len() * STACK_BYTES as usize];
    for (j, words) in stacks.iter().enumerate() {
        let base = STACK + j as u64 * STACK_BYTES;
        for (i, w) in words.iter().enumerate() {
            let next = match i + 1 == words.len() {
                true => 0,
                false => base + 16 * (i as u64 + 1),
            };
            let at = (base - STACK) as usize + 16 * i;
            mem[at..at + 8].copy_from_slice(&next.to_le_bytes());
            mem[at + 8..at + 16].copy_from_slice(&w.to_le_bytes());
        }
    }
    mem
}

/// `n` stacks of `DEPTH` addresses from `candidates`, spread over them.
fn pick(candidates: &[u64], n: usize) -> Vec<Vec<u64>> {
    assert!(candidates.len() > DEPTH * 2, "too few candidate addresses");
    (0..n)
        .map(|j| {
            (0..DEPTH)
                .map(|k| candidates[((j * DEPTH + k) * 997) % candidates.len()])
                .collect()
        })
        .collect()
}

/// A set of walks to time: walk `j` of them goes over stack `j % n`, and returns
/// `frames[j % frames.len()]` frames.
struct Case<'a> {
    name: &'static str,
    walk: Box<dyn FnMut(usize) -> usize + 'a>,
    frames: Vec<usize>,
}

/// Where the frame-pointer walks of `n` stacks `STACK_BYTES` apart start.
fn spaced(n: usize) -> Vec<u64> {
    (0..n as u64).map(|j| STACK + j * STACK_BYTES).collect()
}

fn orc_cases(path: &str, image: &KernelImage, n: usize) -> [Case<'static>; 2] {
    let syms = image.kallsyms().expect("its kallsyms");
    let t1 = Instant::now();
    let tables = UnwindTables::from_elf(&image.bytes, Limits::default()).expect("its tables");
    println!(
        "{path}: {} read in {:.0} ms",
        tables.summary(),
        t1.elapsed().as_secs_f64() * 1e3
    );
    let orc = tables.orc.as_ref().expect("an ORC table");
    // Functions whose first instruction's rule is a plain call frame.
    let funcs: Vec<u64> = syms
        .symbols
        .iter()
        .filter(|s| s.is_text())
        .map(|s| s.address)
        .filter(|&a| {
            orc.find(a)
                .is_some_and(|e| e.kind == OrcKind::Call && e.sp_reg == reg::SP && e.sp_offset == 8)
        })
        .collect();
    let root = syms.address_of("ret_from_fork").expect("ret_from_fork");
    // Each stack: the sample in its first function, each caller's return address right at
    // the callee's stack pointer (at a function's first instruction), a thread's end last.
    let stacks = pick(&funcs, n);
    let starts: Vec<u64> = stacks.iter().map(|s| s[0]).collect();
    let returns: Vec<Vec<u64>> = stacks
        .iter()
        .map(|s| s[1..].iter().map(|a| a + 1).chain([root + 1]).collect())
        .collect();
    let mut mem = vec![0u8; n * STACK_BYTES as usize];
    for (j, words) in returns.iter().enumerate() {
        let at = j * STACK_BYTES as usize;
        for (i, w) in words.iter().enumerate() {
            mem[at + 8 * i..at + 8 * i + 8].copy_from_slice(&w.to_le_bytes());
        }
    }
    [
        Case {
            name: "orc",
            walk: table_walk(Arc::new(tables), starts, n, reader(mem)),
            frames: vec![DEPTH],
        },
        Case {
            name: "fp_orc",
            walk: fp_walk(spaced(n), reader(frame_records(&returns))),
            frames: vec![DEPTH],
        },
    ]
}

/// The table walk of stack `j % n` (`STACK_BYTES` apart, no frame pointer) from the pc
/// `pcs[j % pcs.len()]`.
fn table_walk<'a>(
    tables: Arc<UnwindTables>,
    pcs: Vec<u64>,
    n: usize,
    mut read: impl FnMut(u64, &mut [u8]) -> bool + 'a,
) -> Box<dyn FnMut(usize) -> usize + 'a> {
    let mut out = [0u64; 64];
    Box::new(move |j: usize| {
        let start = StartRegs {
            pc: pcs[j % pcs.len()],
            sp: STACK + (j % n) as u64 * STACK_BYTES,
            fp: 0,
            ra: None,
        };
        let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut read, &mut out);
        w.map_or(0, |w| w.frames)
    })
}

/// The frame-pointer walk from `fps[j % fps.len()]`, as the plugin does it on x86.
fn fp_walk<'a>(
    fps: Vec<u64>,
    mut read: impl FnMut(u64, &mut [u8]) -> bool + 'a,
) -> Box<dyn FnMut(usize) -> usize + 'a> {
    let mut out = [0u64; 64];
    Box::new(move |j: usize| walk_from_fp(fps[j % fps.len()], &mut read, &mut out).frames)
}

/// The plugin's x86_64 frame-pointer walk from `fp` (`rbp`, `rsp` at it), 64 frames at most.
fn walk_from_fp(fp: u64, read: impl FnMut(u64, &mut [u8]) -> bool, out: &mut [u64]) -> Walk {
    walk_across(fp, fp, PtrWidth::W8, 64, Crossings::ALL, read, out)
}

fn cfi_cases(path: &str, n: usize) -> [Case<'static>; 2] {
    let elf = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let tables = UnwindTables::from_elf(&elf, Limits::default()).expect("its tables");
    println!("{path}: {}", tables.summary());
    let cfi = tables.cfi.as_ref().expect("a CFI table");
    let file = object::File::parse(&*elf).expect("an ELF");
    let text = file.section_by_name(".text").expect("a .text");
    // Addresses in function bodies, past the prologue: the caller's frame is the frame record
    // at the frame pointer.
    let record = |a: &u64| {
        cfi.find(*a).is_some_and(|r| {
            r.cfa_base == CfaBase::FramePointer
                && r.cfa_offset == 16
                && r.ra == Rule::AtCfa(-8)
                && r.fp == Rule::AtCfa(-16)
        })
    };
    let inside: Vec<u64> = (text.address()..text.address() + text.size())
        .filter(record)
        .collect();
    let stacks = pick(&inside, n);
    let starts: Vec<u64> = stacks.iter().map(|s| s[0]).collect();
    let returns: Vec<Vec<u64>> = stacks
        .iter()
        .map(|s| s[1..].iter().map(|a| a + 1).chain([s[0] + 1]).collect())
        .collect();
    let mem = frame_records(&returns);
    let (mut by_cfi, by_fp) = (reader(mem.clone()), reader(mem));
    let mut out = [0u64; 64];
    let walk = move |j: usize| {
        let fp = STACK + (j % n) as u64 * STACK_BYTES;
        let start = StartRegs {
            pc: starts[j % n],
            sp: fp,
            fp,
            ra: None,
        };
        let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut by_cfi, &mut out);
        w.map_or(0, |w| w.frames)
    };
    [
        Case {
            name: "cfi",
            walk: Box::new(walk),
            frames: vec![DEPTH],
        },
        Case {
            name: "fp_cfi",
            walk: fp_walk(spaced(n), by_fp),
            frames: vec![DEPTH],
        },
    ]
}

/// The tables of the bare-stub kernel ELF `elf` (read from `path`), said on stdout, its
/// symbols, and the address of its timer stub `isr_timer`.
fn bare_kernel<'a>(path: &str, elf: &'a [u8]) -> (UnwindTables, object::File<'a>, u64) {
    let tables = UnwindTables::from_elf(elf, Limits::default()).expect("its tables");
    println!("{path}: {}", tables.summary());
    let file = object::File::parse(elf).expect("an ELF");
    let stub = file
        .symbols()
        .find(|s| s.name() == Ok("isr_timer"))
        .expect("the timer stub isr_timer (a kernel built with bare_entries)")
        .address();
    (tables, file, stub)
}

/// The entry crossing against a walk that crosses nothing, both `DEPTH` frames of CFI walks
/// over return addresses at functions' first instructions (the caller's return address at
/// the stack pointer): the crossing starts at the timer stub's call return, the CPU's frame
/// 72 bytes up, the interrupted function at its first instruction and `DEPTH - 2` callers
/// (the entry's marker and the interrupted pc are the other two frames).
fn crossing_cases(path: &str, n: usize) -> [Case<'static>; 2] {
    let elf = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (tables, file, stub) = bare_kernel(path, &elf);
    let cfi = tables.cfi.as_ref().expect("a CFI table");
    // The stub's call return: the CPU's frame 72 bytes (nine pushes) above the stack pointer.
    let ret = (stub..stub + 64)
        .find(|&a| {
            tables
                .stubs
                .at(a)
                .is_some_and(|l| l.frame == FrameAt::Sp(72))
        })
        .expect("the stub's layout at its call return");
    let funcs: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .map(|s| s.address())
        .filter(|&a| {
            cfi.find(a).is_some_and(|r| {
                r.cfa_base == CfaBase::StackPointer && r.cfa_offset == 8 && r.ra == Rule::AtCfa(-8)
            })
        })
        .collect();
    let stacks = pick(&funcs, n);
    let (mut cross_mem, mut plain_mem) = (
        vec![0u8; n * STACK_BYTES as usize],
        vec![0u8; n * STACK_BYTES as usize],
    );
    let put = |mem: &mut Vec<u8>, at: u64, words: &[u64]| {
        for (i, w) in words.iter().enumerate() {
            let o = (at - STACK) as usize + 8 * i;
            mem[o..o + 8].copy_from_slice(&w.to_le_bytes());
        }
    };
    for (j, s) in stacks.iter().enumerate() {
        let base = STACK + j as u64 * STACK_BYTES;
        let (e, rets): (u64, Vec<u64>) = (base + 72, s[1..].iter().map(|a| a + 1).collect());
        // The CPU's frame (rip, cs, rflags, rsp, ss), the interrupted stack above it, a null
        // return address ending it.
        put(&mut cross_mem, e, &[s[0], 0x08, 0x202, e + 40, 0]);
        put(&mut cross_mem, e + 40, &rets[..DEPTH - 2]);
        put(&mut plain_mem, base, &rets);
    }
    let starts: Vec<u64> = stacks.iter().map(|s| s[0]).collect();
    let tables = Arc::new(tables);
    [
        Case {
            name: "crossing",
            walk: table_walk(tables.clone(), vec![ret], n, reader(cross_mem)),
            frames: vec![DEPTH],
        },
        Case {
            name: "no_crossing",
            walk: table_walk(tables, starts, n, reader(plain_mem)),
            frames: vec![DEPTH - 1],
        },
    ]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut walks, mut stacks, mut paths) = (31, 10_000, 64, Vec::new());
    let mut recording = None;
    let mut riscv64 = "target/examples/nofp/kernel-riscv64.elf".to_string();
    let mut aarch64 = "target/examples/nofp/kernel-aarch64.elf".to_string();
    while let Some(a) = args.next() {
        let mut number = || -> usize {
            let v = args.next().and_then(|v| v.parse().ok());
            v.filter(|&n| n > 0).expect("a positive number")
        };
        match a.as_str() {
            "--rounds" => rounds = number(),
            "--walks" => walks = number(),
            "--stacks" => stacks = number(),
            "--recording" => recording = Some(args.next().expect("a raw recording")),
            "--riscv64" => riscv64 = args.next().expect("a riscv64 kernel ELF"),
            "--aarch64" => aarch64 = args.next().expect("an aarch64 kernel ELF"),
            _ => paths.push(a),
        }
    }
    let vmlinuz = paths.first().map_or("target/linux/x86_64/vmlinuz", |s| s);
    let elf = paths.get(1).map_or("target/examples/kernel64.elf", |s| s);
    let bare = paths
        .get(2)
        .map_or("target/examples/nofp/kernel64.elf", |s| s);
    let t0 = Instant::now();
    let image = open(vmlinuz.as_ref(), &Options::default()).expect("the kernel image");
    println!(
        "{vmlinuz}: unpacked in {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let [orc, fp_orc] = orc_cases(vmlinuz, &image, stacks);
    let [cfi, fp_cfi] = cfi_cases(elf, stacks);
    let [crossing, no_crossing] = crossing_cases(bare, stacks);
    let mut cases = vec![orc, fp_orc, cfi, fp_cfi, crossing, no_crossing];
    let mut pairs = vec![("ORC", 0, 1), ("CFI", 2, 3), ("entry crossed", 4, 5)];
    let mut extra = String::new();
    // The riscv64 and aarch64 crossings, where their kernels are.
    let mut skipped = Vec::new();
    for (path, arch, label, names) in [
        (
            &riscv64,
            Arch::Riscv64,
            "entry crossed, riscv64",
            ["crossing_riscv64", "no_crossing_riscv64"],
        ),
        (
            &aarch64,
            Arch::Aarch64,
            "entry crossed, aarch64",
            ["crossing_aarch64", "no_crossing_aarch64"],
        ),
    ] {
        if !std::path::Path::new(path).is_file() {
            println!("{label}: skipped, no {path}");
            skipped.push(format!("\"{}\"", names[0]));
            continue;
        }
        let [crossing, no_crossing] = risc_crossing_cases(path, arch, names, stacks);
        pairs.push((label, cases.len(), cases.len() + 1));
        cases.extend([crossing, no_crossing]);
    }
    extra += &format!(", \"skipped\": [{}]", skipped.join(", "));
    if let Some(path) = &recording {
        let ([orc_rec, fp_rec], c) = recorded_cases(&image.bytes, path);
        c.print(path);
        assert_eq!(
            c.mismatches, 0,
            "walks that do not return the recorded stacks"
        );
        extra += &format!(", \"recorded\": {}", c.json());
        pairs.push(("ORC, recorded", cases.len(), cases.len() + 1));
        cases.extend([orc_rec, fp_rec]);
    }
    // Every walk returns the frames it should.
    for c in cases.iter_mut() {
        for j in 0..c.frames.len().max(stacks) {
            let (n, want) = ((c.walk)(j), c.frames[j % c.frames.len()]);
            assert_eq!(n, want, "{}: walk {j}: {n} frames", c.name);
        }
    }
    println!("{DEPTH} frames a walk, {stacks} stacks in turn, {walks} walks a round (ns a walk):");
    let mut ns = vec![Vec::new(); cases.len()];
    for r in 0..rounds {
        let mut line = Vec::new();
        for k in 0..cases.len() {
            let i = (r + k) % cases.len();
            let c = &mut cases[i];
            // In batches of a fraction of a millisecond, the median batch: a batch during
            // which another process had the CPU is an outlier, not a slow round.
            let batch = walks.div_ceil(BATCHES);
            let mut batches = Vec::with_capacity(BATCHES);
            // Each round goes on where the last left off (the recording's samples in turn).
            let mut j = r * walks;
            while j < (r + 1) * walks {
                let t = Instant::now();
                let (mut frames, mut want) = (0, 0);
                for _ in 0..batch {
                    frames += (c.walk)(std::hint::black_box(j));
                    want += c.frames[j % c.frames.len()];
                    j += 1;
                }
                batches.push(t.elapsed().as_nanos() as f64 / batch as f64);
                assert_eq!(frames, want);
            }
            batches.sort_by(f64::total_cmp);
            let per = batches[batches.len() / 2];
            ns[i].push(per);
            line.push(format!("{} {per:.0}", c.name));
        }
        println!("round {}: {}", r + 1, line.join(", "));
    }
    let ratio =
        |a: usize, b: usize| -> Vec<f64> { ns[a].iter().zip(&ns[b]).map(|(x, y)| x / y).collect() };
    let spread = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        format!("{:.2}/{:.2}/{:.2}", s[0], s[s.len() / 2], s[s.len() - 1])
    };
    let min = |i: usize| ns[i].iter().copied().fold(f64::INFINITY, f64::min);
    for (name, a, b) in pairs {
        let against = if name.starts_with("entry crossed") {
            "none crossed"
        } else {
            "FP"
        };
        println!(
            "{name} / {against}, by round min/median/max: {}x; fastest rounds: {:.0} / {:.0} ns = {:.2}x",
            spread(&ratio(a, b)),
            min(a),
            min(b),
            min(a) / min(b)
        );
    }
    let figures: Vec<String> = cases
        .iter()
        .zip(&ns)
        .map(|(c, v)| {
            let v: Vec<String> = v.iter().map(|x| format!("{x:.1}")).collect();
            format!("\"{}\": [{}]", c.name, v.join(", "))
        })
        .collect();
    println!(
        "json: {{\"depth\": {DEPTH}, \"stacks\": {stacks}, \"walks\": {walks}{extra}, {}}}",
        figures.join(", ")
    );
}
