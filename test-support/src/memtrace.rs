//! Memtrace traces built record by record with the format crate's encoder.

use kern_profile_alloc::{analyze, Analysis, Options, View};
use kern_profile_format::memtrace::{encode_record, Op};

/// A trace under construction; remembers where each record starts.
#[derive(Default)]
pub struct Trace {
    pub bytes: Vec<u8>,
    pub offsets: Vec<u64>,
}

impl Trace {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn op(
        &mut self,
        allocator: &str,
        op: Op,
        ptr: u64,
        size: u64,
        frames: &[u64],
    ) -> &mut Self {
        self.offsets.push(self.bytes.len() as u64);
        encode_record(&mut self.bytes, allocator.as_bytes(), op, ptr, size, frames);
        self
    }

    pub fn alloc(&mut self, a: &str, ptr: u64, size: u64, frames: &[u64]) -> &mut Self {
        self.op(a, Op::Alloc, ptr, size, frames)
    }

    pub fn realloc(&mut self, a: &str, ptr: u64, size: u64, frames: &[u64]) -> &mut Self {
        self.op(a, Op::Realloc, ptr, size, frames)
    }

    pub fn free(&mut self, a: &str, ptr: u64, size: u64) -> &mut Self {
        self.op(a, Op::Free, ptr, size, &[0xdead])
    }

    pub fn analyze(&self, view: View) -> Analysis {
        let opts = Options {
            view,
            ..Options::default()
        };
        analyze(&self.bytes[..], &opts).expect("analysis")
    }
}
