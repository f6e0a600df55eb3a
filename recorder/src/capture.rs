//! What the sampling callback does once a sample is due: read the stack and frame pointers
//! and the privilege level, the word at `[SP]`, the caller's return address when the block
//! starts without a frame record of its own, and the frame-pointer chain, into a record ready
//! to encode. The plugin supplies QEMU's register and memory readers; the tests fake them.

use kern_profile_format::{SampleRecord, StopCounts, StopReason};
use kern_profile_unwind::{walk_across, Crossings, EntryState, PtrWidth};

use crate::window::WindowReader;

/// The registers a sample reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reg {
    StackPointer,
    FramePointer,
    /// x86 `cs`, whose low two bits are the privilege level.
    CodeSegment,
}

impl Reg {
    pub const ALL: [Reg; 3] = [Reg::StackPointer, Reg::FramePointer, Reg::CodeSegment];

    /// The names QEMU gives the register on i386 and x86_64 guests (`esp` or `rsp`, ...).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            Reg::StackPointer => &["rsp", "esp"],
            Reg::FramePointer => &["rbp", "ebp"],
            Reg::CodeSegment => &["cs"],
        }
    }
}

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
    width: PtrWidth,
    window: WindowReader,
    /// Return addresses, as many as the depth; a caller read from the stack counts.
    frames: Box<[u64]>,
    stops: StopCounts,
}

impl Capture {
    /// A capture of at most `depth` (at least 1) return addresses per sample.
    pub fn new(width: PtrWidth, depth: u32) -> Self {
        Capture {
            width,
            window: WindowReader::new(width.max_addr()),
            frames: vec![0; depth.max(1) as usize].into_boxed_slice(),
            stops: StopCounts::default(),
        }
    }

    /// Unwind stops of every sample taken so far.
    pub fn stops(&self) -> &StopCounts {
        &self.stops
    }

    /// A sample at `site`, reading registers through `regs` and guest memory through
    /// `mem(addr, out)`, which fills `out` and returns whether the memory was readable.
    pub fn take<R, M>(&mut self, site: &SampleSite, regs: &mut R, mut mem: M) -> SampleRecord<'_>
    where
        R: RegisterReader,
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let Capture {
            width,
            window,
            frames,
            stops,
        } = self;
        let (width, w) = (*width, width.bytes());
        let sp = regs.read(Reg::StackPointer).unwrap_or(0) & width.max_addr();
        let fp = regs.read(Reg::FramePointer).unwrap_or(0) & width.max_addr();
        let user = regs.read(Reg::CodeSegment).is_some_and(|cs| cs & 3 == 3);
        // Guest memory changed since the last sample.
        window.invalidate();
        let mut word = [0u8; 8];
        let mut read_word = |addr: u64| {
            window
                .read(addr, &mut word[..w], &mut mem)
                .then(|| width.word(&word))
        };
        let sp_word = read_word(sp);
        // A block entered without its own frame record: the caller's return address is on
        // the stack, and the walk from FP starts at the caller's caller.
        let caller = site.entry.caller_offset(width).and_then(|off| match off {
            0 => sp_word,
            off => read_word(sp.wrapping_add(off)),
        });
        let skip = caller.is_some() as usize;
        if let Some(ret) = caller {
            frames[0] = ret;
        }
        let depth = frames.len() - skip;
        // Across kernel entries and stack switches (unwind's `walk_across`).
        let walk = walk_across(
            sp,
            fp,
            width,
            depth,
            Crossings::ALL,
            |addr, out| window.read(addr, out, &mut mem),
            &mut frames[skip..],
        );
        stops.add(walk.stop);
        SampleRecord {
            vcpu: site.vcpu,
            user,
            stop: walk.stop,
            time_ns: site.time_ns,
            icount: site.icount,
            pc: site.pc,
            sp,
            sp_word,
            frames: &frames[..skip + walk.frames],
            entry_resolved: caller.is_some(),
        }
    }

    /// A sample at `site` of a vCPU whose registers QEMU does not expose: no stack.
    pub fn take_without_registers(&mut self, site: &SampleSite) -> SampleRecord<'_> {
        self.stops.add(StopReason::Unreadable);
        SampleRecord {
            vcpu: site.vcpu,
            user: false,
            stop: StopReason::Unreadable,
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

#[cfg(test)]
mod tests;
