//! The task-switch record (kind 10): a vCPU leaves one task for another, with the kernel
//! stack the task that leaves stopped on. From the switches a reader gets each task's time
//! off the CPU (until it runs again) and where it waited, and, with the vCPU's instruction
//! count, the exact instructions each task ran.

use crate::error::FormatError;
use crate::kind;
use crate::raw_reader::corrupt;
use crate::raw_writer::push_word;
use crate::source::{u16_at, u32_at, u64_at, words};
use crate::WalkEnd;

/// Bytes of a switch record's body before its words.
pub const SWITCH_FIXED_LEN: usize = 40;

/// flags bits 0-1: the state of the task that leaves.
const STATE_MASK: u8 = 3;
/// flags bit 2: the instruction count is valid.
const FLAG_ICOUNT: u8 = 4;

/// Whether the task that leaves the CPU can run again at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LeftAs {
    /// Not read (the guest's memory, or a kernel whose layout gives no run-queue field).
    #[default]
    Unknown,
    /// Still on its run queue (preempted, or yielded): it waits for a CPU.
    Runnable,
    /// Off the run queue: it sleeps or waits for an event until something wakes it.
    Blocked,
}

impl LeftAs {
    fn code(self) -> u8 {
        match self {
            LeftAs::Unknown => 0,
            LeftAs::Runnable => 1,
            LeftAs::Blocked => 2,
        }
    }

    fn from_code(c: u8) -> Self {
        match c {
            1 => LeftAs::Runnable,
            2 => LeftAs::Blocked,
            _ => LeftAs::Unknown,
        }
    }
}

/// One task switch on a vCPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchRecord {
    pub vcpu: u32,
    /// Host time since the plugin started, ns.
    pub time_ns: u64,
    /// Instructions the vCPU had executed, when it counts them (`period=`).
    pub icount: Option<u64>,
    /// The task that leaves (Linux: its `task_struct` address) and the one that runs next.
    pub prev: u64,
    pub next: u64,
    pub left_as: LeftAs,
    /// How the walk of the leaving task's stack ended.
    pub stop: WalkEnd,
    /// Where the leaving task stopped: the switch function's entry.
    pub pc: u64,
    /// Its return addresses, innermost first (boundary markers as in samples).
    pub frames: Vec<u64>,
}

impl SwitchRecord {
    /// Appends the record, kind and length included, with `width`-byte words.
    pub fn encode(&self, out: &mut Vec<u8>, width: usize) {
        let n = self.frames.len().min(u16::MAX as usize);
        let len = SWITCH_FIXED_LEN + (1 + n) * width;
        out.push(kind::SWITCH);
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&self.vcpu.to_le_bytes());
        let flags = self.left_as.code()
            | if self.icount.is_some() {
                FLAG_ICOUNT
            } else {
                0
            };
        out.push(flags);
        out.push(self.stop.byte());
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(&self.time_ns.to_le_bytes());
        out.extend_from_slice(&self.icount.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.prev.to_le_bytes());
        out.extend_from_slice(&self.next.to_le_bytes());
        push_word(out, self.pc, width);
        for &f in &self.frames[..n] {
            push_word(out, f, width);
        }
    }

    /// Decodes a record body of `width`-byte words (the record at `offset`, for errors).
    pub(crate) fn decode(b: &[u8], width: usize, offset: u64) -> Result<Self, FormatError> {
        if b.len() < SWITCH_FIXED_LEN + width {
            return Err(corrupt(
                offset,
                format!(
                    "switch record should be at least {} bytes, record says {}",
                    SWITCH_FIXED_LEN + width,
                    b.len()
                ),
            ));
        }
        let n = u16_at(b, 6) as usize;
        let want = SWITCH_FIXED_LEN + (1 + n) * width;
        if b.len() != want {
            return Err(corrupt(
                offset,
                format!(
                    "switch record of {n} frames should be {want} bytes, record says {}",
                    b.len()
                ),
            ));
        }
        let flags = b[4];
        let mut w = words(&b[SWITCH_FIXED_LEN..], width);
        let pc = w.next().unwrap_or(0);
        Ok(SwitchRecord {
            vcpu: u32_at(b, 0),
            time_ns: u64_at(b, 8),
            icount: (flags & FLAG_ICOUNT != 0).then(|| u64_at(b, 16)),
            prev: u64_at(b, 24),
            next: u64_at(b, 32),
            left_as: LeftAs::from_code(flags & STATE_MASK),
            stop: WalkEnd::of_byte(b[5]),
            pc,
            frames: w.collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StopReason, Walker};

    fn switch(width: usize) -> SwitchRecord {
        let k = if width == 4 {
            0xc100_0000
        } else {
            0xffff_ffff_8100_0000
        };
        SwitchRecord {
            vcpu: 1,
            time_ns: 1_000_000,
            icount: Some(123_456),
            prev: k + 0x10_0000,
            next: k + 0x20_0000,
            left_as: LeftAs::Blocked,
            stop: WalkEnd::new(StopReason::NullFramePointer, Walker::FramePointers, false),
            pc: k + 0x100,
            frames: vec![k + 0x200, k + 0x300],
        }
    }

    #[test]
    fn a_switch_reads_back_at_both_widths() {
        for width in [4, 8] {
            let rec = switch(width);
            let mut out = Vec::new();
            rec.encode(&mut out, width);
            assert_eq!(out[0], kind::SWITCH);
            assert_eq!(out.len(), 5 + SWITCH_FIXED_LEN + 3 * width);
            assert_eq!(SwitchRecord::decode(&out[5..], width, 0).unwrap(), rec);
        }
        let none = SwitchRecord {
            icount: None,
            left_as: LeftAs::Unknown,
            frames: vec![],
            ..switch(8)
        };
        let mut out = Vec::new();
        none.encode(&mut out, 8);
        assert_eq!(SwitchRecord::decode(&out[5..], 8, 0).unwrap(), none);
    }

    #[test]
    fn a_record_whose_length_disagrees_with_its_frames_is_corrupt_and_names_its_offset() {
        let mut out = Vec::new();
        switch(8).encode(&mut out, 8);
        let body = &out[5..out.len() - 8];
        let err = SwitchRecord::decode(body, 8, 4321).unwrap_err().to_string();
        assert!(err.contains("4321") && err.contains("2 frames"), "{err}");
        let err = SwitchRecord::decode(&[0; 10], 8, 7)
            .unwrap_err()
            .to_string();
        assert!(err.contains("at least"), "{err}");
    }
}
