//! The recorded-stacks case: the kernel stacks of a raw recording of the same kernel, rebuilt
//! in memory so that the ORC walk returns the recorded return addresses, walked in the
//! recording's sample order (its repetition, its working set of addresses).
//!
//! A sample's stack is its pc and its kernel return addresses up to the first boundary
//! marker or user address. Each frame is placed as its ORC entry says, which call frames
//! can be (by the stack pointer, or by the frame pointer, chosen where a frame first uses
//! it; the caller's frame pointer kept or saved in the frame): a stack is cut at its first
//! frame that is not one (most often the entry code's at a recorded stack's end, whose
//! `pt_regs` was not recorded), the walk ended one step earlier by a null return address.
//! Every built stack is walked once and must return exactly its return addresses. The
//! frame-pointer walk gets frame records holding the same return addresses, each where its
//! frame's return address lies (a frame of 8 bytes gets 16), so both walks touch about as
//! much memory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufReader;

use kern_profile_format::{RawReader, Record};
use kern_profile_unwind::tables::{orc::reg, OrcEntry, OrcKind, OrcTable};
use kern_profile_unwind::{walk_tables, Crossings, Limits, StartRegs, UnwindTables};

use super::{fp_walk, reader, walk_from_fp, Case, STACK};

/// x86_64 kernel addresses start here; below are user addresses and boundary markers.
const KERNEL: u64 = 0xffff_8000_0000_0000;
/// The walks' depth cap is 64: stacks are cut below it.
const MAX_FRAMES: usize = 60;

/// What the recording held and what was kept of it.
#[derive(Default)]
pub struct Counts {
    pub samples: usize,
    pub kernel: usize,
    pub walked: usize,
    /// Kernel samples of which no frame could be placed (not walked).
    pub unplaced: usize,
    /// Kernel return addresses of the walked samples, as recorded and as placed.
    pub recorded_frames: usize,
    pub kept_frames: usize,
    pub distinct: usize,
    /// Distinct addresses the placed stacks' walks look up (pcs and return addresses).
    pub addresses: usize,
    /// The two walks' stack memory.
    pub bytes: (usize, usize),
    pub mismatches: usize,
    /// Kernel samples by why their stack was cut (unplaced ones included).
    pub cuts: BTreeMap<&'static str, usize>,
}

impl Counts {
    pub fn print(&self, path: &str) {
        let per = |n: usize| n as f64 / self.walked as f64;
        println!(
            "{path}: {} samples, {} in the kernel, {} walked ({} not: no frame placed), {} \
             distinct stacks of {} distinct addresses ({} + {} KiB of stack memory); kernel frames a walked sample: \
             {:.2} recorded, {:.2} placed ({:.1}%); {} stacks mismatched",
            self.samples,
            self.kernel,
            self.walked,
            self.unplaced,
            self.distinct,
            self.addresses,
            self.bytes.0 >> 10,
            self.bytes.1 >> 10,
            per(self.recorded_frames),
            per(self.kept_frames),
            100.0 * self.kept_frames as f64 / self.recorded_frames.max(1) as f64,
            self.mismatches
        );
        let cuts: Vec<String> = self.cuts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        println!(
            "kernel samples by where their stack was cut: {}",
            cuts.join(", ")
        );
    }

    /// For walk_cost's `json:` line.
    pub fn json(&self) -> String {
        format!(
            "{{\"samples\": {}, \"kernel\": {}, \"walked\": {}, \"distinct\": {}, \
             \"addresses\": {}, \"recorded_frames\": {}, \"kept_frames\": {}}}",
            self.samples,
            self.kernel,
            self.walked,
            self.distinct,
            self.addresses,
            self.recorded_frames,
            self.kept_frames
        )
    }
}

/// A call frame by the stack or frame pointer, the caller's frame pointer unchanged or saved
/// on the stack (`ORC_REG_PREV_SP`, or by the frame pointer).
fn plain(e: &OrcEntry) -> bool {
    e.kind == OrcKind::Call
        && matches!(e.sp_reg, reg::SP | reg::BP)
        && e.sp_offset >= 8
        && e.sp_offset % 8 == 0
        && matches!(e.bp_reg, reg::UNDEFINED | reg::PREV_SP | reg::BP)
}

/// Writes `v` at offset `at` of `mem`, growing it.
fn put(mem: &mut Vec<u8>, at: u64, v: u64) {
    let at = at as usize;
    if mem.len() < at + 8 {
        mem.resize(at + 8, 0);
    }
    mem[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// A stack placed for the ORC walk.
struct Placed {
    /// The return addresses the walk returns: the recorded ones, cut.
    returns: Vec<u64>,
    /// Its memory from the stack pointer up.
    mem: Vec<u8>,
    /// Where each frame ends (its return address lies just below).
    ends: Vec<u64>,
    /// Why it was cut, if it was.
    cut: Option<&'static str>,
    /// The frame pointer the walk starts with.
    start_fp: u64,
}

/// Why a frame with entry `e` cannot be placed.
fn unplaceable(e: Option<OrcEntry>) -> &'static str {
    match e {
        None => "no ORC entry",
        Some(e) => match e.kind {
            OrcKind::Regs | OrcKind::RegsPartial => "entry code (REGS)",
            OrcKind::Undefined => "undefined entry",
            _ if e.sp_reg == reg::SP_INDIRECT => "stack switch (SP_INDIRECT)",
            _ if e.sp_reg == reg::BP => "stack pointer by BP",
            _ if e.sp_reg != reg::SP => "stack pointer by another register",
            _ => "odd offsets",
        },
    }
}

/// Where the walk's frame pointer comes from, at the frame being placed: chosen when a
/// frame first uses it, then fixed.
#[derive(Clone, Copy)]
enum Fp {
    /// The start registers'.
    Start,
    /// A word saved at this offset of the stack.
    Saved(u64),
    /// This offset of the stack.
    Fixed(u64),
}

/// Stack memory at `base` from which the ORC walk starting at `pc` returns `recorded`'s
/// first frames, as many as can be placed; why not, when not even the first can be.
fn place(orc: &OrcTable, base: u64, pc: u64, recorded: &[u64]) -> Result<Placed, &'static str> {
    let (mut mem, mut ends) = (Vec::new(), Vec::new());
    let (mut sp, mut addr, mut exact) = (0u64, pc, true);
    let (mut fp, mut start_fp) = (Fp::Start, 0);
    // The frame placing stopped at, and whether the walk ends there by itself (at the
    // stack's end, or with a null return address in its caller's slot).
    let (cut, ends_there) = loop {
        let probe = if exact { addr } else { addr - 1 };
        let e = orc.find(probe);
        if e.is_some_and(|e| e.kind == OrcKind::EndOfStack) {
            break (None, true);
        }
        let Some(e) = e.filter(plain) else {
            break (Some(unplaceable(e)), false);
        };
        // The frame pointer, where this frame uses it: at the bottom of its frame (no
        // locals below it) unless an inner frame chose it already.
        let mut at_fp = || -> Option<u64> {
            match fp {
                Fp::Fixed(off) => return (off >= sp).then_some(off),
                Fp::Start => start_fp = base + sp,
                Fp::Saved(slot) => put(&mut mem, slot, base + sp),
            }
            fp = Fp::Fixed(sp);
            Some(sp)
        };
        let next = match e.sp_reg {
            reg::SP => Some(sp),
            _ => at_fp(),
        }
        .map(|b| b + e.sp_offset as u64)
        .filter(|&n| n > sp);
        let Some(next) = next else {
            break (Some("frame pointer below the stack pointer"), false);
        };
        let slot = next - 8;
        // Where the caller's frame pointer is saved, within this frame below its return
        // address.
        let saved = match e.bp_reg {
            reg::PREV_SP => Some(next),
            reg::BP => at_fp(),
            _ => None,
        }
        .map(|b| b.checked_add_signed(e.bp_offset as i64));
        if ends.len() == recorded.len() {
            put(&mut mem, slot, 0);
            break (None, true);
        }
        match saved {
            None => {}
            Some(Some(at)) if at >= sp && at + 8 <= slot && at % 8 == 0 => {
                // A placeholder until a frame uses it.
                put(&mut mem, at, base + at);
                fp = Fp::Saved(at);
            }
            Some(_) => break (Some("saved frame pointer outside the frame"), false),
        }
        put(&mut mem, slot, recorded[ends.len()]);
        ends.push(next);
        (sp, addr, exact) = (next, recorded[ends.len() - 1], e.signal);
    };
    if !ends_there {
        // The walk cannot end at this frame's step: end it at its callee's, with a null
        // return address instead of this frame's.
        if let Some(end) = ends.pop() {
            put(&mut mem, end - 8, 0);
        }
    }
    if ends.is_empty() {
        return Err(match (recorded.is_empty(), cut) {
            (true, _) => "no kernel return address recorded",
            (false, Some(why)) => why,
            (false, None) => "end of stack at the pc",
        });
    }
    Ok(Placed {
        returns: recorded[..ends.len()].to_vec(),
        mem,
        ends,
        cut,
        start_fp,
    })
}

/// Frame records for `returns`, record `i` where the ORC stack holds return address `i`
/// (`ends[i]`: where that frame ends), at least 16 bytes apart, the first at `base`, the
/// last with a null saved fp.
fn records(base: u64, returns: &[u64], ends: &[u64]) -> Vec<u8> {
    let mut at = Vec::with_capacity(returns.len());
    for (i, &end) in ends.iter().enumerate() {
        let lowest = match i {
            0 => 0,
            _ => at[i - 1] + 16,
        };
        at.push(end.saturating_sub(16).max(lowest));
    }
    // The walk starts at the first record.
    let first = at[0];
    at.iter_mut().for_each(|a| *a -= first);
    let mut mem = Vec::new();
    for (i, &ret) in returns.iter().enumerate() {
        let next = at.get(i + 1).map_or(0, |n| base + n);
        put(&mut mem, at[i], next);
        put(&mut mem, at[i] + 8, ret);
    }
    mem
}

/// Pads `mem` to a cache line: each stack on lines of its own.
fn pad(mem: &mut Vec<u8>) {
    mem.resize(mem.len().next_multiple_of(64), 0);
}

/// The two walks over the recording's kernel samples, in its order, `orc_rec` and `fp_rec`,
/// each with the frames its walks return.
pub fn recorded_cases(image: &[u8], path: &str) -> ([Case<'static>; 2], Counts) {
    let tables = UnwindTables::from_elf(image, Limits::default()).expect("its tables");
    let orc = tables.orc.as_ref().expect("an ORC table");
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut raw = RawReader::new(BufReader::new(file)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut counts = Counts::default();
    let mut ids: HashMap<Vec<u64>, Result<usize, &'static str>> = HashMap::new();
    let mut cuts = Vec::new();
    // Each distinct stack's start (pc, stack pointer and frame pointer for the ORC walk,
    // frame pointer for the frame-pointer walk) and return addresses.
    let mut starts: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut returns: Vec<Vec<u64>> = Vec::new();
    let (mut orc_mem, mut fp_mem) = (Vec::new(), Vec::new());
    let mut order = Vec::new();
    while let Some(rec) = raw.next_record().unwrap_or_else(|e| panic!("{path}: {e}")) {
        let Record::Sample(s) = rec else { continue };
        counts.samples += 1;
        if s.user() || s.pc < KERNEL {
            continue;
        }
        counts.kernel += 1;
        let key: Vec<u64> = [s.pc]
            .into_iter()
            .chain(s.frames().take_while(|&a| a >= KERNEL).take(MAX_FRAMES))
            .collect();
        let id = *ids.entry(key).or_insert_with_key(|key| {
            let (sp, fp) = (STACK + orc_mem.len() as u64, STACK + fp_mem.len() as u64);
            let p = match place(orc, sp, key[0], &key[1..]) {
                Ok(p) => p,
                Err(why) => return Err(why),
            };
            orc_mem.extend_from_slice(&p.mem);
            pad(&mut orc_mem);
            fp_mem.extend_from_slice(&records(fp, &p.returns, &p.ends));
            pad(&mut fp_mem);
            starts.push((key[0], sp, p.start_fp, fp));
            returns.push(p.returns);
            cuts.push(p.cut);
            Ok(starts.len() - 1)
        });
        let id = match id {
            Ok(id) => id,
            Err(why) => {
                counts.unplaced += 1;
                *counts.cuts.entry(why).or_default() += 1;
                continue;
            }
        };
        if let Some(why) = cuts[id] {
            *counts.cuts.entry(why).or_default() += 1;
        }
        counts.recorded_frames += s.frames().take_while(|&a| a >= KERNEL).count();
        counts.kept_frames += returns[id].len();
        order.push(id);
    }
    assert!(!order.is_empty(), "{path}: no kernel stack to walk");
    counts.distinct = starts.len();
    let pcs = starts.iter().map(|s| s.0);
    counts.addresses = pcs
        .chain(returns.iter().flatten().copied())
        .collect::<HashSet<u64>>()
        .len();
    counts.walked = order.len();
    counts.bytes = (orc_mem.len(), fp_mem.len());
    // Every stack's walks return its recorded return addresses, and nothing more.
    let (mut by_orc, mut by_fp) = (reader(orc_mem), reader(fp_mem));
    let mut out = [0u64; 64];
    for (r, &(pc, sp, orc_fp, fp)) in returns.iter().zip(&starts) {
        let start = StartRegs {
            pc,
            sp,
            fp: orc_fp,
            ra: None,
        };
        let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut by_orc, &mut out);
        let orc_ok = w.is_some_and(|w| out[..w.frames] == r[..]);
        if !orc_ok && counts.mismatches < 5 {
            eprintln!(
                "orc {pc:x} want {r:x?} got {:x?} {:?}",
                w.map(|w| &out[..w.frames]),
                w
            );
        }
        let w = walk_from_fp(fp, &mut by_fp, &mut out);
        if out[..w.frames] != r[..] && counts.mismatches < 5 {
            eprintln!("fp want {r:x?} got {:x?} {:?}", &out[..w.frames], w);
        }
        if !orc_ok || out[..w.frames] != r[..] {
            counts.mismatches += 1;
        }
    }
    let frames: Vec<usize> = order.iter().map(|&id| returns[id].len()).collect();
    let fps: Vec<u64> = order.iter().map(|&id| starts[id].3).collect();
    let orc_starts: Vec<(u64, u64, u64)> = order
        .iter()
        .map(|&id| (starts[id].0, starts[id].1, starts[id].2))
        .collect();
    let orc_walk = move |j: usize| {
        let (pc, sp, fp) = orc_starts[j % orc_starts.len()];
        let start = StartRegs {
            pc,
            sp,
            fp,
            ra: None,
        };
        let w = walk_tables(&tables, start, 64, Crossings::ALL, &mut by_orc, &mut out);
        w.map_or(0, |w| w.frames)
    };
    let cases = [
        Case {
            name: "orc_rec",
            walk: Box::new(orc_walk),
            frames: frames.clone(),
        },
        Case {
            name: "fp_rec",
            walk: fp_walk(fps, by_fp),
            frames,
        },
    ];
    (cases, counts)
}
