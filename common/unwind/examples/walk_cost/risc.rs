//! The entry crossing on riscv64 and aarch64: the example kernels built without frame
//! pointers, whose timer stub `isr_timer` saves a trap frame (the interrupted pc, stack
//! pointer, s0/x29, ra/x30 and sstatus/SPSR) with neither a frame record nor CFI.
//!
//! Each stack is laid out as the tables and the stub say, not as a fixed shape: the trap
//! frame where the stub's layout at its call's return address puts each saved value
//! (`EntryStubs::risc_at`), with a kernel-mode status and the interrupted pc at a function's
//! first instruction (its caller's return address still in ra/x30, which the stub saved);
//! above it the interrupted stack, each caller's frame as its CFI row at its return address
//! says (the CFA the stack pointer plus N, the return address at the CFA plus k), real call
//! returns (the instruction after a `jal`/`jalr`/`c.jalr` or `bl`/`blr`). Against a walk of
//! the same stacks that crosses nothing: the sample at the same function's first
//! instruction, ra/x30 holding the same caller, one caller more, so that both walks give
//! `DEPTH` addresses of code, the sample's pc included (the crossing's marker is a frame
//! more), as the x86_64 pair does.

use std::sync::Arc;

use kern_profile_format::Arch;
use kern_profile_unwind::stubs::{Loc, Mode, RiscLayout};
use kern_profile_unwind::tables::{CfaBase, CfiRow, CfiTable, Rule};
use kern_profile_unwind::{walk_tables, Crossings, StartRegs, UnwindTables};
use object::{Object, ObjectSection, ObjectSymbol};

use super::{bare_kernel, pick, reader, Case, DEPTH, STACK};

/// A caller's frame no larger than this (bytes): the stacks stay small, as the other cases'.
const MAX_FRAME: i32 = 128;

/// The ELF's bytes at `[addr, addr + len)`, from the section that holds them.
fn code<'a>(file: &object::File<'a>, addr: u64, len: u64) -> Option<&'a [u8]> {
    file.sections().find_map(|s| {
        let o = addr.checked_sub(s.address())?;
        (o + len <= s.size()).then_some(())?;
        s.data().ok()?.get(o as usize..(o + len) as usize)
    })
}

/// The return addresses of the calls in `[start, end)`, decoded from `start` on.
fn call_returns(file: &object::File, arch: Arch, start: u64, end: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut a = start;
    while a < end {
        match arch {
            Arch::Aarch64 => {
                let Some(b) = code(file, a, 4) else { break };
                let w = u32::from_le_bytes(b.try_into().unwrap());
                // bl, blr
                if w & 0xfc00_0000 == 0x9400_0000 || w & 0xffff_fc1f == 0xd63f_0000 {
                    out.push(a + 4);
                }
                a += 4;
            }
            _ => {
                let Some(b) = code(file, a, 2) else { break };
                let h = u16::from_le_bytes(b.try_into().unwrap());
                if h & 3 != 3 {
                    // c.jalr rs1 (ra implied)
                    if h & 0xf07f == 0x9002 && (h >> 7) & 31 != 0 {
                        out.push(a + 2);
                    }
                    a += 2;
                    continue;
                }
                let Some(b) = code(file, a, 4) else { break };
                let w = u32::from_le_bytes(b.try_into().unwrap());
                // jal ra / jalr ra
                if matches!(w & 0x7f, 0x6f | 0x67) && (w >> 7) & 31 == 1 {
                    out.push(a + 4);
                }
                a += 4;
            }
        }
    }
    out
}

/// A caller's frame whose row lets the walk lay it out: the CFA the stack pointer plus
/// `N` (at most [`MAX_FRAME`]), the return address (and the frame pointer, where saved)
/// in the frame.
fn caller_row(cfi: &CfiTable, ret: u64) -> Option<CfiRow> {
    let r = cfi.find(ret - 1)?;
    let n = r.cfa_offset;
    let in_frame = |rule: Rule| matches!(rule, Rule::AtCfa(k) if -n <= k && k < 0 && k % 8 == 0);
    let ok = r.cfa_base == CfaBase::StackPointer
        && n > 0
        && n <= MAX_FRAME
        && n % 16 == 0
        && in_frame(r.ra)
        && (r.fp == Rule::Unchanged || in_frame(r.fp))
        && r.sp_saved.is_none()
        && !r.signal;
    ok.then_some(r)
}

/// Writes `v` at `at` in `mem` (at `STACK`).
fn put(mem: &mut [u8], at: u64, v: u64) {
    let o = (at - STACK) as usize;
    mem[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// Lays out the callers `rets` from `sp` up, each frame as its row says; the last one's
/// return address null (the walk's end). Returns where the frames end.
fn lay_callers(cfi: &CfiTable, mem: &mut [u8], mut sp: u64, rets: &[u64]) -> u64 {
    for (i, &r) in rets.iter().enumerate() {
        let row = caller_row(cfi, r).expect("a caller's row");
        let cfa = sp + row.cfa_offset as u64;
        let next = rets.get(i + 1).copied().unwrap_or(0);
        if let Rule::AtCfa(k) = row.ra {
            put(mem, cfa.wrapping_add_signed(k.into()), next);
        }
        if let Rule::AtCfa(k) = row.fp {
            put(mem, cfa.wrapping_add_signed(k.into()), 0);
        }
        sp = cfa;
    }
    sp
}

/// The saved status of an interrupt of kernel code: riscv64 `sstatus` with SPP (and SPIE)
/// set; aarch64 `SPSR_EL1` EL1h with DAIF masked.
fn kernel_status(arch: Arch) -> u64 {
    match arch {
        Arch::Aarch64 => 0x3c5,
        _ => 0x120,
    }
}

/// The table walk from `starts[j % n]`.
fn regs_walk<'a>(
    tables: Arc<UnwindTables>,
    starts: Vec<StartRegs>,
    mut read: impl FnMut(u64, &mut [u8]) -> bool + 'a,
) -> Box<dyn FnMut(usize) -> usize + 'a> {
    let mut out = [0u64; 64];
    Box::new(move |j: usize| {
        let start = starts[j % starts.len()];
        let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut read, &mut out);
        w.map_or(0, |w| w.frames)
    })
}

/// The crossing of `path`'s timer stub against a walk that crosses nothing, `n` stacks of
/// each; `names` the cases'.
pub fn risc_crossing_cases(
    path: &str,
    arch: Arch,
    names: [&'static str; 2],
    n: usize,
) -> [Case<'static>; 2] {
    let elf = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (tables, file, stub) = bare_kernel(path, &elf);
    assert_eq!(tables.arch, arch, "{path}: not a {arch:?} kernel");
    let cfi = tables.cfi.as_ref().expect("a CFI table");
    // The stub's first call return with a layout; the reading of an interrupt of the kernel.
    let (ret, layout) = call_returns(&file, arch, stub, stub + 0x100)
        .into_iter()
        .find_map(|a| {
            let l = tables.stubs.risc_at(a);
            let l = l.iter().find(|(_, l)| l.mode != Some(Mode::User))?;
            Some((a, l.1))
        })
        .expect("the stub's layout at its call return");
    println!("  isr_timer's call return {ret:#x}: {layout:?}");
    let RiscLayout {
        pc: Loc::Slot {
            off: pc_off,
            add: pc_add,
        },
        ra: Loc::Slot {
            off: ra_off,
            add: ra_add,
        },
        ..
    } = layout
    else {
        panic!("{path}: the stub's layout keeps no pc or ra in its trap frame")
    };
    // The trap frame's top: above its highest slot (the interrupted stack goes on there
    // where the stub saved its stack pointer).
    let slots = [layout.pc, layout.sp, layout.fp, layout.ra, layout.status];
    let top = slots
        .iter()
        .filter_map(|l| match *l {
            Loc::Slot { off, .. } => Some(off as u64 + 8),
            _ => None,
        })
        .max()
        .unwrap()
        .next_multiple_of(16);
    // Interrupted functions at their first instruction: the CFA is the stack pointer, the
    // return address still in ra/x30.
    let funcs: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| s.address())
        .filter(|&a| {
            cfi.find(a).is_some_and(|r| {
                r.cfa_base == CfaBase::StackPointer
                    && r.cfa_offset == 0
                    && r.ra == Rule::Unchanged
                    && r.sp_saved.is_none()
                    && !r.signal
            })
        })
        .collect();
    let mut rets: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .flat_map(|s| call_returns(&file, arch, s.address(), s.address() + s.size()))
        .filter(|&r| caller_row(cfi, r).is_some())
        .collect();
    rets.sort_unstable();
    rets.dedup();
    println!(
        "  {} functions interrupted at their first instruction, {} call returns with a frame \
         of at most {MAX_FRAME} bytes",
        funcs.len(),
        rets.len()
    );
    assert!(funcs.len() > DEPTH, "too few functions to interrupt");
    let stacks = pick(&rets, n);
    let interrupted: Vec<u64> = (0..n).map(|j| funcs[(j * 997) % funcs.len()]).collect();
    // Each stack in `stride` bytes: the largest, in cache lines, an odd number of them (the
    // stacks' words spread over the caches' sets rather than all in the same few).
    let size = |rs: &[u64]| -> u64 {
        rs.iter()
            .map(|&r| caller_row(cfi, r).unwrap().cfa_offset as u64)
            .sum()
    };
    let lines = stacks
        .iter()
        .map(|s| (top + size(&s[1..DEPTH - 1])).max(size(&s[1..])))
        .max()
        .unwrap()
        .div_ceil(64);
    let stride = 64 * (lines | 1);
    let (mut cross_mem, mut plain_mem) = (
        vec![0u8; n * stride as usize],
        vec![0u8; n * stride as usize],
    );
    let (mut cross_starts, mut plain_starts) = (Vec::new(), Vec::new());
    let value = |loc: Loc, v: u64, mem: &mut [u8], base: u64| {
        if let Loc::Slot { off, add } = loc {
            put(
                mem,
                base.wrapping_add_signed(off),
                v.wrapping_sub(add as u64),
            );
        }
    };
    for (j, s) in stacks.iter().enumerate() {
        let base = STACK + j as u64 * stride;
        let (ip, callers) = (interrupted[j], &s[1..]);
        // The trap frame at the stub's stack pointer: the interrupted pc, its return address
        // (ra/x30), stack pointer (right above the frame) and frame pointer, the status.
        let isp = match layout.sp {
            Loc::SpPlus(k) => base.wrapping_add_signed(k),
            _ => base + top,
        };
        let m = &mut cross_mem;
        put(
            m,
            base.wrapping_add_signed(pc_off),
            ip.wrapping_sub(pc_add as u64),
        );
        put(
            m,
            base.wrapping_add_signed(ra_off),
            callers[0].wrapping_sub(ra_add as u64),
        );
        value(layout.sp, isp, m, base);
        value(layout.fp, 0, m, base);
        value(layout.status, kernel_status(arch), m, base);
        lay_callers(cfi, m, isp, &callers[..DEPTH - 2]);
        cross_starts.push(StartRegs {
            pc: ret,
            sp: base,
            fp: 0,
            ra: None,
        });
        lay_callers(cfi, &mut plain_mem, base, callers);
        plain_starts.push(StartRegs {
            pc: ip,
            sp: base,
            fp: 0,
            ra: Some(callers[0]),
        });
    }
    println!("  {n} stacks {stride} bytes apart, the trap frame {top} bytes");
    let tables = Arc::new(tables);
    [
        Case {
            name: names[0],
            walk: regs_walk(tables.clone(), cross_starts, reader(cross_mem)),
            frames: vec![DEPTH],
        },
        Case {
            name: names[1],
            walk: regs_walk(tables, plain_starts, reader(plain_mem)),
            frames: vec![DEPTH - 1],
        },
    ]
}
