//! What every fuzz target shares:
//! - a heap meter (the global allocator), so that memory not bounded by the input becomes a
//!   crash libFuzzer reports with its reproducer ([`bounded`]);
//! - a reader that hands out its bytes in small pieces, as a pipe or a slow disk does, so
//!   that the readers' refill and compaction paths run ([`Trickle`]);
//! - a scratch file for APIs that only take paths ([`scratch_file`]);
//! - the targets' bodies ([`targets`]), which `fuzz_targets/*.rs` hand to libFuzzer.

pub mod targets;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

/// Heap a run may use whatever its input: the readers' 1 MiB buffers and small tables.
pub const FIXED_BUDGET: usize = 16 << 20;
/// Heap a run may use per input byte on top of [`FIXED_BUDGET`].
pub const PER_INPUT_BYTE: usize = 64;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

struct Meter;

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to `System`; the counters only observe sizes.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Meter = Meter;

/// `KP_FUZZ_NO_HEAP_BUDGET=1` turns the check off (to look past a known unbounded allocation).
fn budget_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("KP_FUZZ_NO_HEAP_BUDGET").is_none())
}

/// Runs `f` and panics when the heap it used at its peak exceeds
/// `FIXED_BUDGET + PER_INPUT_BYTE * input_len`.
pub fn bounded<T>(input_len: usize, f: impl FnOnce() -> T) -> T {
    bounded_by(FIXED_BUDGET + PER_INPUT_BYTE * input_len, input_len, f)
}

/// Runs `f` and panics when the heap it used at its peak exceeds `budget`: for inputs whose
/// bound is not their length (a compressed one: its window, and the largest record).
pub fn bounded_by<T>(budget: usize, input_len: usize, f: impl FnOnce() -> T) -> T {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let out = f();
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    assert!(
        !budget_on() || peak <= budget,
        "heap peak of {peak} bytes for a {input_len}-byte input (budget {budget}): \
         memory is not bounded by the input"
    );
    out
}

/// A reader over a byte slice that returns at most a few dozen bytes per call and is
/// interrupted now and then, as reads from a pipe can be.
pub struct Trickle<'a> {
    data: &'a [u8],
    calls: usize,
}

impl<'a> Trickle<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Trickle { data, calls: 0 }
    }
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls.is_multiple_of(7) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        // Piece sizes vary (1..=61) so that records straddle reads at every offset.
        let piece = 1 + (self.calls * 29) % 61;
        let n = piece.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Writes `data` to this process's scratch file `name` in the temporary directory and
/// returns its path (rewritten on every call; libFuzzer runs one input at a time).
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("kp-fuzz-{}-{name}", std::process::id()));
    std::fs::write(&path, data).expect("cannot write the scratch file");
    path
}
