//! Streaming reader of the raw format.

use std::io::Read;

use crate::alloc_record::{AllocEventRef, AllocHookStats, AllocTable};
use crate::code_bytes::CodeBytes;
use crate::error::FormatError;
use crate::header::{Header, HEADER_FIXED_LEN};
use crate::kind;
use crate::machine::{CpuMode, Privilege};
use crate::source::{u16_at, u32_at, u64_at, word_at, words, Source, Truncation};
use crate::stack_table::{Reference, StackTable};
use crate::stats::Stats;
use crate::stop_reason::StopReason;
use crate::switch_record::SwitchRecord;
use crate::task_record::TaskRecord;
use crate::timer_record::HostTimerStats;

/// Records longer than this are taken as corruption rather than allocated.
const MAX_RECORD: usize = 64 << 20;

/// One sample, borrowing the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct SampleRef<'a> {
    pub vcpu: u32,
    pub flags: u8,
    /// The raw stop byte; see [`SampleRef::stop_reason`].
    pub stop: u8,
    pub time_ns: u64,
    pub icount: u64,
    pub pc: u64,
    pub sp: u64,
    sp_word: u64,
    frames: &'a [u8],
    width: usize,
    /// Version 2's fields; unknown (zero) in version 1, but for the privilege, which is
    /// user or kernel there, from the user flag.
    mode: u8,
    privilege: u8,
    return_register: u64,
    page_table_base: u64,
    /// Version 4: the stack-table entry this sample refers to ([`crate::stack_table`]);
    /// samples with equal entries have equal stacks (all but time, instruction count and SP,
    /// which such samples do not carry: 0).
    pub stack: Option<u32>,
}

impl<'a> SampleRef<'a> {
    pub fn user(&self) -> bool {
        self.flags & crate::sample_flags::USER != 0
    }

    /// The recorder resolved frameless entries itself: apply no `[SP]` fix.
    pub fn entry_resolved(&self) -> bool {
        self.flags & crate::sample_flags::ENTRY_RESOLVED != 0
    }

    /// Why the walk stopped, whatever walker met it ([`crate::WalkEnd`]).
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.walk_end().reason()
    }

    /// How the walk ended: reason, walker, crossing from user space.
    pub fn walk_end(&self) -> crate::WalkEnd {
        crate::WalkEnd::of_byte(self.stop)
    }

    /// The word at `[SP]`, when the plugin could read it.
    pub fn sp_word(&self) -> Option<u64> {
        (self.flags & crate::sample_flags::SP_WORD_VALID != 0).then_some(self.sp_word)
    }

    /// The CPU mode (version 2; unknown in version 1 files).
    pub fn mode(&self) -> CpuMode {
        CpuMode::from_u8(self.mode).unwrap_or_default()
    }

    /// The privilege level (version 2); in version 1 files, user or kernel from the user flag.
    pub fn privilege(&self) -> Privilege {
        Privilege::from_u8(self.privilege).unwrap_or_default()
    }

    /// The return-address register (riscv `ra`, aarch64 `x30`), when recorded (version 2).
    pub fn return_register(&self) -> Option<u64> {
        (self.flags & crate::sample_flags::RETURN_REGISTER_VALID != 0)
            .then_some(self.return_register)
    }

    /// The page-table base (x86 CR3, riscv `satp`, aarch64 `TTBR0_EL1`), when recorded
    /// (version 2).
    pub fn page_table_base(&self) -> Option<u64> {
        (self.flags & crate::sample_flags::PAGE_TABLE_VALID != 0).then_some(self.page_table_base)
    }

    pub fn frame_count(&self) -> usize {
        self.frames.len() / self.width
    }

    /// Return addresses, innermost first.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        words(self.frames, self.width)
    }

    /// Appends the return addresses, innermost first, to `out`: [`SampleRef::frames`] with
    /// the width told once, not per word (the loop every sample of a report runs).
    pub fn extend_frames(&self, out: &mut Vec<u64>) {
        if self.width == 4 {
            out.extend(self.frames.chunks_exact(4).map(|c| u32_at(c, 0) as u64));
        } else {
            out.extend(self.frames.chunks_exact(8).map(|c| u64_at(c, 0)));
        }
    }
}

/// One translated block's exact count.
#[derive(Debug, Clone, Copy)]
pub struct ExactBlock<'a> {
    pub executions: u64,
    insns: &'a [u8],
    width: usize,
}

impl<'a> ExactBlock<'a> {
    /// The addresses of the block's instructions.
    pub fn instructions(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        words(self.insns, self.width)
    }
}

/// A record of exact block counts, validated when read.
#[derive(Debug, Clone, Copy)]
pub struct ExactBlocks<'a> {
    count: u32,
    body: &'a [u8],
    width: usize,
}

impl<'a> ExactBlocks<'a> {
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = ExactBlock<'a>> + 'a {
        let (mut rest, width) = (self.body, self.width);
        (0..self.count).map(move |_| {
            let execs = u64_at(rest, 0);
            let n = u16_at(rest, 8) as usize;
            let insns = &rest[10..10 + n * width];
            rest = &rest[10 + n * width..];
            ExactBlock {
                executions: execs,
                insns,
                width,
            }
        })
    }
}

/// One record of a raw file.
#[derive(Debug)]
pub enum Record<'a> {
    Sample(SampleRef<'a>),
    ExactBlocks(ExactBlocks<'a>),
    Stats(Stats),
    /// `delay=`: the timer thread's ticks and each vCPU's idle time.
    HostTimer(HostTimerStats),
    /// Code bytes at a sampled user address, in an address space.
    CodeBytes(CodeBytes<'a>),
    /// Version 3: the allocators and hooked functions events refer to.
    AllocTable(AllocTable),
    /// Version 3: one hooked allocator call.
    AllocEvent(AllocEventRef<'a>),
    /// Version 3: the allocation hooks' counts at exit.
    AllocStats(AllocHookStats),
    /// The task a vCPU runs from here on.
    Task(TaskRecord),
    /// A vCPU switched tasks.
    Switch(SwitchRecord),
    /// A record kind this version does not know; skipped.
    Unknown {
        kind: u8,
        offset: u64,
    },
}

/// Streaming reader of a raw file: header first, then [`RawReader::next_record`].
pub struct RawReader<R> {
    src: Source<R>,
    header: Header,
    width: usize,
    version: u16,
    truncation: Option<Truncation>,
    record_offset: u64,
    /// Version 4: the stacks defined so far, and the run of references being read.
    stacks: StackTable,
    run: Run,
}

/// A sample-run record being read, reference by reference.
#[derive(Debug, Default)]
struct Run {
    body: Vec<u8>,
    at: usize,
    left: u32,
    count: u32,
    vcpu: u32,
    /// The record's offset, for errors.
    offset: u64,
}

/// A file that is no raw file, or one that is compressed (which [`RawReader::open`] reads).
fn bad_magic(first: &[u8]) -> FormatError {
    match first == crate::compressed::ZSTD_MAGIC {
        true => FormatError::Compressed,
        false => FormatError::BadMagic,
    }
}

impl<'a> RawReader<Box<dyn Read + 'a>> {
    /// A reader of `input`, a raw file or a compressed one (`compress=on`,
    /// [`crate::compressed`]).
    pub fn open<I: Read + 'a>(input: I) -> Result<Self, FormatError> {
        RawReader::new(crate::compressed::uncompressed(input)?)
    }
}

impl<R: Read> RawReader<R> {
    /// Reads and checks the header.
    pub fn new(inner: R) -> Result<Self, FormatError> {
        let mut src = Source::new(inner);
        if !src.fill(HEADER_FIXED_LEN)? {
            let n = src.available();
            if n >= 8 && src.peek(8) != crate::MAGIC {
                return Err(bad_magic(src.peek(4)));
            }
            return Err(FormatError::ShortHeader(n));
        }
        if src.peek(8) != crate::MAGIC {
            return Err(bad_magic(src.peek(4)));
        }
        let mut want = HEADER_FIXED_LEN;
        let (header, len, version) = loop {
            match Header::decode(src.peek(want))? {
                Some(h) => break h,
                None => {
                    want = u16_at(src.peek(12), 10) as usize;
                    if !src.fill(want)? {
                        return Err(FormatError::ShortHeader(src.available()));
                    }
                }
            }
        };
        src.consume(len);
        let width = header.ptr_width();
        Ok(RawReader {
            src,
            header,
            width,
            version,
            truncation: None,
            record_offset: len as u64,
            stacks: StackTable::default(),
            run: Run::default(),
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The stacks a version-4 file defined so far.
    pub fn stacks(&self) -> &StackTable {
        &self.stacks
    }

    /// The file's format version (1 to 4).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Byte offset of the last record returned.
    pub fn record_offset(&self) -> u64 {
        self.record_offset
    }

    /// Byte offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.src.offset()
    }

    /// Set once the reader met a torn last record.
    pub fn truncation(&self) -> Option<Truncation> {
        self.truncation
    }

    /// The next record, or `None` at the end of the file (see [`RawReader::truncation`]).
    /// Version 4's stack definitions are taken in on the way, and each reference of a run
    /// comes as a sample of its own.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, FormatError> {
        loop {
            if self.run.left > 0 {
                return self.next_in_run().map(|s| Some(Record::Sample(s)));
            }
            if self.truncation.is_some() || self.src.at_eof()? {
                return Ok(None);
            }
            if !self.read_table_record()? {
                break;
            }
        }
        self.next_plain_record()
    }

    /// The next reference of the run being read; a bad one ends the run.
    fn next_in_run(&mut self) -> Result<SampleRef<'_>, FormatError> {
        let r = self.next_reference()?;
        Ok(self.sample_of(&r))
    }

    /// References left in the version-4 sample run being read: while there are, they can
    /// be taken with [`RawReader::next_reference`], without building a sample for each (a
    /// reader that counts by stack builds one per distinct stack with
    /// [`RawReader::sample_of`]).
    pub fn run_left(&self) -> u32 {
        self.run.left
    }

    /// The next reference of the run being read ([`RawReader::run_left`] must be above 0);
    /// a bad one ends the run.
    #[inline]
    pub fn next_reference(&mut self) -> Result<Reference, FormatError> {
        let run = &mut self.run;
        if run.left == 0 {
            return Err(corrupt(
                run.offset,
                "no sample reference left in the run".into(),
            ));
        }
        let i = run.count - run.left;
        run.left -= 1;
        let r = self
            .stacks
            .next(run.vcpu, &run.body, &mut run.at, (i, run.count, run.offset));
        r.inspect_err(|_| self.run.left = 0)
    }

    /// The sample `r` (a reference this reader returned) stands for.
    pub fn sample_of(&self, r: &Reference) -> SampleRef<'_> {
        let def = self.stacks.definition(r.stack);
        let mut s = decode_sample_v2(def, self.width, 0).expect("checked when defined");
        s.vcpu = r.vcpu;
        s.time_ns = r.time_ns;
        s.icount = r.icount;
        s.sp_word = r.sp_word.unwrap_or(0);
        s.stack = Some(r.stack);
        s
    }

    /// Takes in a version-4 stack or sample-run record if one is next; false when the next
    /// record is another (or torn: the plain path says so).
    fn read_table_record(&mut self) -> Result<bool, FormatError> {
        if self.version < crate::VERSION_4 || !self.src.fill(5)? {
            return Ok(false);
        }
        let head = self.src.peek(5);
        let (kind, len) = (head[0], u32_at(head, 1) as usize);
        if !matches!(kind, kind::STACK | kind::SAMPLE_RUN) || len > MAX_RECORD {
            return Ok(false);
        }
        if !self.src.fill(5 + len)? {
            return Ok(false);
        }
        let offset = self.src.offset();
        self.record_offset = offset;
        self.src.consume(5 + len);
        let body = self.src.consumed_tail(len);
        let width = self.width;
        if kind == kind::STACK {
            self.stacks.define(body, offset, |def| {
                decode_sample_v2(def, width, offset).map(|_| ())
            })?;
        } else {
            let (vcpu, count) = self.stacks.check_run(body, offset)?;
            let mut run = std::mem::take(&mut self.run.body);
            run.clear();
            run.extend_from_slice(body);
            self.run = Run {
                body: run,
                at: 8,
                left: count,
                count,
                vcpu,
                offset,
            };
        }
        Ok(true)
    }

    /// A record of any other kind.
    fn next_plain_record(&mut self) -> Result<Option<Record<'_>>, FormatError> {
        if self.truncation.is_some() || self.src.at_eof()? {
            return Ok(None);
        }
        let offset = self.src.offset();
        self.record_offset = offset;
        if !self.src.fill(5)? {
            self.truncation = Some(self.src.truncation(5));
            return Ok(None);
        }
        let head = self.src.peek(5);
        let kind = head[0];
        let len = u32_at(head, 1) as usize;
        if len > MAX_RECORD {
            return Err(corrupt(
                offset,
                format!("record length {len} is implausible"),
            ));
        }
        if !self.src.fill(5 + len)? {
            self.truncation = Some(self.src.truncation(5 + len));
            return Ok(None);
        }
        self.src.consume(5 + len);
        // The bytes stay in the buffer until the next fill, so borrow them from there.
        let body = &self.src_slice_before(len);
        let width = self.width;
        let v3 = self.version >= crate::VERSION_3;
        let rec = match kind {
            kind::SAMPLE if self.version >= crate::VERSION_2 => {
                Record::Sample(decode_sample_v2(body, width, offset)?)
            }
            kind::SAMPLE => Record::Sample(decode_sample(body, width, offset)?),
            kind::EXACT_BLOCKS => Record::ExactBlocks(decode_exact(body, width, offset)?),
            kind::STATS => Record::Stats(Stats::decode(body, offset)?),
            kind::HOST_TIMER => {
                Record::HostTimer(HostTimerStats::decode(body).ok_or_else(|| {
                    corrupt(offset, "host-timer record has the wrong length".into())
                })?)
            }
            kind::CODE_BYTES => Record::CodeBytes(CodeBytes::decode(body, width, offset)?),
            kind::TASK if self.version >= crate::VERSION_2 => {
                Record::Task(TaskRecord::decode(body, offset)?)
            }
            kind::SWITCH if self.version >= crate::VERSION_2 => {
                Record::Switch(SwitchRecord::decode(body, width, offset)?)
            }
            kind::ALLOC_TABLE if v3 => Record::AllocTable(AllocTable::decode(body, width, offset)?),
            kind::ALLOC_EVENT if v3 => {
                Record::AllocEvent(AllocEventRef::decode(body, width, offset)?)
            }
            kind::ALLOC_STATS if v3 => Record::AllocStats(AllocHookStats::decode(body, offset)?),
            other => Record::Unknown {
                kind: other,
                offset,
            },
        };
        Ok(Some(rec))
    }

    fn src_slice_before(&self, len: usize) -> &[u8] {
        self.src.consumed_tail(len)
    }
}

pub(crate) fn corrupt(offset: u64, what: String) -> FormatError {
    FormatError::Corrupt { offset, what }
}

/// Checks a sample record's length (both versions): `fixed` bytes and `words` words, then
/// as many frames as the count at byte 6 says. Returns where the frames end.
#[inline]
fn checked_sample_len(
    b: &[u8],
    fixed: usize,
    words: usize,
    width: usize,
    offset: u64,
) -> Result<usize, FormatError> {
    if b.len() < fixed + words * width {
        return Err(corrupt(
            offset,
            format!("sample record of {} bytes is too short", b.len()),
        ));
    }
    let n = u16_at(b, 6) as usize;
    let want = fixed + (words + n) * width;
    if b.len() != want {
        return Err(corrupt(
            offset,
            format!(
                "sample with {n} frames should be {want} bytes, record says {}",
                b.len()
            ),
        ));
    }
    Ok(want)
}

#[inline]
fn decode_sample(b: &[u8], width: usize, offset: u64) -> Result<SampleRef<'_>, FormatError> {
    checked_sample_len(b, 24, 3, width, offset)?;
    Ok(SampleRef {
        vcpu: u32_at(b, 0),
        flags: b[4],
        stop: b[5],
        time_ns: u64_at(b, 8),
        icount: u64_at(b, 16),
        pc: word_at(b, 24, width),
        sp: word_at(b, 24 + width, width),
        sp_word: word_at(b, 24 + 2 * width, width),
        frames: &b[24 + 3 * width..],
        width,
        mode: 0,
        privilege: if b[4] & crate::sample_flags::USER != 0 {
            Privilege::User as u8
        } else {
            Privilege::Kernel as u8
        },
        return_register: 0,
        page_table_base: 0,
        stack: None,
    })
}

/// Bytes of a version-2 sample before its words.
const V2_FIXED: usize = 36;

#[inline]
fn decode_sample_v2(b: &[u8], width: usize, offset: u64) -> Result<SampleRef<'_>, FormatError> {
    let words_end = checked_sample_len(b, V2_FIXED, 4, width, offset)?;
    let flags = b[4];
    let word = |i: usize| word_at(b, V2_FIXED + i * width, width);
    Ok(SampleRef {
        vcpu: u32_at(b, 0),
        flags,
        stop: b[5],
        time_ns: u64_at(b, 8),
        icount: u64_at(b, 16),
        pc: word(0),
        sp: word(1),
        sp_word: word(2),
        frames: &b[V2_FIXED + 4 * width..words_end],
        width,
        mode: b[24],
        privilege: b[25],
        return_register: word(3),
        page_table_base: u64_at(b, 28),
        stack: None,
    })
}

fn decode_exact(b: &[u8], width: usize, offset: u64) -> Result<ExactBlocks<'_>, FormatError> {
    if b.len() < 4 {
        return Err(corrupt(offset, "exact-count record too short".into()));
    }
    let count = u32_at(b, 0);
    let body = &b[4..];
    // Validate once, so iteration can index without checks.
    let mut at = 0usize;
    for i in 0..count {
        if body.len() < at + 10 {
            return Err(corrupt(
                offset,
                format!("exact-count block {i} runs past the record"),
            ));
        }
        let n = u16_at(body, at + 8) as usize;
        at += 10 + n * width;
        if at > body.len() {
            return Err(corrupt(
                offset,
                format!("exact-count block {i} runs past the record"),
            ));
        }
    }
    if at != body.len() {
        return Err(corrupt(
            offset,
            "exact-count record has trailing bytes".into(),
        ));
    }
    Ok(ExactBlocks { count, body, width })
}
