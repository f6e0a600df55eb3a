//! Two named heap allocators, each of whose public operations writes one memtrace record:
//!
//! - `kmalloc` (`kmalloc`, `krealloc`, `kfree`): small objects of 1..=2048 bytes in eight
//!   power-of-two size classes (16..2048), each with a LIFO free list, carved by a bump
//!   pointer from a 4 MiB region at RAM + 4 MiB. A 16-byte header before each object holds its
//!   class and requested size. memtrace sizes are in BYTES (the requested size); `kfree`
//!   records size 0, as Maestro's `malloc` does.
//! - `pages` (`pages_alloc`, `pages_realloc`, `pages_free`): runs of 4 KiB pages, first fit
//!   over a bitmap of 1024 pages (4 MiB at RAM + 8 MiB). memtrace sizes are in PAGES; `pages_free`
//!   records the number of pages freed.
//!
//! realloc in place when the new size fits (kmalloc: same class capacity; pages: shrinking,
//! or the following pages are free), otherwise it moves: allocate, copy, free the old block.
//! As in Maestro, realloc and free are recorded BEFORE the operation with the old pointer,
//! alloc AFTER it with the new pointer, and a moving realloc's new pointer is not recorded
//! (nor its internal alloc and free).
//!
//! Both are deterministic (no addresses depend on anything but the call sequence) and panic
//! on misuse or exhaustion: this is a test fixture, not a general-purpose allocator.
//!
//! The entry points are ordinary Rust functions (`#[inline(never)]`, Rust ABI, crate-private
//! so that LLVM may pass their arguments in registers, as rustc does for a kernel's own
//! allocator): kern-profile's allocation hooks find their parameters through DWARF.
//!
//! The heaps lie at fixed offsets from the start of RAM (`RAM_BASE`, the one thing that
//! differs between the boards): 0 on the PCs, where both x86 kernels map low physical
//! memory at the same addresses (the x86_64 kernel keeps the first GiB identity-mapped);
//! the RAM bases of QEMU's `virt` boards for the riscv64 and aarch64 kernels, which run
//! with the MMU off. Block addresses stay below 4 GiB everywhere, so the 32-bit free-list
//! links hold them.

use crate::memtrace::{record, OP_ALLOC, OP_FREE, OP_REALLOC};
use core::cell::UnsafeCell;

/// Where the machine's RAM starts (each virt kernel checks its board's `arch::RAM_BASE`
/// against it).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub const RAM_BASE: usize = 0;
#[cfg(target_arch = "riscv64")]
pub const RAM_BASE: usize = 0x8000_0000;
#[cfg(target_arch = "aarch64")]
pub const RAM_BASE: usize = 0x4000_0000;

pub const KHEAP_BASE: usize = RAM_BASE + 0x40_0000;
pub const KHEAP_SIZE: usize = 0x40_0000;
pub const PAGE_SIZE: usize = 4096;
pub const NPAGES: usize = 1024;
pub const PAGES_BASE: usize = RAM_BASE + 0x80_0000;
/// First byte above both heaps: multiboot.rs checks the machine has this much RAM.
pub const HEAP_END: usize = PAGES_BASE + NPAGES * PAGE_SIZE;

/// Per-allocator counters, in the allocator's size unit. They are what the trace shows
/// (live = sum of the current sizes of blocks alive in the trace), plus `realloc_moved`,
/// which the trace cannot show.
#[derive(Clone, Copy)]
pub struct Stats {
    pub alloc: u64,
    pub realloc: u64,
    pub realloc_moved: u64,
    pub free: u64,
    pub total_allocated: u64,
    pub live: u64,
    pub peak_live: u64,
}

impl Stats {
    const ZERO: Stats =
        Stats { alloc: 0, realloc: 0, realloc_moved: 0, free: 0, total_allocated: 0, live: 0, peak_live: 0 };

    fn on_alloc(&mut self, size: usize) {
        self.alloc += 1;
        self.total_allocated += size as u64;
        self.live += size as u64;
        self.peak_live = self.peak_live.max(self.live);
    }

    fn on_realloc(&mut self, old: usize, new: usize, moved: bool) {
        self.realloc += 1;
        self.realloc_moved += moved as u64;
        self.live = self.live - old as u64 + new as u64;
        self.peak_live = self.peak_live.max(self.live);
    }

    fn on_free(&mut self, size: usize) {
        self.free += 1;
        self.live -= size as u64;
    }
}

/// One CPU at a time (the allocation phase runs on the boot CPU alone), interrupts off: a
/// static cell handed out as `&mut` one call at a time.
struct Global<T>(UnsafeCell<T>);
unsafe impl<T> Sync for Global<T> {}
impl<T> Global<T> {
    #[allow(clippy::mut_from_ref)]
    fn get(&self) -> &mut T {
        unsafe { &mut *self.0.get() }
    }
}

// ---------------------------------------------------------------------------------------
// kmalloc

const CLASSES: [usize; 8] = [16, 32, 64, 128, 256, 512, 1024, 2048];
const HDR: usize = 16;
const MAGIC_USED: u32 = 0x4B4D_414C;
const MAGIC_FREE: u32 = 0x6B66_7265;

#[repr(C)]
struct Header {
    class: u32,
    size: u32,
    magic: u32,
    next_free: u32,
}

struct KHeap {
    free: [usize; 8],
    bump: usize,
    stats: Stats,
}

static KHEAP: Global<KHeap> = Global(UnsafeCell::new(KHeap { free: [0; 8], bump: KHEAP_BASE, stats: Stats::ZERO }));

#[inline]
pub(crate) fn kmalloc_stats() -> Stats {
    KHEAP.get().stats
}

fn class_of(size: usize) -> usize {
    match CLASSES.iter().position(|&c| size <= c) {
        Some(c) if size > 0 => c,
        _ => panic!("kmalloc: unsupported size {}", size),
    }
}

/// Takes a block of `class` from its free list or the bump region; returns the header.
fn raw_alloc(h: &mut KHeap, class: usize) -> *mut Header {
    let hdr = if h.free[class] != 0 {
        let hdr = h.free[class] as *mut Header;
        h.free[class] = unsafe { (*hdr).next_free } as usize;
        hdr
    } else {
        let end = h.bump + HDR + CLASSES[class];
        if end > KHEAP_BASE + KHEAP_SIZE {
            panic!("kmalloc: heap exhausted");
        }
        let hdr = h.bump as *mut Header;
        h.bump = end;
        hdr
    };
    unsafe {
        (*hdr).class = class as u32;
        (*hdr).magic = MAGIC_USED;
        (*hdr).next_free = 0;
    }
    hdr
}

fn raw_free(h: &mut KHeap, hdr: *mut Header) {
    unsafe {
        let class = (*hdr).class as usize;
        (*hdr).magic = MAGIC_FREE;
        (*hdr).next_free = h.free[class] as u32;
        h.free[class] = hdr as usize;
    }
}

fn header_of(ptr: *mut u8) -> *mut Header {
    let hdr = ptr.wrapping_sub(HDR) as *mut Header;
    let a = hdr as usize;
    if a < KHEAP_BASE || a >= KHEAP_BASE + KHEAP_SIZE || unsafe { (*hdr).magic } != MAGIC_USED {
        panic!("kmalloc: {:p} is not a live kmalloc block", ptr);
    }
    hdr
}

#[inline(never)]
pub(crate) fn kmalloc(size: usize) -> *mut u8 {
    let h = KHEAP.get();
    let hdr = raw_alloc(h, class_of(size));
    unsafe { (*hdr).size = size as u32 };
    h.stats.on_alloc(size);
    let ptr = (hdr as *mut u8).wrapping_add(HDR);
    record("kmalloc", OP_ALLOC, ptr as usize, size);
    ptr
}

#[inline(never)]
pub(crate) fn krealloc(ptr: *mut u8, size: usize) -> *mut u8 {
    record("kmalloc", OP_REALLOC, ptr as usize, size);
    let h = KHEAP.get();
    let hdr = header_of(ptr);
    let (class, old) = unsafe { ((*hdr).class as usize, (*hdr).size as usize) };
    let new_class = class_of(size);
    if new_class <= class {
        unsafe { (*hdr).size = size as u32 };
        h.stats.on_realloc(old, size, false);
        return ptr;
    }
    let new_hdr = raw_alloc(h, new_class);
    unsafe { (*new_hdr).size = size as u32 };
    let new_ptr = (new_hdr as *mut u8).wrapping_add(HDR);
    unsafe { core::ptr::copy_nonoverlapping(ptr, new_ptr, old) };
    raw_free(h, hdr);
    h.stats.on_realloc(old, size, true);
    new_ptr
}

#[inline(never)]
pub(crate) fn kfree(ptr: *mut u8) {
    record("kmalloc", OP_FREE, ptr as usize, 0);
    let h = KHEAP.get();
    let hdr = header_of(ptr);
    h.stats.on_free(unsafe { (*hdr).size } as usize);
    raw_free(h, hdr);
}

// ---------------------------------------------------------------------------------------
// pages

struct Pages {
    /// One bit per page, set = used.
    used: [u32; NPAGES / 32],
    /// Length of the run starting at each page (0 where no run starts).
    run: [u16; NPAGES],
    stats: Stats,
}

static PAGES: Global<Pages> = Global(UnsafeCell::new(Pages { used: [0; NPAGES / 32], run: [0; NPAGES], stats: Stats::ZERO }));

#[inline]
pub(crate) fn pages_stats() -> Stats {
    PAGES.get().stats
}

impl Pages {
    fn is_used(&self, p: usize) -> bool {
        self.used[p / 32] & (1 << (p % 32)) != 0
    }

    fn mark(&mut self, first: usize, n: usize, used: bool) {
        for p in first..first + n {
            if used {
                self.used[p / 32] |= 1 << (p % 32);
            } else {
                self.used[p / 32] &= !(1 << (p % 32));
            }
        }
    }

    fn all_free(&self, first: usize, n: usize) -> bool {
        first + n <= NPAGES && (first..first + n).all(|p| !self.is_used(p))
    }

    /// First fit; marks the run and returns its first page.
    fn take(&mut self, n: usize) -> usize {
        if n == 0 || n > NPAGES {
            panic!("pages: unsupported count {}", n);
        }
        let mut first = 0;
        while first + n <= NPAGES {
            if self.all_free(first, n) {
                self.mark(first, n, true);
                self.run[first] = n as u16;
                return first;
            }
            first += 1;
        }
        panic!("pages: no run of {} free pages", n);
    }

    fn first_of(&self, ptr: *mut u8) -> usize {
        let a = ptr as usize;
        let first = a.wrapping_sub(PAGES_BASE) / PAGE_SIZE;
        if a < PAGES_BASE || a % PAGE_SIZE != 0 || first >= NPAGES || self.run[first] == 0 {
            panic!("pages: {:p} is not a live page run", ptr);
        }
        first
    }
}

fn page_ptr(first: usize) -> *mut u8 {
    (PAGES_BASE + first * PAGE_SIZE) as *mut u8
}

#[inline(never)]
pub(crate) fn pages_alloc(n: usize) -> *mut u8 {
    let pg = PAGES.get();
    let first = pg.take(n);
    pg.stats.on_alloc(n);
    let ptr = page_ptr(first);
    record("pages", OP_ALLOC, ptr as usize, n);
    ptr
}

#[inline(never)]
pub(crate) fn pages_realloc(ptr: *mut u8, n: usize) -> *mut u8 {
    record("pages", OP_REALLOC, ptr as usize, n);
    let pg = PAGES.get();
    let first = pg.first_of(ptr);
    let old = pg.run[first] as usize;
    if n == 0 {
        panic!("pages: realloc to 0 pages");
    }
    if n <= old || pg.all_free(first + old, n - old) {
        if n < old {
            pg.mark(first + n, old - n, false);
        } else {
            pg.mark(first + old, n - old, true);
        }
        pg.run[first] = n as u16;
        pg.stats.on_realloc(old, n, false);
        return ptr;
    }
    let new_first = pg.take(n);
    unsafe { core::ptr::copy_nonoverlapping(ptr, page_ptr(new_first), old * PAGE_SIZE) };
    pg.mark(first, old, false);
    pg.run[first] = 0;
    pg.stats.on_realloc(old, n, true);
    page_ptr(new_first)
}

#[inline(never)]
pub(crate) fn pages_free(ptr: *mut u8) {
    let pg = PAGES.get();
    let first = pg.first_of(ptr);
    let n = pg.run[first] as usize;
    record("pages", OP_FREE, ptr as usize, n);
    pg.mark(first, n, false);
    pg.run[first] = 0;
    pg.stats.on_free(n);
}
