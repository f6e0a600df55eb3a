//! Version 4's stack table: each distinct sampled stack written once (record kind 11), and
//! samples as references to it in runs of one vCPU (kind 12), their times and instruction
//! counts as deltas from that vCPU's previous reference. A recording repeats a few thousand
//! stacks millions of times: a sample then costs a few bytes instead of a hundred, and a
//! reader does the work of a stack once.
//!
//! [`Compactor`] turns the plugin's batches of full sample records into that form (the
//! writer thread's job); [`StackTable`] is the reader's side. Both keep the same state,
//! built only from the records in the file, in the file's order.

use rustc_hash::FxHashMap;

use crate::error::FormatError;
use crate::raw_reader::corrupt;
use crate::raw_writer::{begin, finish};
use crate::source::{u16_at, u32_at, u64_at, word_at};
use crate::{kind, sample_flags};

/// Most stacks a table holds; past it the writer writes full sample records again, and a
/// reader refuses a file that defines more.
pub const MAX_STACKS: usize = 1 << 22;
/// Most bytes of stack definitions a table holds (the same rule).
pub const MAX_STACK_BYTES: usize = 1 << 29;
/// Most vCPU indexes a run may name (QEMU's own limit is lower).
const MAX_VCPU: u32 = 1 << 16;

/// Bytes of a version-2 sample before its words.
const FIXED: usize = 36;

/// The fields of a version-2 sample payload that are the sample's, not its stack's: the
/// vCPU (0..4), time and instruction count (8..24), SP (the second word) and the word at
/// [SP] (the third), a local variable most of the time, which would make every stack
/// distinct. Where readers use that word (a valid one, entries not resolved by the
/// recorder) each reference carries it; elsewhere it is dropped.
fn clear_sample_fields(def: &mut [u8], width: usize) {
    def[0..4].fill(0);
    def[8..24].fill(0);
    def[FIXED + width..FIXED + 3 * width].fill(0);
    if def[4] & sample_flags::ENTRY_RESOLVED != 0 {
        def[4] &= !sample_flags::SP_WORD_VALID;
    }
}

/// Whether references to the stack `def` carry the word at [SP].
fn carries_sp_word(def: &[u8]) -> bool {
    def[4] & (sample_flags::SP_WORD_VALID | sample_flags::ENTRY_RESOLVED)
        == sample_flags::SP_WORD_VALID
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> u64 {
    ((v >> 1) as i64 ^ -((v & 1) as i64)) as u64
}

/// A LEB128 number at `b[*at..]`, moving `at` past it; `None` when it runs past the end or
/// past 64 bits.
#[inline]
fn read_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    // Most are one byte: a stack id below 128, a delta of a few units.
    if let Some(&byte) = b.get(*at) {
        if byte < 0x80 {
            *at += 1;
            return Some(u64::from(byte));
        }
    }
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// A vCPU's last time and instruction count, which the next reference's deltas are from.
#[derive(Debug, Default, Clone, Copy)]
struct Last {
    time_ns: u64,
    icount: u64,
}

fn last_of(last: &mut Vec<Last>, vcpu: u32) -> &mut Last {
    let i = vcpu as usize;
    if last.len() <= i {
        last.resize(i + 1, Last::default());
    }
    &mut last[i]
}

/// The writer's side: full sample records in, stack definitions and runs out.
#[derive(Debug)]
pub struct Compactor {
    width: usize,
    ids: FxHashMap<Box<[u8]>, u32>,
    bytes: usize,
    last: Vec<Last>,
    key: Vec<u8>,
    run: Vec<u8>,
    run_vcpu: u32,
    run_len: u32,
}

impl Compactor {
    /// For a file whose words are `width` bytes.
    pub fn new(width: usize) -> Self {
        Compactor {
            width,
            ids: FxHashMap::default(),
            bytes: 0,
            last: Vec::new(),
            key: Vec::new(),
            run: Vec::new(),
            run_vcpu: 0,
            run_len: 0,
        }
    }

    /// Distinct stacks defined so far.
    pub fn stacks(&self) -> usize {
        self.ids.len()
    }

    /// Appends `records` (whole records of format version 2 or 3, as the recorder encodes
    /// them) to `out` in version 4's form: every sample record becomes a reference, after its
    /// stack's definition the first time; every other record is copied, in order. A record
    /// that does not parse ends the conversion: it and the rest are copied as they are.
    pub fn compact(&mut self, records: &[u8], out: &mut Vec<u8>) {
        let mut at = 0;
        while at + 5 <= records.len() {
            let kind = records[at];
            let len = u32_at(records, at + 1) as usize;
            let Some(body) = records.get(at + 5..at + 5 + len) else {
                break;
            };
            let whole = &records[at..at + 5 + len];
            at += 5 + len;
            if kind != kind::SAMPLE || !self.sample(body, out) {
                self.end_run(out);
                out.extend_from_slice(whole);
            }
        }
        self.end_run(out);
        out.extend_from_slice(&records[at.min(records.len())..]);
    }

    /// A sample as a reference; false when it must stay a full record (malformed, or the
    /// table is full and its stack is new).
    fn sample(&mut self, body: &[u8], out: &mut Vec<u8>) -> bool {
        let w = self.width;
        if body.len() < FIXED + 4 * w
            || body.len() != FIXED + (4 + usize::from(u16_at(body, 6))) * w
        {
            return false;
        }
        let vcpu = u32_at(body, 0);
        if vcpu >= MAX_VCPU {
            return false;
        }
        self.key.clear();
        self.key.extend_from_slice(body);
        clear_sample_fields(&mut self.key, w);
        let id = match self.ids.get(&self.key[..]) {
            Some(&id) => id,
            None => {
                if self.ids.len() >= MAX_STACKS || self.bytes + self.key.len() > MAX_STACK_BYTES {
                    return false;
                }
                let id = self.ids.len() as u32;
                // Before the run that refers to it: the run is written when it ends.
                let at = begin(out, kind::STACK);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&self.key);
                finish(out, at);
                self.bytes += self.key.len();
                self.ids.insert(self.key.clone().into_boxed_slice(), id);
                id
            }
        };
        if self.run_len > 0 && self.run_vcpu != vcpu {
            self.end_run(out);
        }
        self.run_vcpu = vcpu;
        self.run_len += 1;
        let (time_ns, icount) = (u64_at(body, 8), u64_at(body, 16));
        let last = last_of(&mut self.last, vcpu);
        push_varint(&mut self.run, u64::from(id));
        push_varint(&mut self.run, zigzag(time_ns.wrapping_sub(last.time_ns)));
        push_varint(&mut self.run, zigzag(icount.wrapping_sub(last.icount)));
        if carries_sp_word(&self.key) {
            push_varint(&mut self.run, word_at(body, FIXED + 2 * w, w));
        }
        *last = Last { time_ns, icount };
        true
    }

    fn end_run(&mut self, out: &mut Vec<u8>) {
        if self.run_len == 0 {
            return;
        }
        let at = begin(out, kind::SAMPLE_RUN);
        out.extend_from_slice(&self.run_vcpu.to_le_bytes());
        out.extend_from_slice(&self.run_len.to_le_bytes());
        out.extend_from_slice(&self.run);
        finish(out, at);
        self.run.clear();
        self.run_len = 0;
    }
}

/// The reader's side: the stacks defined so far and each vCPU's last reference.
#[derive(Debug, Default)]
pub struct StackTable {
    /// Where each stack's definition (a sample payload) is in `bytes`, and whether its
    /// references carry the word at `[SP]`.
    spans: Vec<(u32, u32, bool)>,
    bytes: Vec<u8>,
    last: Vec<Last>,
}

/// One reference of a run, resolved: the stack and the sample's own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference {
    pub stack: u32,
    pub vcpu: u32,
    pub time_ns: u64,
    pub icount: u64,
    /// The word at `[SP]`, where the stack's references carry it.
    pub sp_word: Option<u64>,
}

impl StackTable {
    /// Stacks defined so far.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The definition of stack `id`: a version-2 sample payload without the sample's fields.
    pub(crate) fn definition(&self, id: u32) -> &[u8] {
        let (off, len, _) = self.spans[id as usize];
        &self.bytes[off as usize..(off + len) as usize]
    }

    /// Adds a stack record's definition, checked by `check` (a sample payload's decoder);
    /// its id must be the next one.
    pub(crate) fn define(
        &mut self,
        body: &[u8],
        offset: u64,
        check: impl FnOnce(&[u8]) -> Result<(), FormatError>,
    ) -> Result<(), FormatError> {
        if body.len() < 4 {
            return Err(corrupt(offset, "stack record too short".into()));
        }
        let id = u32_at(body, 0);
        if id as usize != self.spans.len() {
            return Err(corrupt(
                offset,
                format!(
                    "stack record defines stack {id}, and the next one is {}",
                    self.spans.len()
                ),
            ));
        }
        let def = &body[4..];
        if self.spans.len() >= MAX_STACKS || self.bytes.len() + def.len() > MAX_STACK_BYTES {
            return Err(corrupt(
                offset,
                format!(
                    "stack table past its limits ({MAX_STACKS} stacks, {MAX_STACK_BYTES} bytes)"
                ),
            ));
        }
        check(def)?;
        let carries = carries_sp_word(def);
        self.spans
            .push((self.bytes.len() as u32, def.len() as u32, carries));
        self.bytes.extend_from_slice(def);
        Ok(())
    }

    /// Checks a run record's head; returns its vCPU and count. Its references are checked
    /// one by one as [`StackTable::next`] reads them.
    pub(crate) fn check_run(&self, body: &[u8], offset: u64) -> Result<(u32, u32), FormatError> {
        if body.len() < 8 {
            return Err(corrupt(offset, "sample-run record too short".into()));
        }
        let (vcpu, count) = (u32_at(body, 0), u32_at(body, 4));
        if vcpu >= MAX_VCPU {
            return Err(corrupt(offset, format!("sample run of vCPU {vcpu}")));
        }
        // A reference takes at least 3 bytes, and a run holds at least one.
        if count == 0 || (count as usize).saturating_mul(3) > body.len() - 8 {
            return Err(corrupt(
                offset,
                format!(
                    "sample-run record of {} bytes cannot hold {count} references",
                    body.len()
                ),
            ));
        }
        Ok((vcpu, count))
    }

    /// Reference `i` of `count` at `body[*at..]` of a run of `vcpu` (the record at `offset`),
    /// its deltas applied; after the last, the record must end.
    #[inline]
    pub(crate) fn next(
        &mut self,
        vcpu: u32,
        body: &[u8],
        at: &mut usize,
        (i, count, offset): (u32, u32, u64),
    ) -> Result<Reference, FormatError> {
        let bad =
            |what: String| corrupt(offset, format!("sample reference {i} of {count}: {what}"));
        let past = || bad("runs past the record".into());
        let stack = read_varint(body, at).ok_or_else(past)?;
        let Some(&(_, _, carries)) = self.spans.get(stack as usize) else {
            return Err(bad(format!(
                "names stack {stack}, past the table's {}",
                self.spans.len()
            )));
        };
        let stack = stack as u32;
        let dt = read_varint(body, at).ok_or_else(past)?;
        let di = read_varint(body, at).ok_or_else(past)?;
        let sp_word = match carries {
            true => Some(read_varint(body, at).ok_or_else(past)?),
            false => None,
        };
        if i + 1 == count && *at != body.len() {
            return Err(corrupt(
                offset,
                format!(
                    "sample-run record has {} bytes after its {count} references",
                    body.len() - *at
                ),
            ));
        }
        let last = last_of(&mut self.last, vcpu);
        last.time_ns = last.time_ns.wrapping_add(unzigzag(dt));
        last.icount = last.icount.wrapping_add(unzigzag(di));
        Ok(Reference {
            stack,
            vcpu,
            time_ns: last.time_ns,
            icount: last.icount,
            sp_word,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            push_varint(&mut b, v);
            let mut at = 0;
            assert_eq!(read_varint(&b, &mut at), Some(v));
            assert_eq!(at, b.len());
        }
        for d in [0u64, 1, u64::MAX, 5u64.wrapping_neg(), 1 << 40] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!(zigzag(1u64.wrapping_neg()), 1);
        assert_eq!(read_varint(&[0x80, 0x80], &mut 0), None);
        assert_eq!(read_varint(&[0xff; 11], &mut 0), None);
    }
}
