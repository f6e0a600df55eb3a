//! `switches=`: each task switch, seen at the first instruction of the kernel's switch
//! function (Linux's `__switch_to_asm`, `cpu_switch_to`, `__switch_to`), where the stack is
//! still the leaving task's: the leaving and the next task from the function's arguments,
//! the leaving task's state (runnable or blocked), and its stack (format record kind 10),
//! followed by the next task's record (kind 9).

use kern_profile_format::{Arch, LeftAs, SwitchRecord, TaskRecord};
use kern_profile_unwind::{EntryState, KernelOs};

use crate::alloc_hooks::args::{read, Location, RegisterFile};
use crate::capture::{Capture, RegisterReader, SampleSite};
use crate::task::TaskReader;
use kern_profile_unwind::UnwindTables;
use std::sync::Arc;

pub mod function;

/// Where a kernel switches tasks, and how to read a switch there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchSpec {
    /// The switch function's first instruction.
    pub entry: u64,
    /// Where its arguments, the leaving task and the next one, are at that instruction.
    pub prev: Location,
    pub next: Location,
}

/// One vCPU's switch reading: its own capture, so that the walks of switches count apart
/// from the samples' (their stop reasons are the samples').
#[derive(Debug, Clone)]
pub struct SwitchReader {
    spec: SwitchSpec,
    arch: Arch,
    capture: Capture,
    /// The frames of the record being made, reused from switch to switch.
    frames: Vec<u64>,
}

impl SwitchReader {
    pub fn new(spec: SwitchSpec, arch: Arch, depth: u32) -> Self {
        SwitchReader {
            spec,
            arch,
            capture: Capture::new(arch, depth).stack_only(),
            frames: Vec::new(),
        }
    }

    /// Walks with the kernel's unwind tables, and Linux's layouts, as samples do.
    pub fn with_tables(mut self, tables: Option<Arc<UnwindTables>>, os: KernelOs) -> Self {
        self.capture = self.capture.with_tables(tables).with_kernel_os(os);
        self
    }

    pub fn spec(&self) -> &SwitchSpec {
        &self.spec
    }

    /// The vCPU is at the switch function's entry: the switch record, then the next task's.
    /// `icount` is the vCPU's instruction count when it counts them.
    pub fn at_switch<G, M>(
        &mut self,
        vcpu: u32,
        time_ns: u64,
        icount: Option<u64>,
        guest: &mut G,
        mut mem: M,
        tasks: &mut TaskReader,
    ) -> (SwitchRecord, TaskRecord)
    where
        G: RegisterReader + RegisterFile,
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let entry = self.spec.entry;
        // At the entry the caller's return address is at [SP] on x86; riscv64 and aarch64
        // have it in ra/x30.
        let x86 = kern_profile_arch::guest(self.arch).return_address_on_stack();
        let site = SampleSite {
            vcpu,
            pc: entry,
            regs_pc: entry,
            entry: match x86 {
                true => EntryState::BeforePush,
                false => EntryState::Framed,
            },
            icount: icount.unwrap_or(0),
            time_ns,
        };
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        let (rec, extras) = self.capture.take(&site, guest, &mut mem);
        if !x86 && !rec.entry_resolved {
            frames.extend(extras.return_register);
        }
        frames.extend_from_slice(rec.frames);
        let (sp, stop) = (rec.sp, rec.stop);
        let mut arg = |loc| read(loc, self.arch, sp, guest, &mut mem).unwrap_or(0);
        let (prev, next) = (arg(self.spec.prev), arg(self.spec.next));
        let left_as = match tasks.state(prev, &mut mem) {
            Some(0) => LeftAs::Runnable,
            Some(_) => LeftAs::Blocked,
            None => LeftAs::Unknown,
        };
        let switch = SwitchRecord {
            vcpu,
            time_ns,
            icount,
            prev,
            next,
            left_as,
            stop,
            pc: entry,
            frames,
        };
        let task = tasks.switched_to(next, time_ns, vcpu, &mut mem);
        (switch, task)
    }

    /// Gives back the frames of a record written, for the next switch.
    pub fn recycle(&mut self, rec: SwitchRecord) {
        self.frames = rec.frames;
    }
}

#[cfg(test)]
mod tests;
