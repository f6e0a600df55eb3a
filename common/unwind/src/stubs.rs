//! Kernel entry stubs that leave no unwind information: where, at each of their instructions
//! and calls, the interrupted context lies (the frame the CPU pushed, or the trap frame the
//! stub saved), and the crossing into it (issue 38; docs/walk-design.md sections 2 and 3).
//!
//! A hobby kernel's system-call or interrupt stub is hand-written assembly: it pushes the
//! registers, maybe aligns the stack, and calls the handler, with neither a frame record nor
//! CFI. A walk by the kernel's tables reaches the stub's return address (or a sample lands in
//! the stub) and has no rule there. The stub's own instructions say where the CPU's frame is
//! from there (`stubs/x86.rs`: read once, when the tables are); the frame is then believed only if
//! the CPU could have written it (`cross_x86`): its code selector says the mode (ring 0 or
//! ring 3, the kernel's own selector for an interrupt of kernel code), its flags are flags
//! (bit 1 set, the reserved bits clear), the interrupted pc is kernel text (ring 0) or a
//! canonical user address (ring 3), and it lies on the stack being walked. Where it is not,
//! the walk does not cross, and says so ([`kern_profile_format::StopReason::EntryNotCrossed`]).
//!
//! On riscv64 and aarch64 a trap pushes nothing: the stub saves the interrupted pc (`sepc`,
//! `ELR_EL1`), stack pointer, frame pointer, return address and mode where it chooses.
//! `stubs/machine.rs` follows where (`stubs/riscv64.rs`, `stubs/aarch64.rs` decode), and
//! `cross_risc` believes the saved values only if they agree with each other and with the
//! kernel's text.
//!
//! The stubs are the kernel ELF's code symbols where its tables have no row: which of them
//! are entries, the check of the frame decides. (The IDT, `stvec` and `VBAR_EL1` name the
//! entries themselves; the plugin does not read them yet: docs/walk-design.md, status.)

use kern_profile_format::Arch;

use crate::tables::TextRanges;
use crate::PtrWidth;

mod aarch64;
mod cross_risc;
mod machine;
mod riscv64;
mod x86;

pub(crate) use cross_risc::{cross_risc, SysRegs};

/// At most this many stubs are read per kernel (each at most `x86::MAX_INSNS`
/// instructions): a bound on the time and memory a kernel's symbols can cost.
pub const MAX_STUBS: usize = 4096;

/// Where the frame the CPU pushed at the entry lies, from the stack pointer at an
/// instruction of the stub (before it runs) or at the return address of one of its calls
/// (the stack pointer after the call returned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameAt {
    /// At `sp + N`.
    Sp(u64),
    /// At the word the stub stored at `sp + slot`, plus `add` (wrapping): the stack pointer
    /// it saved before aligning the stack, and pushed for its handler.
    Saved { slot: u64, add: u64 },
}

/// Where the interrupted context's frame pointer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FpAt {
    /// Still in the frame-pointer register: the stub has not written it.
    Unchanged,
    /// Pushed by the stub, `N` bytes below the CPU's frame.
    Saved(u64),
    /// Written, not saved where the walk can find it.
    Lost,
}

/// What the stub did at one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub frame: FrameAt,
    pub fp: FpAt,
}

/// Where one of the interrupted context's values is, at an address of a riscv64 or aarch64
/// stub (a trap pushes nothing there: the stub saves what it clobbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Loc {
    /// Not where the walk can find it.
    Lost,
    /// Still in its own register.
    Reg,
    /// The stack pointer plus this (the interrupted stack pointer, on the same stack).
    SpPlus(i64),
    /// The word at the stack pointer plus `off`, plus `add` (wrapping).
    Slot { off: i64, add: i64 },
    /// Still in a system register, as the trap or the stub left it: believed only at the
    /// sample's own first instruction in the stub (a call, or re-enabled traps, may have
    /// changed it since), read there from the CPU.
    Sys(SysReg),
}

/// A system register a riscv64 or aarch64 trap leaves the interrupted context in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SysReg {
    /// The interrupted pc: `sepc`, `ELR_EL1`.
    TrapPc,
    /// The interrupted mode: `sstatus` (SPP), `SPSR_EL1` (M).
    Status,
    /// riscv64 `sscratch`, where a stub swapped the interrupted stack pointer.
    Scratch,
    /// aarch64 `SP_EL0`: the user stack pointer while the kernel runs on `SP_EL1`.
    UserSp,
}

/// The mode a trap came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    User,
    Kernel,
}

/// What a riscv64 or aarch64 stub did at one address: where the interrupted pc, stack
/// pointer, frame pointer, return address and mode (`sstatus`, `SPSR_EL1`) are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RiscLayout {
    pub pc: Loc,
    pub sp: Loc,
    pub fp: Loc,
    pub ra: Loc,
    pub status: Loc,
    /// The mode the path was read for, where the entry itself differs by mode (aarch64
    /// switches stacks from EL0); else the interrupted pc says.
    pub mode: Option<Mode>,
}

impl RiscLayout {
    /// Whether the layout reads a system register ([`Loc::Sys`]): it holds at the sample's
    /// first frame alone, and only where no layout from memory does.
    pub fn needs_registers(&self) -> bool {
        [self.pc, self.sp, self.fp, self.ra, self.status]
            .iter()
            .any(|l| matches!(l, Loc::Sys(_)))
    }
}

/// At most this many riscv64/aarch64 layouts are kept per kernel (before duplicates go): a
/// bound on memory whatever the symbols (a real kernel's stubs give a few hundred).
const MAX_RISC_LAYOUTS: usize = 1 << 16;

/// At most this many riscv64/aarch64 layouts at one address from memory, and as many that
/// read registers (the paths of a stub that tests the mode); more of a kind and none of it
/// is believed.
const MAX_RISC_AT: usize = 2;

/// An empty slot of [`EntryStubs`]' index of riscv64/aarch64 layouts.
const NO_LAYOUT: u32 = u32::MAX;

/// The slot of `addr` in an index of `2^bits` slots (Fibonacci hashing: the product's top bits).
#[inline(always)]
fn index_slot(addr: u64, bits: u32) -> usize {
    (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// The index of `risc`'s layouts by address (see [`EntryStubs`]); empty when there is none.
fn risc_index(risc: &[(u64, RiscLayout)]) -> Vec<u32> {
    let firsts = (0..risc.len()).filter(|&i| i == 0 || risc[i - 1].0 != risc[i].0);
    let n = firsts.clone().count();
    if n == 0 {
        return Vec::new();
    }
    let bits = (2 * n).next_power_of_two().trailing_zeros().max(1);
    let mut index = vec![NO_LAYOUT; 1 << bits];
    let mask = index.len() - 1;
    for i in firsts {
        let mut h = index_slot(risc[i].0, bits);
        while index[h] != NO_LAYOUT {
            h = (h + 1) & mask;
        }
        index[h] = i as u32;
    }
    index
}

/// The layouts a walk found at an address (once: the crossing uses what the walk's start found).
#[derive(Debug, Clone, Copy)]
pub(crate) enum StubAt<'a> {
    /// An i386/x86_64 stub's.
    X86(Layout),
    /// A riscv64/aarch64 stub's (one or more).
    Risc(&'a [(u64, RiscLayout)]),
}

/// Every stub's layouts, by address.
#[derive(Debug, Clone, Default)]
pub struct EntryStubs {
    /// Sorted by address; one layout per address (two paths that disagree there leave none).
    at: Vec<(u64, Layout)>,
    /// riscv64 and aarch64: sorted by address, at most [`MAX_RISC_AT`] per address.
    risc: Vec<(u64, RiscLayout)>,
    /// Where each address's first layout in `risc` is: a table of `2^k` slots (at least twice
    /// as many as addresses), each the index of a first layout or [`NO_LAYOUT`], an address
    /// in the slot its hash names or the next free one after it (a walk looks its stub up in
    /// one or two loads, where a search of `risc` takes a dozen).
    risc_index: Vec<u32>,
    /// How many stubs were read.
    stubs: usize,
    /// The kernel's text, for the interrupted pc of an interrupt of kernel code.
    text: TextRanges,
}

impl EntryStubs {
    /// The stubs starting at `starts` (at most [`MAX_STUBS`]) of an `arch` kernel, whose
    /// code `code(addr, buf)` reads, with `text` its executable sections.
    pub fn read<C>(
        arch: Arch,
        starts: impl IntoIterator<Item = u64>,
        mut code: C,
        text: TextRanges,
    ) -> EntryStubs
    where
        C: FnMut(u64, &mut [u8]) -> bool,
    {
        let bitness = match arch {
            Arch::I386 => 32,
            Arch::X86_64 => 64,
            Arch::Riscv64 | Arch::Aarch64 => return Self::read_risc(arch, starts, code, text),
        };
        let mut at: Vec<(u64, Layout)> = Vec::new();
        let mut stubs = 0;
        for start in starts.into_iter().take(MAX_STUBS) {
            stubs += 1;
            x86::analyze(bitness, start, &mut code, |addr, l| at.push((addr, l)));
        }
        at.sort_by_key(|&(a, _)| a);
        at.dedup();
        // One address reached by two paths that disagree: neither is believed.
        let kept = keep_at_most(at, 1);
        EntryStubs {
            at: kept,
            risc: Vec::new(),
            risc_index: Vec::new(),
            stubs,
            text,
        }
    }

    /// riscv64's and aarch64's stubs. A riscv64 trap keeps the stack pointer whatever the
    /// mode (one reading: the interrupted pc says which); an aarch64 trap from EL0 switches
    /// to `SP_EL1` and leaves the user's in `SP_EL0`, one from EL1 keeps it (a reading for
    /// each). A 2 KiB-aligned aarch64 symbol may be a vector table (`VBAR_EL1`'s alignment):
    /// each of its 16 entries is read too.
    fn read_risc<C>(
        arch: Arch,
        starts: impl IntoIterator<Item = u64>,
        mut code: C,
        text: TextRanges,
    ) -> EntryStubs
    where
        C: FnMut(u64, &mut [u8]) -> bool,
    {
        use machine::Entry;
        let mut risc: Vec<(u64, RiscLayout)> = Vec::new();
        let mut stubs = 0;
        let (abi, entries): (_, &[Entry]) = match arch {
            Arch::Aarch64 => (
                &aarch64::ABI,
                &[
                    Entry {
                        mode: Some(Mode::Kernel),
                        switched: false,
                    },
                    Entry {
                        mode: Some(Mode::User),
                        switched: true,
                    },
                ],
            ),
            _ => (
                &riscv64::ABI,
                &[Entry {
                    mode: None,
                    switched: false,
                }],
            ),
        };
        let vectors = |s: u64| match arch == Arch::Aarch64 && s & 0x7ff == 0 {
            true => 16,
            false => 1,
        };
        let starts = starts
            .into_iter()
            .flat_map(|s| (0..vectors(s)).map(move |k| s + k * 0x80))
            .take(MAX_STUBS);
        for start in starts {
            stubs += 1;
            for &entry in entries {
                let decode = |a: u64| match arch {
                    Arch::Aarch64 => aarch64::decode(a, &mut code),
                    _ => riscv64::decode(a, &mut code),
                };
                machine::analyze(abi, entry, start, decode, |a, l| {
                    if risc.len() < MAX_RISC_LAYOUTS {
                        risc.push((a, l));
                    }
                });
            }
        }
        // By address, and at each the layouts from memory before those that read registers.
        risc.sort_unstable_by_key(|&(a, l)| (a, l.needs_registers(), l));
        risc.dedup();
        let risc = keep_risc(risc);
        EntryStubs {
            at: Vec::new(),
            risc_index: risc_index(&risc),
            risc,
            stubs,
            text,
        }
    }

    /// The layout at `addr` (an instruction of a stub, or a return address of its call).
    #[inline]
    pub fn at(&self, addr: u64) -> Option<Layout> {
        let i = self.at.binary_search_by_key(&addr, |&(a, _)| a).ok()?;
        Some(self.at[i].1)
    }

    /// The riscv64/aarch64 layouts at `addr`.
    #[inline]
    pub fn risc_at(&self, addr: u64) -> &[(u64, RiscLayout)] {
        let index = &self.risc_index;
        if index.is_empty() {
            return &[];
        }
        let mask = index.len() - 1;
        let mut h = index_slot(addr, index.len().trailing_zeros());
        // The index is at most half full: an empty slot ends the probe.
        let i = loop {
            match index[h] {
                NO_LAYOUT => return &[],
                i if self.risc[i as usize].0 == addr => break i as usize,
                _ => h = (h + 1) & mask,
            }
        };
        let n = self.risc[i..]
            .iter()
            .take(2 * MAX_RISC_AT)
            .take_while(|&&(a, _)| a == addr)
            .count();
        &self.risc[i..i + n]
    }

    /// Whether some stub's layout is known at `addr`.
    #[inline]
    pub fn covers(&self, addr: u64) -> bool {
        self.find(addr).is_some()
    }

    /// The layouts at `addr`, of whichever kind of stub is there.
    #[inline]
    pub(crate) fn find(&self, addr: u64) -> Option<StubAt<'_>> {
        if let Some(l) = self.at(addr) {
            return Some(StubAt::X86(l));
        }
        let risc = self.risc_at(addr);
        (!risc.is_empty()).then_some(StubAt::Risc(risc))
    }

    /// How many stubs were read.
    pub fn stubs(&self) -> usize {
        self.stubs
    }

    /// Whether no stub gave a layout.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty() && self.risc.is_empty()
    }

    /// Bytes of memory the layouts hold.
    pub fn heap_bytes(&self) -> usize {
        self.at.capacity() * std::mem::size_of::<(u64, Layout)>()
            + self.risc.capacity() * std::mem::size_of::<(u64, RiscLayout)>()
            + self.risc_index.capacity() * std::mem::size_of::<u32>()
    }

    /// Whether `ip` may be the interrupted pc of kernel code.
    fn is_kernel_text(&self, ip: u64) -> bool {
        ip != 0 && self.text.holds_address(ip)
    }
}

/// Layouts sorted by address, at most `n` at any address (more: none there).
fn keep_at_most<L: Copy>(at: Vec<(u64, L)>, n: usize) -> Vec<(u64, L)> {
    let mut kept: Vec<(u64, L)> = Vec::with_capacity(at.len());
    let mut i = 0;
    while i < at.len() {
        let j = i + at[i..].iter().take_while(|(a, _)| *a == at[i].0).count();
        if j - i <= n {
            kept.extend_from_slice(&at[i..j]);
        }
        i = j;
    }
    kept.shrink_to_fit();
    kept
}

/// riscv64/aarch64 layouts sorted by address (those from memory first at each), at most
/// [`MAX_RISC_AT`] of each kind at any address (more: none of that kind there).
fn keep_risc(at: Vec<(u64, RiscLayout)>) -> Vec<(u64, RiscLayout)> {
    let mut kept: Vec<(u64, RiscLayout)> = Vec::with_capacity(at.len());
    let mut i = 0;
    while i < at.len() {
        let (a, regs) = (at[i].0, at[i].1.needs_registers());
        let same = |&(b, l): &(u64, RiscLayout)| b == a && l.needs_registers() == regs;
        let j = i + at[i..].iter().take_while(|x| same(x)).count();
        if j - i <= MAX_RISC_AT {
            kept.extend_from_slice(&at[i..j]);
        }
        i = j;
    }
    kept.shrink_to_fit();
    kept
}

/// The interrupted context behind a CPU frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interrupted {
    /// Where the frame (its ip) lies.
    pub at: u64,
    pub ip: u64,
    pub sp: u64,
    pub fp: u64,
    /// The return-address register (riscv64, aarch64), where the stub saved it or left it.
    pub ra: Option<u64>,
    pub user: bool,
}

/// Why a stub's layout gave no crossing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotCrossed {
    /// The frame's words could not be read (or lay off the stack).
    Unreadable,
    /// They are not a frame the CPU could have pushed.
    NoFrame,
}

/// The registers of the walk where it reached a stub: the stack pointer, the frame-pointer
/// register, and where the stack's span ends (nothing at or beyond it is read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AtStub {
    pub sp: u64,
    pub fp: u64,
    /// The return-address register, where the walk knows it (its first frame).
    pub ra: Option<u64>,
    pub end: u64,
}

/// The context the CPU's frame holds, found by `layout` from where the walk stands (`at`):
/// the frame at the stub's entry, or one word above it (the error code some exceptions
/// push). `kernel_cs` is the kernel's code selector (0: unknown, any ring-0 selector).
pub(crate) fn cross_x86<R>(
    stubs: &EntryStubs,
    layout: Layout,
    at_stub: AtStub,
    width: PtrWidth,
    kernel_cs: u16,
    read: &mut R,
) -> Result<Interrupted, NotCrossed>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let AtStub { sp, fp, end, .. } = at_stub;
    let w = width.bytes() as u64;
    // A word of the stack being walked, `[sp, end)`.
    let word = |addr: u64, read: &mut R| -> Option<u64> {
        (addr >= sp && addr.checked_add(w).is_some_and(|e| e <= end)).then_some(())?;
        let mut b = [0u8; 8];
        read(addr, &mut b[..w as usize]).then(|| width.word(&b))
    };
    let entry = match layout.frame {
        FrameAt::Sp(n) => sp.checked_add(n).ok_or(NotCrossed::Unreadable)?,
        FrameAt::Saved { slot, add } => {
            let saved = sp
                .checked_add(slot)
                .and_then(|a| word(a, read))
                .ok_or(NotCrossed::Unreadable)?;
            saved.wrapping_add(add) & width.max_addr()
        }
    };
    // Whether some place held words to check (else the frame could not be read at all).
    let mut checked = false;
    // The six words both places span, in one read where they can be (a sample's reads are
    // its cost); word by word where they cannot (the top of a stack).
    let mut six = [0u8; 48];
    let span = &mut six[..6 * w as usize];
    let on_stack = entry >= sp && entry.checked_add(6 * w).is_some_and(|e| e <= end);
    let all = (on_stack && read(entry, span)).then(|| {
        let span = &*span;
        std::array::from_fn::<u64, 6, _>(|k| width.word(&span[k * w as usize..]))
    });
    for (n, at) in [entry, entry.wrapping_add(w)].into_iter().enumerate() {
        let got: [Option<u64>; 5] = match all {
            Some(v) => std::array::from_fn(|k| Some(v[n + k])),
            None => std::array::from_fn(|k| word(at.wrapping_add(k as u64 * w), read)),
        };
        // An i386 interrupt of ring 0 pushes three words: the two above may be off the stack.
        let words = match got {
            [Some(a), Some(b), Some(c), Some(d), Some(e)] => [a, b, c, d, e],
            [Some(a), Some(b), Some(c), ..] if width == PtrWidth::W4 => [a, b, c, 0, 0],
            _ => continue,
        };
        checked = true;
        let (ip, cs, flags, user_sp, ss) = (words[0], words[1], words[2], words[3], words[4]);
        if !flags_ok(flags) {
            continue;
        }
        // x86_64 pushes selectors zero-extended; i386 may leave the upper half as it was.
        let cs = match width {
            PtrWidth::W8 if cs >> 16 != 0 => continue,
            _ => cs & 0xffff,
        };
        let fp = match layout.fp {
            FpAt::Unchanged => Some(fp),
            FpAt::Saved(below) => entry.checked_sub(below).and_then(|a| word(a, read)),
            FpAt::Lost => Some(0),
        };
        let Some(fp) = fp else { continue };
        match cs & 3 {
            3 => {
                let ss_ok = match width {
                    PtrWidth::W8 => ss >> 16 == 0 && ss & 3 == 3,
                    PtrWidth::W4 => ss & 3 == 3,
                };
                let ip_ok = ip != 0 && (width == PtrWidth::W4 || ip < 0x0000_8000_0000_0000);
                if ss_ok && ip_ok {
                    return Ok(Interrupted {
                        at,
                        ip,
                        sp: user_sp,
                        fp,
                        ra: None,
                        user: true,
                    });
                }
            }
            0 if cs > 3 && (kernel_cs == 0 || cs == u64::from(kernel_cs)) => {
                if !stubs.is_kernel_text(ip) {
                    continue;
                }
                // x86_64 always pushes the stack pointer; i386 from ring 0 does not: the
                // interrupted stack goes on right above the frame.
                let sp = match width {
                    PtrWidth::W8 if user_sp > at => user_sp,
                    PtrWidth::W8 => continue,
                    PtrWidth::W4 => at + 3 * w,
                };
                return Ok(Interrupted {
                    at,
                    ip,
                    sp,
                    fp,
                    ra: None,
                    user: false,
                });
            }
            _ => {}
        }
    }
    Err(match checked {
        true => NotCrossed::NoFrame,
        false => NotCrossed::Unreadable,
    })
}

/// Whether `flags` can be flags the CPU pushed: bit 1 set, bits 3, 5 and 15 clear, nothing
/// above bit 21 (ID).
fn flags_ok(flags: u64) -> bool {
    flags & 0x2 != 0 && flags & (1 << 3 | 1 << 5 | 1 << 15) == 0 && flags >> 22 == 0
}

#[cfg(test)]
mod tests;
