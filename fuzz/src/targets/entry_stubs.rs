//! Entry stubs read from their instructions (`EntryStubs::read`) over an input taken as
//! code (its first byte picks i386, x86_64, riscv64 or aarch64 and where stubs start; the
//! code is 2 KiB-aligned, so an aarch64 input is also read as a vector table), then table
//! walks from
//! pcs in that code over the input as the stack: whatever the code and the stack hold, the
//! reading stays within its bounds and a walk within its depth, and a crossing comes only
//! from a frame the CPU could have pushed; a walk from a sample reads each trap register
//! at most once.

use std::hint::black_box;

use kern_profile_format::Arch;
use kern_profile_unwind::stubs::EntryStubs;
use kern_profile_unwind::stubs::SysReg;
use kern_profile_unwind::tables::TextRanges;
use kern_profile_unwind::{walk_tables, walk_tables_at_sample, Crossings, UnwindTables};

use super::unwind_cfi::{fake_memory, starts};

/// Where the input is loaded as code.
const CODE: u64 = 0xffff_ffff_8100_0000;

/// One input through the target.
pub fn run(data: &[u8]) {
    crate::bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let Some((&pick, code)) = data.split_first() else {
        return;
    };
    let arch = match pick & 3 {
        0 => Arch::I386,
        1 => Arch::X86_64,
        2 => Arch::Riscv64,
        _ => Arch::Aarch64,
    };
    let base = match arch {
        Arch::I386 => CODE & 0xffff_ffff,
        _ => CODE,
    };
    let read_code = |addr: u64, out: &mut [u8]| {
        let Some(off) = addr.checked_sub(base).and_then(|o| usize::try_from(o).ok()) else {
            return false;
        };
        match code.get(off..off.saturating_add(out.len())) {
            Some(b) if b.len() == out.len() => {
                out.copy_from_slice(b);
                true
            }
            _ => false,
        }
    };
    // Stubs at the start and where the pick's other bits say.
    let step = usize::from(pick >> 2).max(1);
    let at = (0..code.len())
        .step_by(step)
        .take(64)
        .map(|o| base + o as u64);
    let text = TextRanges::new([(base, base + code.len() as u64 + 1)]);
    let stubs = EntryStubs::read(arch, at, read_code, text);
    black_box((
        stubs.stubs(),
        stubs.heap_bytes(),
        stubs.at(base),
        stubs.risc_at(base),
    ));
    let tables = UnwindTables {
        arch,
        orc: None,
        cfi: None,
        stubs,
        user: Default::default(),
    };
    let mem = fake_memory(data);
    let high = base + code.len() as u64;
    for start in starts(data, base, high) {
        let mut out = [0u64; 32];
        let crossings = Crossings {
            kernel_cs: 8,
            ..Crossings::ALL
        };
        if let Some(w) = walk_tables(
            &tables,
            start,
            32,
            crossings,
            |a, b| mem.read(a, b),
            &mut out,
        ) {
            assert!(w.frames <= 32, "a walk past its depth");
        }
        // The same from a sample, its trap registers words of the input (or unreadable):
        // each read at most once.
        let mut reads = [0u8; 4];
        let sysregs = |r: SysReg| {
            let k = r as usize;
            reads[k] += 1;
            let at = (start.sp as usize).wrapping_add(k * 8) % data.len().max(1);
            let b = data.get(at..at + 8)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        let read = |a, b: &mut [u8]| mem.read(a, b);
        if let Some(w) =
            walk_tables_at_sample(&tables, start, 32, crossings, read, sysregs, &mut out)
        {
            assert!(w.frames <= 32, "a walk past its depth");
        }
        assert!(reads.iter().all(|&n| n <= 1), "a register read twice");
    }
}
