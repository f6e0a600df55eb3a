//! Encoders for the raw format's records. The plugin's writer thread calls these; they only
//! append to a buffer, so the caller decides when bytes reach the file.

use crate::kind;
use crate::machine::{CpuMode, Privilege};
use crate::sample_flags;
use crate::walk_end::WalkEnd;

/// One sample as the recorder has it, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct SampleRecord<'a> {
    pub vcpu: u32,
    pub user: bool,
    /// How the walk ended (its byte: reason, walker, crossing).
    pub stop: WalkEnd,
    pub time_ns: u64,
    pub icount: u64,
    pub pc: u64,
    pub sp: u64,
    /// The word at `[SP]`, when it was readable.
    pub sp_word: Option<u64>,
    /// Return addresses, innermost first.
    pub frames: &'a [u64],
    /// See [`crate::sample_flags::ENTRY_RESOLVED`].
    pub entry_resolved: bool,
}

pub(crate) fn push_word(out: &mut Vec<u8>, v: u64, width: usize) {
    if width == 4 {
        out.extend_from_slice(&(v as u32).to_le_bytes());
    } else {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

pub(crate) fn begin(out: &mut Vec<u8>, kind: u8) -> usize {
    out.push(kind);
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    at
}

pub(crate) fn finish(out: &mut [u8], len_at: usize) {
    let len = (out.len() - len_at - 4) as u32;
    out[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
}

/// Appends one sample record of format version 1. At most `u16::MAX` frames are kept.
pub fn encode_sample(out: &mut Vec<u8>, ptr_width: usize, s: &SampleRecord<'_>) {
    let frames = &s.frames[..s.frames.len().min(u16::MAX as usize)];
    // One capacity check for the whole record (this runs in the sampling callback).
    out.reserve(29 + (3 + frames.len()) * ptr_width);
    let at = begin(out, kind::SAMPLE);
    out.extend_from_slice(&s.vcpu.to_le_bytes());
    let mut flags = 0;
    if s.user {
        flags |= sample_flags::USER;
    }
    if s.sp_word.is_some() {
        flags |= sample_flags::SP_WORD_VALID;
    }
    if s.entry_resolved {
        flags |= sample_flags::ENTRY_RESOLVED;
    }
    out.push(flags);
    out.push(s.stop.byte());
    out.extend_from_slice(&(frames.len() as u16).to_le_bytes());
    out.extend_from_slice(&s.time_ns.to_le_bytes());
    out.extend_from_slice(&s.icount.to_le_bytes());
    push_word(out, s.pc, ptr_width);
    push_word(out, s.sp, ptr_width);
    push_word(out, s.sp_word.unwrap_or(0), ptr_width);
    for &f in frames {
        push_word(out, f, ptr_width);
    }
    finish(out, at);
}

/// What a version-2 sample adds to a [`SampleRecord`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SampleExtras {
    pub mode: CpuMode,
    /// When known, it decides the user flag; [`SampleRecord::user`] only when unknown.
    pub privilege: Privilege,
    /// The return-address register (riscv `ra`, aarch64 `x30`), when it was read.
    pub return_register: Option<u64>,
    /// The page-table base (x86 CR3, riscv `satp`, aarch64 `TTBR0_EL1`), when it was read.
    pub page_table_base: Option<u64>,
}

/// Appends one sample record of format version 2 (see FORMAT.md). At most `u16::MAX`
/// frames are kept.
pub fn encode_sample_v2(
    out: &mut Vec<u8>,
    ptr_width: usize,
    s: &SampleRecord<'_>,
    x: &SampleExtras,
) {
    let frames = &s.frames[..s.frames.len().min(u16::MAX as usize)];
    out.reserve(41 + (4 + frames.len()) * ptr_width);
    let user = match x.privilege {
        Privilege::Unknown => s.user,
        p => p == Privilege::User,
    };
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    let flags = flag(user, sample_flags::USER)
        | flag(s.sp_word.is_some(), sample_flags::SP_WORD_VALID)
        | flag(s.entry_resolved, sample_flags::ENTRY_RESOLVED)
        | flag(
            x.return_register.is_some(),
            sample_flags::RETURN_REGISTER_VALID,
        )
        | flag(x.page_table_base.is_some(), sample_flags::PAGE_TABLE_VALID);
    let at = begin(out, kind::SAMPLE);
    out.extend_from_slice(&s.vcpu.to_le_bytes());
    out.push(flags);
    out.push(s.stop.byte());
    out.extend_from_slice(&(frames.len() as u16).to_le_bytes());
    out.extend_from_slice(&s.time_ns.to_le_bytes());
    out.extend_from_slice(&s.icount.to_le_bytes());
    out.push(x.mode as u8);
    out.push(x.privilege as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&x.page_table_base.unwrap_or(0).to_le_bytes());
    push_word(out, s.pc, ptr_width);
    push_word(out, s.sp, ptr_width);
    push_word(out, s.sp_word.unwrap_or(0), ptr_width);
    push_word(out, x.return_register.unwrap_or(0), ptr_width);
    for &f in frames {
        push_word(out, f, ptr_width);
    }
    finish(out, at);
}

/// Appends exact block-count records: `(executions, instruction addresses)` per translated
/// block. Large inputs are split into several records of bounded size.
pub fn encode_exact_blocks<'a, I>(out: &mut Vec<u8>, ptr_width: usize, blocks: I)
where
    I: IntoIterator<Item = (u64, &'a [u64])>,
{
    const PER_RECORD: u32 = 4096;
    let mut it = blocks.into_iter().peekable();
    while it.peek().is_some() {
        let at = begin(out, kind::EXACT_BLOCKS);
        let count_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let mut count = 0u32;
        while count < PER_RECORD {
            let Some((execs, insns)) = it.next() else {
                break;
            };
            let insns = &insns[..insns.len().min(u16::MAX as usize)];
            out.extend_from_slice(&execs.to_le_bytes());
            out.extend_from_slice(&(insns.len() as u16).to_le_bytes());
            for &a in insns {
                push_word(out, a, ptr_width);
            }
            count += 1;
        }
        out[count_at..count_at + 4].copy_from_slice(&count.to_le_bytes());
        finish(out, at);
    }
}

/// Appends the statistics record written at exit (see [`crate::Stats::encode`]).
pub fn encode_stats(
    out: &mut Vec<u8>,
    samples: u64,
    dropped: u64,
    stops: &[u64],
    vcpu_instructions: &[u64],
) {
    let at = begin(out, kind::STATS);
    out.extend_from_slice(&samples.to_le_bytes());
    out.extend_from_slice(&dropped.to_le_bytes());
    let stops = &stops[..stops.len().min(255)];
    out.push(stops.len() as u8);
    for s in stops {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.extend_from_slice(&(vcpu_instructions.len() as u32).to_le_bytes());
    for v in vcpu_instructions {
        out.extend_from_slice(&v.to_le_bytes());
    }
    finish(out, at);
}
