//! DWARF CFI: `CfiTable::parse` over the input as `.debug_frame` and as `.eh_frame` (for
//! x86_64 and aarch64 registers), without the kernel's text and with it (each FDE checked,
//! FreePascal's layout told apart), an ELF input through `UnwindTables::from_elf` and
//! `TableStats::of_elf`, then lookups and table walks over a fake stack made of the input
//! itself, the table as the kernel's and as a user program's (`user=`).

use std::hint::black_box;

use kern_profile_format::Arch;
use kern_profile_unwind::tables::cfi::{CfiRegisters, CfiSection};
use kern_profile_unwind::tables::{CfiTable, TableStats, TextRanges};
use kern_profile_unwind::{walk_tables, Crossings, Limits, StartRegs, UnwindTables};

use super::unwind_orc::walk_all;

/// Where the fake stack is mapped: the input's bytes from here.
const STACK: u64 = 0xffff_c900_0001_0000;

/// One input through the target.
pub fn run(data: &[u8]) {
    crate::bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    if data.starts_with(b"\x7fELF") {
        let limits = Limits {
            orc_entries: 1 << 16,
            cfi_rows: 1 << 16,
        };
        black_box(TableStats::of_elf(data).map(|s| s.to_string()).ok());
        match UnwindTables::from_elf(data, limits) {
            Ok(t) => {
                black_box(t.summary());
                walk_all(&t, data, 0, u64::MAX);
            }
            Err(e) => {
                black_box(e.to_string());
            }
        }
        return;
    }
    let regs = [
        (
            Arch::X86_64,
            CfiRegisters {
                sp: 7,
                fp: 6,
                ra: 16,
            },
        ),
        (
            Arch::Aarch64,
            CfiRegisters {
                sp: 31,
                fp: 29,
                ra: 30,
            },
        ),
    ];
    for (arch, regs) in regs {
        for name in [".debug_frame", ".eh_frame"] {
            let section = CfiSection {
                name,
                data,
                address: 0x1000,
                text: Some(0x2000),
            };
            // The kernel's text unknown, and known (the FDEs checked against it, FreePascal's
            // layout told apart).
            let text = TextRanges::new([(0x2000, 0x10_0000)]);
            black_box(CfiTable::check(std::slice::from_ref(&section), 8, &text));
            let checked =
                CfiTable::parse_in(std::slice::from_ref(&section), 8, regs, 1 << 16, &text);
            if let Ok(t) = checked {
                black_box((t.stats().to_string(), t.find(0x2000)));
            }
            match CfiTable::parse(&[section], 8, regs, 1 << 16) {
                Ok(t) => {
                    black_box(&t.warnings);
                    let tables = UnwindTables {
                        arch,
                        orc: None,
                        cfi: Some(t),
                        stubs: Default::default(),
                        user: Default::default(),
                    };
                    walk_all(&tables, data, 0, 0x10_0000);
                    walk_user(tables, data);
                }
                Err(e) => {
                    black_box(e.to_string());
                }
            }
        }
    }
}

/// The table as a user program's (`user=`) whose code is zeros at `[0x2000, 0x3000)`, walked
/// from user-mode samples there: a program's `.eh_frame` that lies gets the same bounds as
/// the kernel's.
fn walk_user(mut tables: UnwindTables, data: &[u8]) {
    let Some(cfi) = tables.cfi.take() else { return };
    if tables
        .user
        .push("fuzz", cfi, 0x2000, vec![0; 0x1000])
        .is_err()
    {
        return;
    }
    let mem = fake_memory(data);
    let read = |a: u64, b: &mut [u8]| match a {
        0x2000..0x3000 => {
            b.fill(0);
            true
        }
        _ => mem.read(a, b),
    };
    let in_user = Crossings {
        user_mode: true,
        ..Crossings::ALL
    };
    for start in starts(data, 0x2000, 0x2ff8) {
        let mut out = [0u64; 32];
        if let Some(w) = walk_tables(&tables, start, 32, in_user, read, &mut out) {
            assert!(w.frames <= 32, "a walk past its depth");
            assert!(!w.from_user, "a user-mode sample crossed no entry");
        }
    }
}

/// The input as guest memory at [`STACK`].
pub(crate) struct FakeMemory<'a>(&'a [u8]);

impl FakeMemory<'_> {
    pub fn read(&self, addr: u64, out: &mut [u8]) -> bool {
        let Some(off) = addr.checked_sub(STACK) else {
            return false;
        };
        let Ok(off) = usize::try_from(off) else {
            return false;
        };
        match self.0.get(off..off.saturating_add(out.len())) {
            Some(b) if b.len() == out.len() => {
                out.copy_from_slice(b);
                true
            }
            _ => false,
        }
    }
}

pub(crate) fn fake_memory(data: &[u8]) -> FakeMemory<'_> {
    FakeMemory(data)
}

/// A few start registers: pcs spread over `[low, high]` and from the input, the stack at
/// [`STACK`].
pub(crate) fn starts(data: &[u8], low: u64, high: u64) -> Vec<StartRegs> {
    let word = |i: usize| {
        let mut b = [0u8; 8];
        for (j, v) in b.iter_mut().enumerate() {
            *v = data.get(i * 8 + j).copied().unwrap_or(0);
        }
        u64::from_le_bytes(b)
    };
    let span = high.wrapping_sub(low).max(1);
    (0..4)
        .map(|i| StartRegs {
            pc: low.wrapping_add(word(i) % span),
            sp: STACK + 8 * i as u64,
            fp: STACK + word(i + 4) % (data.len() as u64 + 16),
            ra: Some(word(i + 8)),
        })
        .collect()
}
