//! Maestro's `memtrace` records, byte for byte as the i386 kernel writes them on COM2
//! (examples/kernel/src/memtrace.rs; format: Maestro's `memory::trace::sample`):
//!
//! `u8 nlen, name, u8 op, u64 ptr, u64 size, u8 nframe, nframe x u64 return addresses`
//!
//! all little-endian, no header. The virt boards have one UART, kept for text: the records go
//! to the host file named by `memtrace=FILE` on the command line, opened (`SYS_OPEN`, "wb")
//! and written (one `SYS_WRITE` a record) through semihosting, so QEMU needs
//! `-semihosting-config enable=on,target=native`. Without `memtrace=`, records are built and
//! counted all the same, and written nowhere. The frames come from a frame-record walk that starts in
//! `record` itself (arch::FP_* give the record's layout), so frame 0 is the return address
//! into the allocator entry point, frame 1 is in its caller, and the last one is in `_start`.

use core::cell::Cell;
use core::mem::MaybeUninit;

pub const OP_ALLOC: u8 = 0;
pub const OP_REALLOC: u8 = 1;
pub const OP_FREE: u8 = 2;

/// Maestro walks at most 64 frames.
const MAX_FRAMES: usize = 64;

extern "C" {
    static __stacks_start: u8;
    static __stacks_end: u8;
}

/// One CPU (the allocation phase runs on the boot CPU alone): plain cells are enough.
struct State {
    records: Cell<u64>,
    bytes: Cell<u64>,
    handle: Cell<isize>,
}
unsafe impl Sync for State {}
static STATE: State = State { records: Cell::new(0), bytes: Cell::new(0), handle: Cell::new(-1) };

pub fn records() -> u64 {
    STATE.records.get()
}

pub fn bytes() -> u64 {
    STATE.bytes.get()
}

/// Opens the host file `path` for the records (semihosting `SYS_OPEN`, mode 5 = "wb").
pub fn open(path: &[u8]) {
    let mut name = [0u8; 256];
    if path.len() >= name.len() {
        panic!("memtrace: a file name of {} bytes is too long", path.len());
    }
    name[..path.len()].copy_from_slice(path);
    let args = [name.as_ptr() as usize, 5, path.len()];
    let h = crate::arch::semihost(crate::arch::SYS_OPEN, args.as_ptr() as usize);
    if h < 0 {
        panic!("memtrace: semihosting SYS_OPEN failed for {:?}", core::str::from_utf8(path));
    }
    STATE.handle.set(h);
}

fn write(data: &[u8]) {
    let h = STATE.handle.get();
    if h < 0 {
        return;
    }
    let args = [h as usize, data.as_ptr() as usize, data.len()];
    if crate::arch::semihost(crate::arch::SYS_WRITE, args.as_ptr() as usize) != 0 {
        panic!("memtrace: semihosting SYS_WRITE failed");
    }
}

/// Writes one record. Must stay a real call (`inline(never)`): the walk starts from this
/// function's own frame record.
#[inline(never)]
pub fn record(allocator: &str, op: u8, ptr: usize, size: usize) {
    let name = allocator.as_bytes();
    let nlen = name.len().min(255);
    let head = 1 + nlen + 1 + 8 + 8 + 1;
    let mut buf = MaybeUninit::<[u8; 1 + 255 + 18 + 8 * MAX_FRAMES]>::uninit();
    let b = buf.as_mut_ptr() as *mut u8;

    // Stop at a zero frame pointer (set by _start), or at anything that does not look like
    // a frame record inside the kernel's stacks, so a corrupt chain cannot fault or loop.
    let mut n = 0;
    let lo = unsafe { &__stacks_start as *const u8 as usize };
    let hi = unsafe { &__stacks_end as *const u8 as usize };
    let mut fp = crate::arch::frame_pointer();
    while n < MAX_FRAMES && fp != 0 && fp % 8 == 0 {
        let rec = fp.wrapping_add_signed(crate::arch::FP_RECORD_OFFSET);
        if rec < lo || rec > hi - 16 {
            break;
        }
        let (next, ret) = unsafe {
            let p = rec as *const usize;
            (p.add(crate::arch::FP_NEXT_SLOT).read(), p.add(crate::arch::FP_RET_SLOT).read())
        };
        if ret == 0 {
            break;
        }
        unsafe { (b.add(head + 8 * n) as *mut u64).write_unaligned(ret as u64) };
        n += 1;
        if next != 0 && next <= fp {
            break;
        }
        fp = next;
    }

    unsafe {
        b.write(nlen as u8);
        for i in 0..nlen {
            b.add(1 + i).write(name[i]);
        }
        b.add(1 + nlen).write(op);
        (b.add(2 + nlen) as *mut u64).write_unaligned(ptr as u64);
        (b.add(10 + nlen) as *mut u64).write_unaligned(size as u64);
        b.add(head - 1).write(n as u8);
    }
    let len = head + 8 * n;
    write(unsafe { core::slice::from_raw_parts(b, len) });
    STATE.records.set(STATE.records.get() + 1);
    STATE.bytes.set(STATE.bytes.get() + len as u64);
}
