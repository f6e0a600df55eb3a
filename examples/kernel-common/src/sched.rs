//! `sched=on`: a cooperative round-robin scheduler of three named tasks, what the plugin's
//! `tasks=example` and `switches=example` read (docs/plugin-arguments.md).
//!
//! These kernels have no threads, so a task here is a named descriptor and a slice function:
//! there is no stack switch. The scheduler loop, on the boot stack, calls `switch_to(prev,
//! next)` (which makes `next` the current task in `CURRENT_TASK`) and then runs `next`'s
//! slice, a distinct function per task, so that a profile tells the tasks apart by their code
//! as well as by their name. The slices' iteration counts give the tasks about 50%, 30% and
//! 20% of the instructions; the exact counts are the switch records' (e2e/tests/tasks_example.rs).
//!
//! ```text
//! run                       loop over `rounds`, each task once per round
//! ├─ switch_to(prev, next)  CURRENT_TASK = next
//! └─ hasher_slice | sorter_slice | spinner_slice
//! ```
//!
//! After the last round `switch_to(last, null)`: no task is current in the phases after.

/// A task as the plugin's `tasks=example` reads it (`CURRENT_TASK->id,name`).
#[repr(C)]
pub struct Task {
    pub id: u32,
    /// NUL-padded.
    pub name: [u8; 16],
    /// Loop iterations of one slice.
    slice_iters: usize,
    slice: fn(usize, usize) -> usize,
}

/// The running task; null outside `sched=on`'s phase.
#[no_mangle]
pub static mut CURRENT_TASK: *const Task = core::ptr::null();

/// The task the last switch left, so that `switch_to` uses both of its arguments.
#[no_mangle]
pub static mut LAST_LEFT_TASK: *const Task = core::ptr::null();

const fn name(s: &[u8]) -> [u8; 16] {
    let mut n = [0u8; 16];
    let mut i = 0;
    while i < s.len() && i < 15 {
        n[i] = s[i];
        i += 1;
    }
    n
}

/// The tasks, in their round-robin order.
pub static TASKS: [Task; 3] = [
    Task { id: 1, name: name(b"hasher"), slice_iters: 5_000, slice: hasher_slice },
    Task { id: 2, name: name(b"sorter"), slice_iters: 1_700, slice: sorter_slice },
    Task { id: 3, name: name(b"spinner"), slice_iters: 2_500, slice: spinner_slice },
];

/// Default `rounds` with `sched=on`: each task runs this many slices.
pub const DEFAULT_SCHED_ROUNDS: u32 = 400;

/// Runs `rounds` rounds of the three tasks; returns their checksum.
#[inline(never)]
pub fn run(rounds: u32) -> usize {
    let mut acc: usize = 0x1234_5678;
    let mut prev: *const Task = core::ptr::null();
    let mut r = 0;
    while r < rounds {
        let mut i = 0;
        while i < TASKS.len() {
            let next: *const Task = &TASKS[i];
            switch_to(prev, next);
            acc = (TASKS[i].slice)(TASKS[i].slice_iters, acc ^ r as usize);
            prev = next;
            i += 1;
        }
        r += 1;
    }
    switch_to(prev, core::ptr::null());
    acc
}

/// The switch: `next` becomes the current task. `#[no_mangle] extern "C"`: the plugin's
/// `switches=example` hooks its first instruction and reads its two arguments by the C
/// convention.
#[no_mangle]
#[inline(never)]
pub extern "C" fn switch_to(prev: *const Task, next: *const Task) {
    unsafe {
        core::ptr::addr_of_mut!(LAST_LEFT_TASK).write_volatile(prev);
        core::ptr::addr_of_mut!(CURRENT_TASK).write_volatile(next);
    }
}

/// "hasher": an FNV-1a-like mix.
#[inline(never)]
fn hasher_slice(iters: usize, seed: usize) -> usize {
    let n = crate::opaque!(as usize, iters);
    let mut h = seed;
    let mut i: usize = 0;
    while i < n {
        h = crate::opaque!(as usize, (h ^ i) * 0x0100_0193);
        i += 1;
    }
    h
}

/// "sorter": a compare-and-swap of two running values.
#[inline(never)]
fn sorter_slice(iters: usize, seed: usize) -> usize {
    let n = crate::opaque!(as usize, iters);
    let (mut a, mut b) = (seed, !seed);
    let mut i: usize = 0;
    while i < n {
        a = crate::opaque!(as usize, a + i * 0x9E37);
        if a > b {
            core::mem::swap(&mut a, &mut b);
        }
        i += 1;
    }
    a ^ b
}

/// "spinner": a rotate-and-add spin.
#[inline(never)]
fn spinner_slice(iters: usize, seed: usize) -> usize {
    let n = crate::opaque!(as usize, iters);
    let mut s = seed;
    let mut i: usize = 0;
    while i < n {
        s = crate::opaque!(as usize, ((s << 7) | (s >> (usize::BITS - 7))) + 0x7F4A_7C15);
        i += 1;
    }
    s
}
