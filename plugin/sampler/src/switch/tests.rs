//! A switch read on a fake x86_64 guest: the leaving task's caller from its stack, both
//! tasks from the argument registers, its state, and the next task's record.

use std::collections::HashMap;

use super::*;
use crate::capture::Reg;
use crate::task::{Current, TaskSpec, PF_KTHREAD};
use kern_profile_format::TaskUnknown;

const ENTRY: u64 = 0xffff_ffff_81c0_0100;
const CALLER: u64 = 0xffff_ffff_81a0_2345;
const SP: u64 = 0xffff_c900_0001_3e80;
const PREV: u64 = 0xffff_8880_0300_0000;
const NEXT: u64 = 0xffff_8880_0400_0000;
const STATE: u32 = 0x18;

fn task_spec() -> TaskSpec {
    TaskSpec {
        current: Current::PerCpu { offset: 0x1fb80 },
        tid: 0x5c8,
        pid: 0x5cc,
        name: 0x7a0,
        name_len: 16,
        leader: 0x5e8,
        flags: 0x2c,
        kernel_thread_flag: PF_KTHREAD,
        state: Some(STATE),
    }
}

#[derive(Default)]
struct Guest(HashMap<Reg, u64>, HashMap<&'static str, u64>);

impl RegisterReader for Guest {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        self.0.get(&reg).copied()
    }
}

impl RegisterFile for Guest {
    fn register(&mut self, name: &'static str) -> Option<u64> {
        self.1.get(name).copied()
    }
}

#[derive(Default)]
struct Mem(HashMap<u64, u8>);

impl Mem {
    fn put(&mut self, addr: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            self.0.insert(addr + i as u64, *b);
        }
    }

    fn task(&mut self, at: u64, tid: u32, name: &[u8], state: u32) {
        let s = task_spec();
        self.put(at + s.tid as u64, &tid.to_le_bytes());
        self.put(at + s.pid as u64, &tid.to_le_bytes());
        let mut n = [0u8; 16];
        n[..name.len()].copy_from_slice(name);
        self.put(at + s.name as u64, &n);
        self.put(at + s.flags as u64, &0u32.to_le_bytes());
        self.put(at + s.leader as u64, &at.to_le_bytes());
        self.put(at + STATE as u64, &state.to_le_bytes());
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> bool {
        for (i, o) in out.iter_mut().enumerate() {
            match self.0.get(&(addr + i as u64)) {
                Some(b) => *o = *b,
                None => return false,
            }
        }
        true
    }
}

fn guest(prev_state: u32) -> (Guest, Mem) {
    let mut g = Guest::default();
    g.0.insert(Reg::StackPointer, SP);
    g.0.insert(Reg::FramePointer, 0);
    g.0.insert(Reg::Privilege, 0x10);
    g.1.insert("rdi", PREV);
    g.1.insert("rsi", NEXT);
    let mut mem = Mem::default();
    // The stack's page (the walk reads ahead), the caller's return address at SP.
    mem.put(SP & !0xfff, &[0; 4096]);
    mem.put(SP, &CALLER.to_le_bytes());
    mem.task(PREV, 70, b"sleep", prev_state);
    mem.task(NEXT, 71, b"gzip", 0);
    (g, mem)
}

fn reader() -> SwitchReader {
    let spec = SwitchSpec {
        entry: ENTRY,
        prev: Location::Register("rdi"),
        next: Location::Register("rsi"),
    };
    SwitchReader::new(spec, Arch::X86_64, 16)
}

#[test]
fn a_blocked_task_leaves_with_its_caller_and_the_next_one_is_named() {
    let (mut g, mem) = guest(1);
    let mut tasks = TaskReader::new(task_spec(), Arch::X86_64);
    let (s, next) = reader().at_switch(
        0,
        500,
        Some(9_000),
        &mut g,
        |a, o| mem.read(a, o),
        &mut tasks,
    );
    assert_eq!((s.prev, s.next, s.left_as), (PREV, NEXT, LeftAs::Blocked));
    assert_eq!((s.pc, s.icount, s.time_ns), (ENTRY, Some(9_000), 500));
    assert_eq!(s.frames.first(), Some(&CALLER), "{:x?}", s.frames);
    let next = next.task.unwrap();
    assert_eq!(
        (next.tid, next.thread(), next.address),
        (71, "gzip".into(), NEXT)
    );
}

#[test]
fn a_preempted_task_is_runnable_and_an_unreadable_state_is_unknown() {
    let (mut g, mem) = guest(0);
    let mut tasks = TaskReader::new(task_spec(), Arch::X86_64);
    let mut r = reader();
    let (s, _) = r.at_switch(0, 1, None, &mut g, |a, o| mem.read(a, o), &mut tasks);
    assert_eq!((s.left_as, s.icount), (LeftAs::Runnable, None));
    r.recycle(s);
    // A next task the guest's memory does not hold: named unknown, the switch kept.
    g.1.insert("rsi", 0x1000);
    g.1.insert("rdi", NEXT + 0x10_0000);
    let (s, next) = r.at_switch(0, 2, None, &mut g, |a, o| mem.read(a, o), &mut tasks);
    assert_eq!(s.left_as, LeftAs::Unknown);
    assert_eq!(next.task, Err(TaskUnknown::BadPointer));
}
