//! Allocation-hook records (format version 3): the table of hooked allocator functions
//! (kind 7, written once after the header), one event per allocator call (kind 5), and the
//! hooks' counts at exit (kind 8). See FORMAT.md, "Version 3".

use crate::error::FormatError;
use crate::kind;
use crate::memtrace::Op;
use crate::raw_reader::corrupt;
use crate::raw_writer::{begin, finish, push_word};
use crate::source::{u16_at, u32_at, u64_at, word_at, words};
use crate::stop_reason::StopReason;

/// Allocation-event flag bits.
pub mod alloc_flags {
    /// The vCPU was in user mode at the call.
    pub const USER: u8 = 1;
    /// The call never returned (a `longjmp`, a reset, or still running at exit): an
    /// allocation's or reallocation's result is unknown (0).
    pub const UNRETURNED: u8 = 2;
    /// An argument could not be read (its value is 0).
    pub const ARG_UNREADABLE: u8 = 4;
}

/// One hooked function of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookedFunction {
    /// Its address (the instruction the hook fires at).
    pub entry: u64,
    /// Index into [`AllocTable::allocators`].
    pub allocator: u16,
    pub op: Op,
    /// The name it was found under (demangled, without hash).
    pub name: String,
}

/// The table of allocators and the functions hooked for them (record kind 7). Events name
/// both by index.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllocTable {
    pub allocators: Vec<String>,
    pub functions: Vec<HookedFunction>,
}

/// Names longer than this are cut (the format stores one length byte).
const MAX_NAME: usize = 255;

fn push_name(out: &mut Vec<u8>, name: &str) {
    let mut n = name.len().min(MAX_NAME);
    while !name.is_char_boundary(n) {
        n -= 1;
    }
    out.push(n as u8);
    out.extend_from_slice(&name.as_bytes()[..n]);
}

/// Reads through a record body, every read checked against its end.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
    offset: u64,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], FormatError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(corrupt(
                self.offset,
                format!("allocator table ends inside {what}"),
            ));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn name(&mut self, what: &str) -> Result<String, FormatError> {
        let n = self.take(1, what)?[0] as usize;
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
}

impl AllocTable {
    /// Appends the record, kind and length included; at most `u16::MAX` allocators and
    /// functions are kept.
    pub fn encode(&self, ptr_width: usize, out: &mut Vec<u8>) {
        let at = begin(out, kind::ALLOC_TABLE);
        let allocators = &self.allocators[..self.allocators.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(allocators.len() as u16).to_le_bytes());
        for a in allocators {
            push_name(out, a);
        }
        let functions = &self.functions[..self.functions.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(functions.len() as u16).to_le_bytes());
        for f in functions {
            push_word(out, f.entry, ptr_width);
            out.extend_from_slice(&f.allocator.to_le_bytes());
            out.push(f.op.as_u8());
            push_name(out, &f.name);
        }
        finish(out, at);
    }

    pub(crate) fn decode(b: &[u8], width: usize, offset: u64) -> Result<Self, FormatError> {
        let mut c = Cursor { b, at: 0, offset };
        let na = u16_at(c.take(2, "the allocator count")?, 0) as usize;
        let allocators = (0..na)
            .map(|_| c.name("an allocator name"))
            .collect::<Result<Vec<_>, _>>()?;
        let nf = u16_at(c.take(2, "the function count")?, 0) as usize;
        let mut functions = Vec::with_capacity(nf.min(b.len()));
        for i in 0..nf {
            let fixed = c.take(width + 3, "a function")?;
            let allocator = u16_at(fixed, width);
            if allocator as usize >= allocators.len() {
                return Err(corrupt(
                    offset,
                    format!("hooked function {i} names allocator {allocator}, of {na}"),
                ));
            }
            let op = Op::from_u8(fixed[width + 2]).ok_or_else(|| {
                corrupt(
                    offset,
                    format!("hooked function {i} has op {}", fixed[width + 2]),
                )
            })?;
            functions.push(HookedFunction {
                entry: word_at(fixed, 0, width),
                allocator,
                op,
                name: c.name("a function name")?,
            });
        }
        if c.at != b.len() {
            return Err(corrupt(offset, "allocator table has trailing bytes".into()));
        }
        Ok(AllocTable {
            allocators,
            functions,
        })
    }

    /// The allocator name of function `id`, if both exist.
    pub fn allocator_of(&self, function: u16) -> Option<&str> {
        let f = self.functions.get(function as usize)?;
        self.allocators
            .get(f.allocator as usize)
            .map(String::as_str)
    }
}

/// One allocator call, as the recorder has it (record kind 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocEvent<'a> {
    pub vcpu: u32,
    pub op: Op,
    /// [`alloc_flags`] bits.
    pub flags: u8,
    /// Index into [`AllocTable::functions`].
    pub function: u16,
    /// Index into [`AllocTable::allocators`].
    pub allocator: u16,
    /// How the walk of the stack at entry ended.
    pub stop: crate::WalkEnd,
    /// Host time since the plugin started, ns, when the call took effect: at the return of
    /// an allocation or reallocation, at the entry of a free.
    pub time_ns: u64,
    /// The vCPU's instruction count then; 0 when the plugin counts none (no `period=`).
    pub icount: u64,
    /// Units asked for: the size argument times the count argument, or 2^order.
    pub size: u64,
    /// The allocation's result, or the pointer a realloc or free was given.
    pub ptr: u64,
    /// A realloc's result (0 otherwise).
    pub new_ptr: u64,
    /// Return addresses at the function's entry, innermost first (the caller first).
    pub frames: &'a [u64],
}

/// Bytes of an event before its words.
const EVENT_FIXED: usize = 40;

impl AllocEvent<'_> {
    /// Appends the record (at most `u16::MAX` frames).
    pub fn encode(&self, ptr_width: usize, out: &mut Vec<u8>) {
        let frames = &self.frames[..self.frames.len().min(u16::MAX as usize)];
        let at = begin(out, kind::ALLOC_EVENT);
        out.extend_from_slice(&self.vcpu.to_le_bytes());
        out.push(self.op.as_u8());
        out.push(self.flags);
        out.extend_from_slice(&self.function.to_le_bytes());
        out.extend_from_slice(&self.allocator.to_le_bytes());
        out.push(self.stop.byte());
        out.push(0);
        out.extend_from_slice(&(frames.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.time_ns.to_le_bytes());
        out.extend_from_slice(&self.icount.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        push_word(out, self.ptr, ptr_width);
        push_word(out, self.new_ptr, ptr_width);
        for &f in frames {
            push_word(out, f, ptr_width);
        }
        finish(out, at);
    }
}

/// One allocation event, borrowing the reader's buffer.
#[derive(Debug, Clone, Copy)]
pub struct AllocEventRef<'a> {
    pub vcpu: u32,
    pub op: Op,
    pub flags: u8,
    pub function: u16,
    pub allocator: u16,
    /// The raw stop byte; see [`AllocEventRef::stop_reason`].
    pub stop: u8,
    pub time_ns: u64,
    pub icount: u64,
    pub size: u64,
    pub ptr: u64,
    pub new_ptr: u64,
    frames: &'a [u8],
    width: usize,
}

impl<'a> AllocEventRef<'a> {
    pub fn user(&self) -> bool {
        self.flags & alloc_flags::USER != 0
    }

    /// The call never returned: an allocation's or reallocation's result is unknown.
    pub fn unreturned(&self) -> bool {
        self.flags & alloc_flags::UNRETURNED != 0
    }

    /// Why the walk stopped, whatever walker met it ([`crate::WalkEnd`]).
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.walk_end().reason()
    }

    /// How the walk ended: reason, walker, crossing from user space.
    pub fn walk_end(&self) -> crate::WalkEnd {
        crate::WalkEnd::of_byte(self.stop)
    }

    pub fn frame_count(&self) -> usize {
        self.frames.len() / self.width
    }

    /// Return addresses at entry, innermost first.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = u64> + 'a {
        words(self.frames, self.width)
    }

    pub(crate) fn decode(b: &'a [u8], width: usize, offset: u64) -> Result<Self, FormatError> {
        if b.len() < EVENT_FIXED + 2 * width {
            return Err(corrupt(
                offset,
                format!("allocation event of {} bytes is too short", b.len()),
            ));
        }
        let n = u16_at(b, 12) as usize;
        let want = EVENT_FIXED + (2 + n) * width;
        if b.len() != want {
            return Err(corrupt(
                offset,
                format!(
                    "allocation event with {n} frames should be {want} bytes, record says {}",
                    b.len()
                ),
            ));
        }
        let op = Op::from_u8(b[4])
            .ok_or_else(|| corrupt(offset, format!("allocation event has op {}", b[4])))?;
        Ok(AllocEventRef {
            vcpu: u32_at(b, 0),
            op,
            flags: b[5],
            function: u16_at(b, 6),
            allocator: u16_at(b, 8),
            stop: b[10],
            time_ns: u64_at(b, 16),
            icount: u64_at(b, 24),
            size: u64_at(b, 32),
            ptr: word_at(b, EVENT_FIXED, width),
            new_ptr: word_at(b, EVENT_FIXED + width, width),
            frames: &b[EVENT_FIXED + 2 * width..],
            width,
        })
    }
}

/// What the hooks did, written at exit (record kind 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AllocHookStats {
    /// Events whose bytes reached the file.
    pub events: u64,
    /// Events lost: the writer fell behind, or a write failed.
    pub dropped: u64,
}

impl AllocHookStats {
    /// Appends the record, kind and length included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let at = begin(out, kind::ALLOC_STATS);
        out.extend_from_slice(&self.events.to_le_bytes());
        out.extend_from_slice(&self.dropped.to_le_bytes());
        finish(out, at);
    }

    pub(crate) fn decode(b: &[u8], offset: u64) -> Result<Self, FormatError> {
        if b.len() != 16 {
            return Err(corrupt(
                offset,
                "allocation-hook statistics record has the wrong length".into(),
            ));
        }
        Ok(AllocHookStats {
            events: u64_at(b, 0),
            dropped: u64_at(b, 8),
        })
    }
}
