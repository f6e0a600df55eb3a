//! The crossing of a riscv64 or aarch64 stub into the context it interrupted: the values its
//! layouts say where they are, read from the stack being walked (what the stub saved) or,
//! at the sample's own first frame where the stub has saved nothing yet, from the CPU's
//! system registers as they are at the sample; believed only if they agree with each other
//! and with the kernel's text.

use kern_profile_format::Arch;

use super::{AtStub, EntryStubs, Interrupted, Loc, Mode, NotCrossed, RiscLayout, SysReg};

/// Reads a system register at the sample (`None`: QEMU could not).
pub(crate) type SysRegs<'a> = &'a mut dyn FnMut(SysReg) -> Option<u64>;

/// The context a riscv64 or aarch64 stub saved, found from where the walk stands by the
/// `layouts` there: the reading whose values pass the checks (the pc and stack pointer
/// readable on the stack being walked, aligned; the pc kernel text for an interrupt of the
/// kernel, or not for one of a program, whose stack is not the one walked; the saved mode,
/// where the stub saved it, the same).
/// Two readings that pass and differ give none: the walk does not guess.
///
/// The layouts that read system registers ([`RiscLayout::needs_registers`]) are tried only
/// when those from memory give nothing and `sysregs` is given (the walk's first frame, at
/// the sampled pc), and must have the saved mode, which must agree with the pc.
pub(crate) fn cross_risc<R>(
    stubs: &EntryStubs,
    arch: Arch,
    layouts: &[(u64, RiscLayout)],
    at_stub: AtStub,
    read: &mut R,
    sysregs: Option<SysRegs<'_>>,
) -> Result<Interrupted, NotCrossed>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    // Those from memory come first at an address.
    let n = layouts
        .iter()
        .take_while(|(_, l)| !l.needs_registers())
        .count();
    let (from_memory, from_registers) = layouts.split_at(n);
    let mut values = Values::new(at_stub, from_memory, read, None);
    let memory = check(stubs, arch, from_memory, &mut values);
    let (Err(e), Some(sys), false) = (memory, sysregs, from_registers.is_empty()) else {
        return memory;
    };
    let mut values = Values::new(at_stub, &[], values.read, Some(sys));
    match check(stubs, arch, from_registers, &mut values) {
        Ok(i) => Ok(i),
        Err(NotCrossed::Unreadable) => Err(e),
        Err(NotCrossed::NoFrame) => Err(NotCrossed::NoFrame),
    }
}

/// The readings of `layouts` that pass, as [`cross_risc`] says.
fn check<R>(
    stubs: &EntryStubs,
    arch: Arch,
    layouts: &[(u64, RiscLayout)],
    values: &mut Values<'_, '_, R>,
) -> Result<Interrupted, NotCrossed>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let AtStub { sp, fp, ra, end } = values.at;
    let pc_align = if arch == Arch::Aarch64 { 3 } else { 1 };
    let (mut found, mut checked) = (None::<Interrupted>, false);
    for &(_, l) in layouts {
        let (Some(Some(ip)), Some(Some(isp))) = (values.get(l.pc, None), values.get(l.sp, None))
        else {
            continue;
        };
        checked = true;
        let ifp = values.get(l.fp, Some(fp)).flatten().unwrap_or(0);
        let ira = values.get(l.ra, ra).flatten();
        let saved = values
            .get(l.status, None)
            .flatten()
            .map(|s| status_mode(arch, s));
        // The registers at the sample may be anyone's: the saved mode must be there to
        // check the pc against.
        if l.needs_registers() && saved.is_none() {
            continue;
        }
        let mode = match (stubs.text.is_known(), saved) {
            (true, _) if stubs.is_kernel_text(ip) => Mode::Kernel,
            (true, _) => Mode::User,
            (false, Some(Some(m))) => m,
            (false, _) => match l.mode {
                Some(m) => m,
                None => continue,
            },
        };
        if l.mode.is_some_and(|m| m != mode) || saved.is_some_and(|s| s != Some(mode)) {
            continue;
        }
        // A program's stack is never the kernel stack being walked.
        let user_ok = mode == Mode::Kernel || (ip < 1 << 47 && !(sp..end).contains(&isp));
        if ip == 0 || ip & pc_align != 0 || isp == 0 || isp & 7 != 0 || !user_ok {
            continue;
        }
        let i = Interrupted {
            at: sp,
            ip,
            sp: isp,
            fp: ifp,
            ra: ira,
            user: mode == Mode::User,
        };
        match found {
            Some(f) if f != i => return Err(NotCrossed::NoFrame),
            _ => found = Some(i),
        }
    }
    found.ok_or(match checked {
        true => NotCrossed::NoFrame,
        false => NotCrossed::Unreadable,
    })
}

/// Where the values of the layouts are read: the stack being walked, and at the first
/// frame the system registers (each read at most once: a read is a call into QEMU).
struct Values<'r, 's, R> {
    at: AtStub,
    read: &'r mut R,
    /// The lowest slot the layouts name, read first: `(address, word)`.
    first: Option<(u64, Option<u64>)>,
    sys: Option<SysRegs<'s>>,
    cache: [Option<Option<u64>>; 4],
}

impl<'r, 's, R> Values<'r, 's, R>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    /// The values of `layouts` from `at`. The lowest slot they name on the stack is read
    /// first (where they name more than one): a reader that keeps what follows a read, as
    /// the plugin's window over guest memory, then holds the rest of the trap frame (one
    /// fetch for the frame rather than one per slot below the last read), where a read of
    /// the whole span would copy it in full.
    fn new(
        at: AtStub,
        layouts: &[(u64, RiscLayout)],
        read: &'r mut R,
        sys: Option<SysRegs<'s>>,
    ) -> Self {
        let (mut low, mut slots) = (i64::MAX, 0usize);
        for (_, l) in layouts {
            for loc in [l.pc, l.sp, l.fp, l.ra, l.status] {
                // Below the stack pointer: off the stack, never read.
                if let Loc::Slot { off: off @ 0.., .. } = loc {
                    (low, slots) = (low.min(off), slots + 1);
                }
            }
        }
        let mut v = Values {
            at,
            read,
            first: None,
            sys,
            cache: [None; 4],
        };
        if slots > 1 {
            v.first = v.on_stack(low).map(|a| (a, v.word(a)));
        }
        v
    }

    /// A slot's address, where the word lies on the stack being walked, `[sp, end)`.
    fn on_stack(&self, off: i64) -> Option<u64> {
        let AtStub { sp, end, .. } = self.at;
        let a = sp.checked_add_signed(off)?;
        (a >= sp && a.checked_add(8).is_some_and(|e| e <= end)).then_some(a)
    }

    fn word(&mut self, a: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        (self.read)(a, &mut b).then(|| u64::from_le_bytes(b))
    }

    /// `loc`'s value (`reg`: its own register's); `None`: unreadable, `Some(None)`: lost.
    fn get(&mut self, loc: Loc, reg: Option<u64>) -> Option<Option<u64>> {
        Some(match loc {
            Loc::Lost => None,
            Loc::Reg => reg,
            Loc::SpPlus(k) => Some(self.at.sp.checked_add_signed(k)?),
            Loc::Slot { off, add } => {
                let a = self.on_stack(off)?;
                let w = match self.first {
                    Some((at, w)) if at == a => w?,
                    _ => self.word(a)?,
                };
                Some(w.wrapping_add(add as u64))
            }
            // Past the first frame the registers are no longer the entry's: unreadable, as
            // is a register QEMU could not read.
            Loc::Sys(r) => {
                let sys = self.sys.as_mut()?;
                let v = *self.cache[r as usize].get_or_insert_with(|| sys(r));
                Some(v?)
            }
        })
    }
}

/// The mode a saved `sstatus` (SPP, bit 8) or `SPSR_EL1` (M[4:0]: EL0t, or EL1t/EL1h) says;
/// `None` for any other.
pub(super) fn status_mode(arch: Arch, status: u64) -> Option<Mode> {
    match arch {
        Arch::Riscv64 if status & 0x100 != 0 => Some(Mode::Kernel),
        Arch::Riscv64 => Some(Mode::User),
        Arch::Aarch64 => match status & 0x1f {
            0 => Some(Mode::User),
            4 | 5 => Some(Mode::Kernel),
            _ => None,
        },
        _ => None,
    }
}
