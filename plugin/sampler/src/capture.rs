//! What the sampling callback does once a sample is due: read the stack and frame pointers
//! and the privilege level, the word at `[SP]`, the caller's return address when the block
//! starts without a frame record of its own, and the frame-pointer chain, into a record ready
//! to encode. The plugin supplies QEMU's register and memory readers; the tests fake them.

use kern_profile_arch::guest;
use kern_profile_arch::registers::{clean_return_address, cpu_mode};
use kern_profile_format::{
    Arch, CpuMode, Privilege, SampleExtras, SampleRecord, StopCounts, StopReason, WalkEnd,
};
use std::sync::Arc;

use kern_profile_unwind::stubs::SysReg;
use kern_profile_unwind::{
    walk_guest, walk_tables_at_sample, Crossings, EntryState, KernelOs, PtrWidth, StartRegs,
    UnwindTables,
};

use crate::window::WindowReader;

/// The registers a sample reads, by role; kern-profile-arch's [`Role::names`](kern_profile_arch::Role::names) tells their names per
/// architecture.
pub use kern_profile_arch::Role as Reg;

/// Reads the sampled vCPU's registers.
pub trait RegisterReader {
    /// The register's value (little-endian, at most 8 bytes), or `None` when QEMU could not
    /// read it.
    fn read(&mut self, reg: Reg) -> Option<u64>;
}

/// Where the vCPU is when the sample is due, from the trigger and the translated block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleSite {
    pub vcpu: u32,
    /// The instruction the budget ran out at.
    pub pc: u64,
    /// The instruction whose registers the sample reads: the block's first (a block never
    /// spans a call or a return, so the frames above it are the sampled instruction's; the
    /// unwind tables' rules for the stack pointer are the first instruction's).
    pub regs_pc: u64,
    /// The frame state at the entry of the block being run.
    pub entry: EntryState,
    /// The vCPU's instruction count up to the sampled instruction.
    pub icount: u64,
    /// Host time since the plugin started.
    pub time_ns: u64,
}

/// One vCPU's sampling state: buffers reused from sample to sample, and its stop counts.
#[derive(Debug, Clone)]
pub struct Capture {
    arch: Arch,
    width: PtrWidth,
    window: WindowReader,
    /// Return addresses, as many as the depth; a caller read from the stack counts.
    frames: Box<[u64]>,
    stops: StopCounts,
    /// The CPU mode last read, with the page-table base and the host time it was read at:
    /// once translation is on, it stays on but for rare switches, so the mode registers are
    /// read again only when the page-table base changes or [`MODE_TTL_NS`] has passed (two
    /// register reads fewer per sample on x86). Boot code turns translation on without
    /// a new page-table base, so a mode without translation is never kept.
    mode_cache: Option<(CpuMode, Option<u64>, u64)>,
    /// Reads no page-table base and no CPU mode ([`Capture::stack_only`]).
    stack_only: bool,
    /// The kernel's ORC and CFI tables ([`Capture::with_tables`]).
    tables: Option<Arc<UnwindTables>>,
    /// Which kernel it is, for Linux's layouts ([`Capture::with_kernel_os`]).
    kernel_os: KernelOs,
}

/// How long a CPU mode read stays good, in host ns.
const MODE_TTL_NS: u64 = 1_000_000;

impl Capture {
    /// A capture of at most `depth` (at least 1) return addresses per sample of an `arch`
    /// guest.
    pub fn new(arch: Arch, depth: u32) -> Self {
        let width = PtrWidth::from_bytes(arch.ptr_width() as usize).unwrap_or(PtrWidth::W8);
        Capture {
            arch,
            width,
            window: WindowReader::new(width.max_addr()),
            frames: vec![0; depth.max(1) as usize].into_boxed_slice(),
            stops: StopCounts::default(),
            mode_cache: None,
            stack_only: false,
            tables: None,
            kernel_os: KernelOs::Unknown,
        }
    }

    /// A capture that walks kernel stacks with the kernel's unwind tables where they cover
    /// the sampled pc (kernels without frame pointers), with the frame-pointer walk
    /// elsewhere.
    pub fn with_tables(self, tables: Option<Arc<UnwindTables>>) -> Self {
        Capture { tables, ..self }
    }

    /// A capture whose walks take Linux's layouts (encoded `pt_regs` and the like) as the
    /// kernel `os` allows: the plugin learns it from `elf=`, and without it the kernel is
    /// [`KernelOs::Unknown`] (see kern-profile-unwind's `Crossings::maybe_linux`).
    pub fn with_kernel_os(self, kernel_os: KernelOs) -> Self {
        Capture { kernel_os, ..self }
    }

    /// A capture for callers that need the stack, the privilege and the return-address
    /// register but not the CPU mode or the page-table base (allocation hooks): one register
    /// read fewer per capture on x86 and aarch64, more when the mode is due again.
    pub fn stack_only(self) -> Self {
        Capture {
            stack_only: true,
            ..self
        }
    }

    /// Unwind stops of every sample taken so far.
    pub fn stops(&self) -> &StopCounts {
        &self.stops
    }

    /// A sample at `site`, reading registers through `regs` and guest memory through
    /// `mem(addr, out)`, which fills `out` and returns whether the memory was readable.
    ///
    /// Besides the record, the version-2 extras: privilege, CPU mode, the return-address
    /// register and the page-table base, each from the registers `regs` has.
    pub fn take<R, M>(
        &mut self,
        site: &SampleSite,
        regs: &mut R,
        mut mem: M,
    ) -> (SampleRecord<'_>, SampleExtras)
    where
        R: RegisterReader,
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let Capture {
            arch,
            width,
            window,
            frames,
            stops,
            mode_cache,
            stack_only,
            tables,
            kernel_os,
        } = self;
        let (arch, width, w) = (*arch, *width, width.bytes());
        let sp = regs.read(Reg::StackPointer).unwrap_or(0) & width.max_addr();
        let fp = regs.read(Reg::FramePointer).unwrap_or(0) & width.max_addr();
        let privilege_reg = regs.read(Reg::Privilege);
        let extras = match *stack_only {
            true => stack_extras(arch, width, privilege_reg, regs),
            false => extras(arch, width, privilege_reg, regs, mode_cache, site.time_ns),
        };
        let user = extras.privilege == Privilege::User;
        // x86 in ring 0: the sampled `cs` is the kernel's selector, by which interrupts of
        // kernel code are recognised.
        let kernel_cs = privilege_reg.and_then(|v| guest(arch).kernel_selector(v));
        // Guest memory changed since the last sample; a fresh read budget.
        window.start_sample();
        let mut word = [0u8; 8];
        let sp_word = window
            .read(sp, &mut word[..w], &mut mem)
            .then(|| width.word(&word));
        // Across kernel entries and stack switches (unwind's `walk_across`).
        let crossings = Crossings {
            kernel_cs: kernel_cs.unwrap_or(0) as u16,
            user_mode: user,
            ..Crossings::ALL.for_kernel(*kernel_os)
        };
        // The kernel's tables, where they cover the pc: whole stacks without frame
        // pointers, the caller of a frameless entry included.
        let start = StartRegs {
            pc: site.regs_pc,
            sp,
            fp,
            ra: extras.return_register,
        };
        let by_tables = tables.as_deref().and_then(|t| {
            let read = |addr: u64, out: &mut [u8]| window.read(addr, out, &mut mem);
            // Read only for a sample in an entry stub that has not saved the interrupted
            // context yet: the others read no more registers.
            let sysregs = |r: SysReg| regs.read(trap_role(r));
            walk_tables_at_sample(t, start, frames.len(), crossings, read, sysregs, frames)
        });
        // Frames kept, and whether the sampled function's caller was found despite a missing
        // frame record (the tables always find it).
        let (stop, kept, entry_resolved) = match by_tables {
            Some(walk) => (walk.end(), walk.frames, true),
            None => {
                let mut read_word = |addr: u64| {
                    window
                        .read(addr, &mut word[..w], &mut mem)
                        .then(|| width.word(&word))
                };
                // A block entered without its own frame record: the caller's return address
                // is on the stack, and the walk from FP starts at the caller's caller.
                let caller = site.entry.caller_offset(width).and_then(|off| match off {
                    0 => sp_word,
                    off => read_word(sp.wrapping_add(off)),
                });
                let skip = caller.is_some() as usize;
                if let Some(ret) = caller {
                    frames[0] = ret;
                }
                let depth = frames.len() - skip;
                let walk = walk_guest(
                    arch,
                    sp,
                    fp,
                    depth,
                    crossings,
                    |addr, out| window.read(addr, out, &mut mem),
                    &mut frames[skip..],
                );
                (walk.end(), skip + walk.frames, caller.is_some())
            }
        };
        let stop = stop_of(stop, window);
        stops.add_end(stop);
        let rec = SampleRecord {
            vcpu: site.vcpu,
            user,
            stop,
            time_ns: site.time_ns,
            icount: site.icount,
            pc: site.pc,
            sp,
            sp_word,
            frames: &frames[..kept],
            entry_resolved,
        };
        (rec, extras)
    }

    /// A sample at `site` of a vCPU whose registers QEMU does not expose: no stack.
    pub fn take_without_registers(&mut self, site: &SampleSite) -> SampleRecord<'_> {
        self.stops.add(StopReason::Unreadable);
        SampleRecord {
            vcpu: site.vcpu,
            user: false,
            stop: StopReason::Unreadable.into(),
            time_ns: site.time_ns,
            icount: site.icount,
            pc: site.pc,
            sp: 0,
            sp_word: None,
            frames: &[],
            entry_resolved: false,
        }
    }
}

/// The extras a sample's record carries: a record whose frames start with the caller
/// (`entry_resolved`: a table walk put it there, from the return-address register where the
/// tables said it was there) carries no return-address register, which readers would add
/// again.
pub fn record_extras(rec: &SampleRecord<'_>, extras: SampleExtras) -> SampleExtras {
    match rec.entry_resolved {
        true => SampleExtras {
            return_register: None,
            ..extras
        },
        false => extras,
    }
}

/// The register of a trap's `r`.
fn trap_role(r: SysReg) -> Reg {
    match r {
        SysReg::TrapPc => Reg::TrapPc,
        SysReg::Status => Reg::SavedState,
        SysReg::Scratch => Reg::Scratch,
        SysReg::UserSp => Reg::OtherStackPointer,
    }
}

/// How a walk ended, as counted: an unreadable word after the sample spent its read budget
/// is the budget's stop.
fn stop_of(end: WalkEnd, window: &WindowReader) -> WalkEnd {
    match end.reason() {
        Some(StopReason::Unreadable) if window.budget_spent() => {
            end.with_reason(StopReason::ReadBudget)
        }
        _ => end,
    }
}

/// The version-2 extras, from the registers `regs` has (a register it cannot read costs
/// nothing: the plugin reads only those QEMU exposes).
fn extras<R: RegisterReader>(
    arch: Arch,
    width: PtrWidth,
    privilege_reg: Option<u64>,
    regs: &mut R,
    mode_cache: &mut Option<(CpuMode, Option<u64>, u64)>,
    now_ns: u64,
) -> SampleExtras {
    let page_table_base = regs.read(Reg::PageTableBase);
    let mode = match *mode_cache {
        _ if guest(arch).mode_in_page_table_base() => cpu_mode(arch, page_table_base, None),
        Some((mode, base, at))
            if base == page_table_base && now_ns.wrapping_sub(at) < MODE_TTL_NS =>
        {
            mode
        }
        _ => {
            let mode = cpu_mode(
                arch,
                regs.read(Reg::ModeControl),
                regs.read(Reg::ModeExtended),
            );
            let translating = matches!(mode, CpuMode::Paging | CpuMode::Long);
            *mode_cache = translating.then_some((mode, page_table_base, now_ns));
            mode
        }
    };
    SampleExtras {
        mode,
        page_table_base,
        ..stack_extras(arch, width, privilege_reg, regs)
    }
}

/// The extras a stack needs: the privilege and the return-address register.
fn stack_extras<R: RegisterReader>(
    arch: Arch,
    width: PtrWidth,
    privilege_reg: Option<u64>,
    regs: &mut R,
) -> SampleExtras {
    SampleExtras {
        privilege: privilege_reg.map_or(Privilege::Unknown, |v| {
            kern_profile_arch::registers::privilege(arch, v)
        }),
        return_register: regs
            .read(Reg::ReturnAddress)
            .map(|ra| clean_return_address(arch, ra & width.max_addr())),
        ..SampleExtras::default()
    }
}

#[cfg(test)]
mod tests;
