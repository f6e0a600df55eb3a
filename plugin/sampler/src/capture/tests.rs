use super::*;
use kern_profile_format::{Arch, Privilege};

/// Fake registers; `None` reads as QEMU failing to read the register.
#[derive(Debug, Clone, Copy, Default)]
struct Regs {
    sp: Option<u64>,
    fp: Option<u64>,
    cs: Option<u64>,
    ra: Option<u64>,
}

impl RegisterReader for Regs {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        match reg {
            Reg::StackPointer => self.sp,
            Reg::FramePointer => self.fp,
            Reg::Privilege => self.cs,
            Reg::ReturnAddress => self.ra,
            _ => None,
        }
    }
}

/// The x86 architecture of a pointer width.
fn arch(w: PtrWidth) -> Arch {
    match w {
        PtrWidth::W4 => Arch::I386,
        PtrWidth::W8 => Arch::X86_64,
    }
}

/// A fake guest stack: `bytes` mapped at `base`, everything else unreadable.
struct Stack {
    base: u64,
    bytes: Vec<u8>,
    width: PtrWidth,
    fetches: usize,
}

impl Stack {
    fn new(width: PtrWidth) -> Self {
        Stack {
            base: BASE,
            bytes: vec![0; 0x1000],
            width,
            fetches: 0,
        }
    }

    fn put(&mut self, addr: u64, v: u64) {
        let w = self.width.bytes();
        let at = (addr - self.base) as usize;
        self.bytes[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
    }

    /// `n` frame records 0x40 apart from `fp`, the last one ending the chain; returns their
    /// return addresses.
    fn chain(&mut self, fp: u64, n: usize) -> Vec<u64> {
        let w = self.width.bytes() as u64;
        (0..n as u64)
            .map(|i| {
                let at = fp + 0x40 * i;
                let saved = if i + 1 == n as u64 { 0 } else { at + 0x40 };
                let ret = 0xc010_0000 + i * 0x10;
                self.put(at, saved);
                self.put(at + w, ret);
                ret
            })
            .collect()
    }

    fn reader(&mut self) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        |addr, out| {
            self.fetches += 1;
            let Some(off) = addr.checked_sub(self.base) else {
                return false;
            };
            match self.bytes.get(off as usize..off as usize + out.len()) {
                Some(src) => {
                    out.copy_from_slice(src);
                    true
                }
                None => false,
            }
        }
    }
}

const BASE: u64 = 0x8_0000;
const SP: u64 = BASE + 0x100;
const FP: u64 = BASE + 0x200;
const RET: u64 = 0xc000_1234;
const BOTH: [PtrWidth; 2] = [PtrWidth::W4, PtrWidth::W8];

fn site(entry: EntryState) -> SampleSite {
    SampleSite {
        vcpu: 3,
        pc: 0xc000_0042,
        regs_pc: 0xc000_0042,
        entry,
        icount: 1000,
        time_ns: 77,
    }
}

fn regs() -> Regs {
    Regs {
        sp: Some(SP),
        fp: Some(FP),
        cs: Some(0x08),
        ra: None,
    }
}

/// Takes one sample at a block entered in state `entry`, over a stack whose word at [SP] is
/// `RET`, whose word at [SP+W] is `RET + 1`, and whose FP chain holds 3 frames.
fn sample(width: PtrWidth, entry: EntryState, depth: u32) -> (SampleRecord<'static>, Vec<u64>) {
    let mut stack = Stack::new(width);
    stack.put(SP, RET);
    stack.put(SP + width.bytes() as u64, RET + 1);
    let chain = stack.chain(FP, 3);
    let mut c = Capture::new(arch(width), depth);
    let (rec, _) = c.take(&site(entry), &mut regs(), stack.reader());
    let frames: &'static [u64] = rec.frames.to_vec().leak();
    (SampleRecord { frames, ..rec }, chain)
}

#[test]
fn framed_block_is_walked_from_fp() {
    for w in BOTH {
        let (rec, chain) = sample(w, EntryState::Framed, 64);
        assert_eq!(rec.frames, chain, "{w:?}");
        assert_eq!(rec.stop.reason(), Some(StopReason::NullFramePointer));
        assert!(!rec.entry_resolved);
        assert_eq!(rec.sp_word, Some(RET));
        assert_eq!((rec.sp, rec.pc, rec.vcpu), (SP, 0xc000_0042, 3));
        assert_eq!((rec.icount, rec.time_ns), (1000, 77));
        assert!(!rec.user);
    }
}

#[test]
fn frameless_entries_put_the_caller_first() {
    for w in BOTH {
        for (entry, caller) in [
            (EntryState::BeforePush, RET),
            (EntryState::AtReturn, RET),
            (EntryState::AfterPush, RET + 1),
        ] {
            let (rec, chain) = sample(w, entry, 64);
            assert_eq!(rec.frames[0], caller, "{w:?} {entry:?}");
            assert_eq!(&rec.frames[1..], &chain[..], "{w:?} {entry:?}");
            assert!(rec.entry_resolved);
            assert_eq!(rec.sp_word, Some(RET));
            assert_eq!(rec.stop.reason(), Some(StopReason::NullFramePointer));
        }
    }
}

#[test]
fn depth_limit_counts_the_caller_read_from_the_stack() {
    for w in BOTH {
        let (rec, chain) = sample(w, EntryState::Framed, 2);
        assert_eq!(rec.frames, &chain[..2]);
        assert_eq!(rec.stop.reason(), Some(StopReason::DepthLimit));
        let (rec, chain) = sample(w, EntryState::BeforePush, 2);
        assert_eq!(rec.frames, [RET, chain[0]]);
        assert_eq!(rec.stop.reason(), Some(StopReason::DepthLimit));
        let (rec, _) = sample(w, EntryState::AfterPush, 1);
        assert_eq!(rec.frames, [RET + 1]);
        assert_eq!(rec.stop.reason(), Some(StopReason::DepthLimit));
    }
}

#[test]
fn unreadable_memory() {
    for w in BOTH {
        let mut stack = Stack::new(w);
        let mut c = Capture::new(arch(w), 64);
        // SP outside the mapping: no [SP] word, so no caller fix; FP too.
        let mut r = Regs {
            sp: Some(0x10),
            fp: Some(0x20),
            cs: Some(0x08),
            ra: None,
        };
        let (rec, _) = c.take(&site(EntryState::BeforePush), &mut r, stack.reader());
        assert_eq!(rec.sp_word, None);
        assert!(!rec.entry_resolved);
        assert!(rec.frames.is_empty());
        assert_eq!(rec.stop.reason(), Some(StopReason::Unreadable));
        // [SP] readable but [SP+W] not: after `push ebp` the caller stays unknown.
        let top = BASE + stack.bytes.len() as u64 - w.bytes() as u64;
        stack.put(top, RET);
        r.sp = Some(top);
        let (rec, _) = c.take(&site(EntryState::AfterPush), &mut r, stack.reader());
        assert_eq!(rec.sp_word, Some(RET));
        assert!(!rec.entry_resolved);
        // A chain that leads out of the mapping (near the stack: far away is not even read).
        stack.chain(FP, 2);
        stack.put(FP + 0x40, BASE + 0x2000);
        let (rec, _) = c.take(&site(EntryState::Framed), &mut regs(), stack.reader());
        assert_eq!(rec.frames.len(), 2);
        assert_eq!(rec.stop.reason(), Some(StopReason::Unreadable));
        // The second sample's FP lay below its SP.
        assert_eq!(c.stops().by_reason(), [0, 0, 1, 2]);
    }
}

#[test]
fn fp_below_sp_is_garbage() {
    for w in BOTH {
        let mut stack = Stack::new(w);
        stack.chain(SP - 0x40, 2);
        let mut c = Capture::new(arch(w), 64);
        let mut r = Regs {
            fp: Some(SP - 0x40),
            ..regs()
        };
        let (rec, _) = c.take(&site(EntryState::Framed), &mut r, stack.reader());
        assert!(rec.frames.is_empty());
        assert_eq!(rec.stop.reason(), Some(StopReason::NotIncreasing));
    }
}

#[test]
fn registers() {
    for w in BOTH {
        let mut stack = Stack::new(w);
        let mut c = Capture::new(arch(w), 64);
        // CPL 3 is user mode; an unreadable CS reads as kernel mode.
        let mut r = Regs {
            cs: Some(0x1b),
            ..regs()
        };
        assert!(
            c.take(&site(EntryState::Framed), &mut r, stack.reader())
                .0
                .user
        );
        r.cs = None;
        assert!(
            !c.take(&site(EntryState::Framed), &mut r, stack.reader())
                .0
                .user
        );
        // Unreadable SP and FP read as 0: nothing to walk.
        let (rec, _) = c.take(
            &site(EntryState::Framed),
            &mut Regs::default(),
            stack.reader(),
        );
        assert_eq!((rec.sp, rec.sp_word), (0, None));
        assert_eq!(rec.stop.reason(), Some(StopReason::NullFramePointer));
    }
    // i386: whatever QEMU hands back beyond 32 bits is not an address.
    let mut stack = Stack::new(PtrWidth::W4);
    let chain = stack.chain(FP, 2);
    let mut c = Capture::new(Arch::I386, 64);
    let mut r = Regs {
        sp: Some(0xdead_0000_0000_0000 | SP),
        fp: Some(0xdead_0000_0000_0000 | FP),
        cs: Some(0x08),
        ra: None,
    };
    let (rec, _) = c.take(&site(EntryState::Framed), &mut r, stack.reader());
    assert_eq!(rec.sp, SP);
    assert_eq!(rec.frames, chain);
}

#[test]
fn memory_is_read_afresh_for_each_sample() {
    let w = PtrWidth::W8;
    let mut stack = Stack::new(w);
    stack.put(SP, RET);
    let chain = stack.chain(FP, 3);
    let mut c = Capture::new(arch(w), 64);
    let (rec, _) = c.take(&site(EntryState::Framed), &mut regs(), stack.reader());
    assert_eq!(rec.frames, chain);
    // The [SP] word and the three records lie in one window: few guest reads.
    assert!(stack.fetches <= 2, "{} fetches", stack.fetches);
    stack.put(SP, RET + 8);
    stack.put(FP + 8, 0xc020_0000);
    let (rec, _) = c.take(&site(EntryState::Framed), &mut regs(), stack.reader());
    assert_eq!(rec.sp_word, Some(RET + 8));
    assert_eq!(rec.frames[0], 0xc020_0000);
}

#[test]
fn without_registers_there_is_no_stack() {
    let mut c = Capture::new(Arch::I386, 64);
    let rec = c.take_without_registers(&site(EntryState::BeforePush));
    assert_eq!((rec.sp, rec.sp_word, rec.frames.len()), (0, None, 0));
    assert_eq!(rec.stop.reason(), Some(StopReason::Unreadable));
    assert!(!rec.entry_resolved);
    assert_eq!((rec.pc, rec.icount, rec.time_ns), (0xc000_0042, 1000, 77));
    c.take_without_registers(&site(EntryState::Framed));
    assert_eq!(c.stops(), &[0, 0, 0, 2]);
}

/// A chain whose records lie farther apart than a window, deeper than a real stack: the
/// sample stops when it has fetched its budget of windows, whatever the depth allows, and
/// says so.
#[test]
fn a_sparse_chain_spends_the_read_budget() {
    use crate::window::{FETCH_BUDGET, WINDOW};
    let gap = (WINDOW + 88) as u64;
    for w in BOTH {
        let mut stack = Stack::new(w);
        stack.bytes = vec![0; 100 * gap as usize + 0x1000];
        let n = 90u64;
        for i in 0..n {
            let at = FP + i * gap;
            stack.put(at, if i + 1 == n { 0 } else { at + gap });
            stack.put(at + w.bytes() as u64, RET + i);
        }
        let mut c = Capture::new(arch(w), 1024);
        let mut fetches = 0;
        let (rec, _) = c.take(&site(EntryState::Framed), &mut regs(), |a, o| {
            fetches += 1;
            stack.reader()(a, o)
        });
        assert_eq!(rec.stop.reason(), Some(StopReason::ReadBudget), "{w:?}");
        // [SP]'s window holds the first record (same page), then one window a frame.
        assert_eq!(rec.frames.len(), FETCH_BUDGET as usize, "{w:?}");
        assert_eq!(fetches, FETCH_BUDGET as usize, "{w:?}");
        assert_eq!(c.stops().get(StopReason::ReadBudget), 1);
    }
}

#[test]
fn riscv64_records_below_fp_privilege_and_ra() {
    let mut stack = Stack::new(PtrWidth::W8);
    // fp points just above {saved fp, ra}.
    stack.put(FP - 16, FP + 0x40);
    stack.put(FP - 8, RET);
    stack.put(FP + 0x40 - 16, 0);
    stack.put(FP + 0x40 - 8, RET + 0x10);
    let mut c = Capture::new(Arch::Riscv64, 64);
    let mut r = Regs {
        cs: Some(1),
        ra: Some(0x8000_0abc),
        ..regs()
    };
    let (rec, x) = c.take(&site(EntryState::Framed), &mut r, stack.reader());
    assert_eq!(rec.frames, [RET, RET + 0x10]);
    assert_eq!(rec.stop.reason(), Some(StopReason::NullFramePointer));
    assert!(!rec.user);
    assert_eq!(x.privilege, Privilege::Kernel);
    assert_eq!(x.return_register, Some(0x8000_0abc));
    // U-mode.
    r.cs = Some(0);
    let (rec, x) = c.take(&site(EntryState::Framed), &mut r, stack.reader());
    assert!(rec.user);
    assert_eq!(x.privilege, Privilege::User);
}

#[test]
fn aarch64_strips_the_link_register_and_reads_el() {
    let mut stack = Stack::new(PtrWidth::W8);
    let chain = stack.chain(FP, 2);
    let mut c = Capture::new(Arch::Aarch64, 64);
    let mut r = Regs {
        cs: Some(0x3c5),
        ra: Some(0x0023_0000_4020_0010),
        ..regs()
    };
    let (rec, x) = c.take(&site(EntryState::Framed), &mut r, stack.reader());
    assert_eq!(rec.frames, chain);
    assert_eq!(x.privilege, Privilege::Kernel);
    assert_eq!(x.return_register, Some(0x4020_0010));
}

/// x86's mode registers are read at every sample while paging is off (boot code turns it on
/// without loading a new page-table base); once it is on, again only when the page-table
/// base changes or a millisecond has passed, and in between the mode read last is used.
#[test]
fn the_cpu_mode_is_read_again_on_a_new_address_space_or_after_a_while() {
    struct ModeRegs {
        cr0: u64,
        cr3: u64,
        mode_reads: usize,
    }
    impl RegisterReader for ModeRegs {
        fn read(&mut self, reg: Reg) -> Option<u64> {
            match reg {
                Reg::StackPointer => Some(SP),
                Reg::FramePointer => Some(0),
                Reg::Privilege => Some(0x08),
                Reg::PageTableBase => Some(self.cr3),
                Reg::ModeControl => {
                    self.mode_reads += 1;
                    Some(self.cr0)
                }
                _ => None,
            }
        }
    }
    let mut stack = Stack::new(PtrWidth::W4);
    let mut c = Capture::new(Arch::I386, 8);
    let mut r = ModeRegs {
        cr0: 1, // protected mode, paging off
        cr3: 0,
        mode_reads: 0,
    };
    let at = |t: u64| SampleSite {
        time_ns: t,
        ..site(EntryState::Framed)
    };
    let mut mode =
        |c: &mut Capture, r: &mut ModeRegs, t: u64| c.take(&at(t), r, stack.reader()).1.mode;
    assert_eq!(mode(&mut c, &mut r, 1_000), CpuMode::PagingOff);
    r.cr0 = 1 | 1 << 31; // paging on, same CR3: seen at once
    assert_eq!(mode(&mut c, &mut r, 2_000), CpuMode::Paging);
    assert_eq!(r.mode_reads, 2);
    // Paging on is kept while CR3 stays and the millisecond lasts.
    assert_eq!(mode(&mut c, &mut r, 3_000), CpuMode::Paging);
    assert_eq!(r.mode_reads, 2);
    r.cr0 = 1; // off again (rare): seen on a new address space or after the millisecond
    r.cr3 = 0x1000;
    assert_eq!(mode(&mut c, &mut r, 4_000), CpuMode::PagingOff);
    r.cr0 = 1 | 1 << 31;
    assert_eq!(mode(&mut c, &mut r, 5_000), CpuMode::Paging);
    r.cr0 = 1;
    assert_eq!(
        mode(&mut c, &mut r, 5_000 + MODE_TTL_NS),
        CpuMode::PagingOff
    );
    assert_eq!(r.mode_reads, 5);
}

#[test]
fn a_stack_only_capture_reads_no_mode_and_no_page_table() {
    struct Counted {
        regs: Regs,
        reads: Vec<Reg>,
    }
    impl RegisterReader for Counted {
        fn read(&mut self, reg: Reg) -> Option<u64> {
            self.reads.push(reg);
            match reg {
                Reg::PageTableBase | Reg::ModeControl => Some(1 << 31 | 1),
                _ => self.regs.read(reg),
            }
        }
    }
    let mut stack = Stack::new(PtrWidth::W4);
    stack.put(SP, RET);
    let frames = stack.chain(FP, 3);
    let mut r = Counted {
        regs: regs(),
        reads: Vec::new(),
    };
    let mut c = Capture::new(Arch::I386, 8).stack_only();
    let (rec, extras) = c.take(&site(EntryState::Framed), &mut r, stack.reader());
    assert_eq!(rec.frames, &frames[..]);
    assert_eq!(rec.sp_word, Some(RET));
    assert_eq!(extras.privilege, Privilege::Kernel);
    assert_eq!(
        (extras.mode, extras.page_table_base),
        (CpuMode::Unknown, None)
    );
    assert!(!r.reads.contains(&Reg::PageTableBase) && !r.reads.contains(&Reg::ModeControl));
    // The full capture reads both.
    r.reads.clear();
    let mut c = Capture::new(Arch::I386, 8);
    assert_eq!(
        c.take(&site(EntryState::Framed), &mut r, stack.reader())
            .1
            .mode,
        CpuMode::Paging
    );
    assert!(r.reads.contains(&Reg::PageTableBase) && r.reads.contains(&Reg::ModeControl));
}

/// x86_64 ORC tables (6.4 layout): `(address, sp_offset, kind)` with the stack pointer as
/// the base.
fn orc_tables(entries: &[(u64, i16, u8)]) -> Arc<UnwindTables> {
    use kern_profile_unwind::tables::{OrcLayout, OrcTable};
    let ip_addr = 0xd000_0000u64;
    let mut ips = Vec::new();
    let mut rows = Vec::new();
    for (i, &(addr, sp_off, kind)) in entries.iter().enumerate() {
        let word_at = ip_addr + 4 * i as u64;
        ips.extend_from_slice(&(addr.wrapping_sub(word_at) as i32).to_le_bytes());
        let sp_reg = if kind < 2 { 0 } else { 5 };
        let [a, b] = sp_off.to_le_bytes();
        rows.extend_from_slice(&[a, b, 0, 0, sp_reg, kind]);
    }
    let orc = OrcTable::parse(ip_addr, &ips, &rows, OrcLayout::Typed, 100).unwrap();
    Arc::new(UnwindTables {
        arch: Arch::X86_64,
        orc: Some(orc),
        cfi: None,
        stubs: Default::default(),
        user: Default::default(),
    })
}

#[test]
fn kernel_tables_walk_where_they_cover_the_pc() {
    let w = PtrWidth::W8;
    // The sampled function keeps 8 bytes below its return address; its caller is the end.
    let tables = orc_tables(&[
        (0xc000_0000, 16, 2),
        (0xc000_1000, 0, 1),
        (0xc000_2000, 0, 0),
    ]);
    let mut stack = Stack::new(w);
    stack.put(SP, 0x5555);
    stack.put(SP + 8, 0xc000_1010);
    let chain = stack.chain(FP, 3);
    let mut c = Capture::new(Arch::X86_64, 64).with_tables(Some(tables.clone()));
    let (rec, _) = c.take(&site(EntryState::Framed), &mut regs(), stack.reader());
    assert_eq!(rec.frames, [0xc000_1010]);
    assert_eq!(rec.stop.reason(), Some(StopReason::NullFramePointer));
    // The first frame is the caller, whatever the block's entry: no [SP] fix for readers.
    assert!(rec.entry_resolved);
    assert_eq!(rec.sp_word, Some(0x5555));
    // A pc the tables do not cover, and a user-mode sample: the frame-pointer walk.
    let mut c = Capture::new(Arch::X86_64, 64).with_tables(Some(tables));
    let at = SampleSite {
        pc: 0xc000_3000,
        regs_pc: 0xc000_3000,
        ..site(EntryState::Framed)
    };
    let (rec, _) = c.take(&at, &mut regs(), stack.reader());
    assert_eq!(rec.frames, chain);
    assert!(!rec.entry_resolved);
    let mut user = regs();
    user.cs = Some(0x33);
    let (rec, _) = c.take(&site(EntryState::Framed), &mut user, stack.reader());
    assert_eq!(rec.frames, chain);
    assert_eq!(c.stops().get(StopReason::NullFramePointer), 2);
}

#[test]
fn kernel_tables_take_the_rule_where_the_registers_were_read() {
    // The block starts before a push (return address at [SP]); the sampled instruction
    // comes after it, where the rule would read one word further up.
    let tables = orc_tables(&[
        (0xc000_0040, 8, 2),
        (0xc000_0041, 16, 2),
        (0xc000_1000, 0, 1),
        (0xc000_2000, 0, 0),
    ]);
    let mut stack = Stack::new(PtrWidth::W8);
    stack.put(SP, 0xc000_1010);
    stack.put(SP + 8, 0xc000_1020);
    let mut c = Capture::new(Arch::X86_64, 64).with_tables(Some(tables));
    let at = SampleSite {
        pc: 0xc000_0042,
        regs_pc: 0xc000_0040,
        ..site(EntryState::BeforePush)
    };
    let (rec, _) = c.take(&at, &mut regs(), stack.reader());
    assert_eq!(rec.frames, [0xc000_1010]);
    assert_eq!(rec.pc, 0xc000_0042);
}

#[test]
fn kernel_tables_take_the_caller_from_the_link_register_once() {
    use kern_profile_unwind::tables::cfi::{CfiRegisters, CfiSection};
    use kern_profile_unwind::tables::CfiTable;
    // aarch64 .debug_frame: a CIE (CFA = sp, return address in x30) and a leaf's FDE over
    // [0x1000, 0x1100) that changes nothing.
    let cie = [
        0xff, 0xff, 0xff, 0xff, 1, 0, 4, 0x78, 30, 0x0c, 31, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let mut data = (cie.len() as u32).to_le_bytes().to_vec();
    data.extend_from_slice(&cie);
    let mut fde = 0u32.to_le_bytes().to_vec();
    fde.extend_from_slice(&0x1000u64.to_le_bytes());
    fde.extend_from_slice(&0x100u64.to_le_bytes());
    fde.extend_from_slice(&[0; 4]);
    data.extend_from_slice(&(fde.len() as u32).to_le_bytes());
    data.extend_from_slice(&fde);
    let section = CfiSection {
        name: ".debug_frame",
        data: &data,
        address: 0,
        text: None,
    };
    let regs = CfiRegisters {
        sp: 31,
        fp: 29,
        ra: 30,
    };
    let cfi = CfiTable::parse(&[section], 8, regs, 100).unwrap();
    let tables = Arc::new(UnwindTables {
        arch: Arch::Aarch64,
        orc: None,
        cfi: Some(cfi),
        stubs: Default::default(),
        user: Default::default(),
    });
    let mut c = Capture::new(Arch::Aarch64, 64).with_tables(Some(tables));
    let mut r = regs_without_fp();
    r.ra = Some(0x2040);
    let at = SampleSite {
        pc: 0x1010,
        regs_pc: 0x1010,
        ..site(EntryState::Framed)
    };
    let mut stack = Stack::new(PtrWidth::W8);
    let (rec, extras) = c.take(&at, &mut r, stack.reader());
    assert_eq!(rec.frames, [0x2040]);
    assert!(rec.entry_resolved);
    assert_eq!(extras.return_register, Some(0x2040));
    // The caller is in the frames: the record does not carry the register for readers to
    // add it again.
    assert_eq!(record_extras(&rec, extras).return_register, None);
}

/// Kernel-mode aarch64 registers (PSTATE EL1h) with a null frame pointer.
fn regs_without_fp() -> Regs {
    Regs {
        sp: Some(SP),
        fp: Some(0),
        cs: Some(0x3c5),
        ra: None,
    }
}

/// A FreePascal thread's odd chain (8n+7) over words where an encoded `pt_regs` pointer
/// would lead (a ring-3 selector and an ip: Linux's layout, but not Linux's selectors): walked
/// whole with no `[kernel entry]` on a kernel that is not Linux or not known (elf= not given),
/// and taken for Linux's entry only on Linux, as the capture is told.
#[test]
fn an_odd_chain_is_walked_whole_unless_the_kernel_is_linux() {
    let w = PtrWidth::W8;
    let mut stack = Stack::new(w);
    let fps = [FP + 7, FP + 0x47, FP + 0x87];
    for (i, &fp) in fps.iter().enumerate() {
        stack.put(fp, fps.get(i + 1).copied().unwrap_or(0));
        stack.put(fp + 8, RET + i as u64);
    }
    let regs_at = fps[1] - 1;
    stack.put(regs_at + 32, fps[2]);
    stack.put(regs_at + 128, 0x40_1000);
    stack.put(regs_at + 136, 0x1b);
    stack.put(regs_at + 152, FP + 0x300);
    let sampled = Regs {
        fp: Some(fps[0]),
        ..regs()
    };
    let walked = |os: Option<KernelOs>, stack: &mut Stack| {
        let mut c = Capture::new(Arch::X86_64, 64);
        if let Some(os) = os {
            c = c.with_kernel_os(os);
        }
        let (rec, _) = c.take(&site(EntryState::Framed), &mut { sampled }, stack.reader());
        (rec.frames.to_vec(), rec.stop)
    };
    let whole = vec![RET, RET + 1, RET + 2];
    for os in [None, Some(KernelOs::Unknown), Some(KernelOs::Other)] {
        let (frames, stop) = walked(os, &mut stack);
        assert_eq!(frames, whole, "{os:?}");
        assert_eq!(stop.reason(), Some(StopReason::NullFramePointer), "{os:?}");
    }
    let (frames, _) = walked(Some(KernelOs::Linux), &mut stack);
    assert_eq!(
        frames[..3],
        [
            RET,
            kern_profile_format::frame_marker::KERNEL_ENTRY,
            0x40_1000
        ]
    );
}
