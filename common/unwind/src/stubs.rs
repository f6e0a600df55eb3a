//! Kernel entry stubs that leave no unwind information: where, at each of their instructions
//! and calls, the frame the CPU pushed at the entry lies, and the crossing from it into the
//! interrupted context (issue 38; docs/walk-design.md sections 2 and 3).
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
//! The stubs are the kernel ELF's code symbols where its tables have no row: which of them
//! are entries, the check of the frame decides. (The IDT, `stvec` and `VBAR_EL1` name the
//! entries themselves; the plugin does not read them yet: docs/walk-design.md, status.)

use kern_profile_format::Arch;

use crate::tables::TextRanges;
use crate::PtrWidth;

mod x86;

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

/// Every stub's layouts, by address.
#[derive(Debug, Clone, Default)]
pub struct EntryStubs {
    /// Sorted by address; one layout per address (two paths that disagree there leave none).
    at: Vec<(u64, Layout)>,
    /// How many stubs were read.
    stubs: usize,
    /// The kernel's text, for the interrupted pc of an interrupt of kernel code.
    text: TextRanges,
}

impl EntryStubs {
    /// The stubs starting at `starts` (at most [`MAX_STUBS`]) of an `arch` kernel, whose
    /// code `code(addr, buf)` reads, with `text` its executable sections. Only x86 stubs are
    /// read for now; other architectures get none.
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
            Arch::Riscv64 | Arch::Aarch64 => return EntryStubs::default(),
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
        let mut kept: Vec<(u64, Layout)> = Vec::with_capacity(at.len());
        let mut i = 0;
        while i < at.len() {
            let j = i + at[i..].iter().take_while(|(a, _)| *a == at[i].0).count();
            if j == i + 1 {
                kept.push(at[i]);
            }
            i = j;
        }
        kept.shrink_to_fit();
        EntryStubs {
            at: kept,
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

    /// How many stubs were read.
    pub fn stubs(&self) -> usize {
        self.stubs
    }

    /// Whether no stub gave a layout.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Bytes of memory the layouts hold.
    pub fn heap_bytes(&self) -> usize {
        self.at.capacity() * std::mem::size_of::<(u64, Layout)>()
    }

    /// Whether `ip` may be the interrupted pc of kernel code.
    fn is_kernel_text(&self, ip: u64) -> bool {
        ip != 0 && self.text.holds_address(ip)
    }
}

/// The interrupted context behind a CPU frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interrupted {
    /// Where the frame (its ip) lies.
    pub at: u64,
    pub ip: u64,
    pub sp: u64,
    pub fp: u64,
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
    let AtStub { sp, fp, end } = at_stub;
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
