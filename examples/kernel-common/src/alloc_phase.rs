//! The deterministic allocation pattern traced in memtrace records (runs after the CPU
//! workload):
//!
//! 1. `fixed_pattern`: allocs, in-place reallocs (shrink and grow) and frees on both
//!    allocators; everything is freed.
//! 2. `churn(alloc_rounds)`: per round, `churn_kmalloc` (2 allocs, 1 in-place realloc,
//!    2 frees) and `churn_pages` (1 alloc, 1 in-place grow, 1 free): 8 records a round,
//!    everything freed, so any round count fits in the heaps (benchmarks use millions).
//! 3. `leaky_cache_fill`: the only leaks. A kmalloc index grown by the one MOVING realloc
//!    (200 -> 1500 bytes), six 48-byte kmalloc entries, and a 3-page arena: never freed.
//!
//! The order keeps the trace self-consistent for a reader that only sees the records: every
//! free names a pointer the trace knows is live, and no alloc returns a pointer the trace
//! still believes live. The moving realloc is the catch (its new pointer is not recorded,
//! and its old block is freed without a record), so it comes last, its block is never freed,
//! and its old size class (256) is not allocated again. A reader that keeps a realloc'ed
//! block under its old pointer therefore gets exact live and leaked totals.

use crate::console::Console;
use crate::kalloc::{self, kfree, kmalloc, krealloc, pages_alloc, pages_free, pages_realloc, Stats};

#[inline(never)]
pub fn run(alloc_rounds: u32) {
    fixed_pattern();
    churn(alloc_rounds);
    leaky_cache_fill();
    no_tail_call();
}

/// Placed after a function's last call so that LLVM emits `call`, not a tail `jmp`, which
/// would drop the caller from the memtrace stacks. An empty asm LLVM must keep: no code.
#[inline(always)]
fn no_tail_call() {
    unsafe { core::arch::asm!("", options(nomem, nostack, preserves_flags)) };
}

/// Writes a recognisable value into a block so allocations are used, as real ones are.
fn touch(p: *mut u8, v: u32) {
    unsafe { (p as *mut u32).write_volatile(v) };
}

#[inline(never)]
fn fixed_pattern() {
    let a = kmalloc(64);
    let b = kmalloc(100);
    let c = kmalloc(2000);
    touch(a, 1);
    touch(b, 2);
    touch(c, 3);
    let a = krealloc(a, 40); // shrink: in place
    let b = krealloc(b, 120); // grow inside the 128-byte class: in place
    kfree(c);
    kfree(a);
    kfree(b);

    let p = pages_alloc(2);
    let q = pages_alloc(8);
    touch(p, 4);
    touch(q, 5);
    let p = pages_realloc(p, 1); // shrink: in place
    pages_free(q);
    let p = pages_realloc(p, 4); // grow into q's freed pages: in place
    pages_free(p);
    no_tail_call();
}

#[inline(never)]
fn churn(rounds: u32) {
    let mut i = 0;
    while i < rounds {
        churn_kmalloc(i);
        churn_pages(i);
        i += 1;
    }
}

#[inline(never)]
fn churn_kmalloc(i: u32) {
    let s1 = 24 + (i * 37 % 200) as usize; // 24..=223 bytes
    let s2 = 8 + (i * 11 % 56) as usize; // 8..=63 bytes
    let a = kmalloc(s1);
    let b = kmalloc(s2);
    touch(a, i);
    touch(b, i);
    let a = krealloc(a, s1 - s1 / 4); // shrink: in place
    kfree(b);
    kfree(a);
    no_tail_call();
}

#[inline(never)]
fn churn_pages(i: u32) {
    let n = 1 + (i % 4) as usize; // 1..=4 pages
    let p = pages_alloc(n);
    touch(p, i);
    let p = pages_realloc(p, n + 1); // the pages after the lowest free run are free: in place
    pages_free(p);
    no_tail_call();
}

/// The leak the leak view must show: 1788 bytes of kmalloc and 3 pages, all allocated here.
#[inline(never)]
pub fn leaky_cache_fill() {
    let index = kmalloc(200);
    touch(index, 0);
    let index = krealloc(index, 1500) as *mut u32; // needs class 2048: MOVES
    let mut k = 0;
    while k < 6 {
        let entry = kmalloc(48);
        touch(entry, k);
        unsafe { index.add(k as usize).write_volatile(entry as u32) };
        k += 1;
    }
    let arena = pages_alloc(3);
    touch(arena, 0xCAC4E);
}

/// The allocators' counters and the memtrace totals, on the x86 kernels' COM1: compiled in
/// this crate, as before the virt kernels shared it.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub fn report(out: &mut crate::serial::Com1) {
    report_on(out)
}

/// `report` on the virt kernels: compiled in the kernel crate, on its console, as when this
/// was part of it (no wrapper: rustc would inline a wrapper into the caller, and then LLVM
/// the rest).
#[cfg(any(target_arch = "riscv64", target_arch = "aarch64"))]
pub use report_on as report;

/// The allocators' counters and the memtrace totals, on `out`.
#[cfg_attr(any(target_arch = "x86", target_arch = "x86_64"), inline(always))]
pub fn report_on<C: Console>(out: &mut C) {
    line(out, "kmalloc", "bytes", &kalloc::kmalloc_stats());
    line(out, "pages", "pages", &kalloc::pages_stats());
    out.str("memtrace: ");
    out.dec(crate::memtrace::records());
    out.str(" records, ");
    out.dec(crate::memtrace::bytes());
    out.str(" bytes\n");
}

fn line<C: Console>(out: &mut C, name: &str, unit: &str, s: &Stats) {
    out.str("alloc ");
    out.str(name);
    for (label, v) in [
        (": alloc=", s.alloc),
        (" realloc=", s.realloc),
        (" (moved=", s.realloc_moved),
        (") free=", s.free),
        (" total_allocated=", s.total_allocated),
        (" peak_live=", s.peak_live),
        (" live_at_end=", s.live),
    ] {
        out.str(label);
        out.dec(v);
    }
    out.str(" (");
    out.str(unit);
    out.str(")\n");
}
