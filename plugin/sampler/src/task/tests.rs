//! The task reader on fake guest memory: x86_64's per-CPU slot through either GS base, a
//! register-held task, changes and restatements, and what bad memory gives.

use std::collections::HashMap;

use super::*;

const GS: u64 = 0xffff_8880_7fc0_0000;
const SLOT: u64 = 0x1fb80;
const TASK: u64 = 0xffff_8880_0300_0000;
const LEADER: u64 = 0xffff_8880_0400_0000;

fn spec(current: Current) -> TaskSpec {
    TaskSpec {
        current,
        tid: 0x5c8,
        pid: 0x5cc,
        name: 0x7a0,
        name_len: 16,
        leader: 0x5e8,
        flags: 0x2c,
        kernel_thread_flag: PF_KTHREAD,
        state: None,
    }
}

#[derive(Default)]
struct Regs(HashMap<Reg, u64>);

impl RegisterReader for Regs {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        self.0.get(&reg).copied()
    }
}

/// Guest memory, byte by byte; a read of any byte not there fails.
#[derive(Default, Clone)]
struct Mem(HashMap<u64, u8>);

impl Mem {
    fn put(&mut self, addr: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            self.0.insert(addr + i as u64, *b);
        }
    }

    fn task(&mut self, at: u64, tid: u32, pid: u32, name: &[u8], flags: u32, leader: u64) {
        let s = spec(Current::InRegister);
        self.put(at + s.tid as u64, &tid.to_le_bytes());
        self.put(at + s.pid as u64, &pid.to_le_bytes());
        let mut n = [0u8; 16];
        n[..name.len()].copy_from_slice(name);
        self.put(at + s.name as u64, &n);
        self.put(at + s.flags as u64, &flags.to_le_bytes());
        self.put(at + s.leader as u64, &leader.to_le_bytes());
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

fn x86_64() -> (TaskReader, Regs, Mem) {
    let mut mem = Mem::default();
    mem.put(GS + SLOT, &TASK.to_le_bytes());
    mem.task(TASK, 71, 70, b"worker", 0, LEADER);
    mem.task(LEADER, 70, 70, b"gzip", 0, LEADER);
    let mut regs = Regs::default();
    regs.0.insert(Reg::TaskBase, GS);
    regs.0.insert(Reg::TaskBaseUser, 0x7f00_1234_0000);
    let reader = TaskReader::new(spec(Current::PerCpu { offset: SLOT }), Arch::X86_64);
    (reader, regs, mem)
}

fn read(
    r: &mut TaskReader,
    user: bool,
    start: bool,
    regs: &mut Regs,
    mem: &Mem,
) -> Option<TaskRecord> {
    let pc = if user {
        0x40_1000
    } else {
        0xffff_ffff_8100_0000
    };
    r.read(pc, user, None, 5, 1, start, regs, |a, o| mem.read(a, o))
}

#[test]
fn a_thread_is_named_with_its_process_and_written_once() {
    let (mut r, mut regs, mem) = x86_64();
    let rec = read(&mut r, false, true, &mut regs, &mem).expect("first sight");
    let t = rec.task.expect("known");
    assert_eq!(
        (t.address, t.tid, t.pid, t.kernel_thread),
        (TASK, 71, 70, false)
    );
    assert_eq!(
        (t.thread().as_str(), t.process().as_str()),
        ("worker", "gzip")
    );
    assert_eq!(rec.vcpu, 1);
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
    // A new batch restates it.
    assert_eq!(read(&mut r, false, true, &mut regs, &mem), Some(rec));
}

#[test]
fn user_mode_reads_the_swapped_gs_base_and_entry_stubs_the_kernel_one() {
    let (mut r, mut regs, mem) = x86_64();
    // In user mode the kernel's base is in k_gs_base.
    regs.0.insert(Reg::TaskBase, 0);
    regs.0.insert(Reg::TaskBaseUser, GS);
    let t = read(&mut r, true, true, &mut regs, &mem).unwrap().task;
    assert_eq!(t.unwrap().tid, 71);
    // In kernel mode before swapgs: gs_base is still the user's, k_gs_base the kernel's.
    let (mut r, mut regs, mem) = x86_64();
    regs.0.insert(Reg::TaskBase, 0x7f00_1234_0000);
    regs.0.insert(Reg::TaskBaseUser, GS);
    assert_eq!(
        read(&mut r, false, true, &mut regs, &mem)
            .unwrap()
            .task
            .unwrap()
            .tid,
        71
    );
}

#[test]
fn a_change_of_task_or_of_name_writes_a_record() {
    let (mut r, mut regs, mut mem) = x86_64();
    read(&mut r, false, true, &mut regs, &mem).unwrap();
    // exec: the same task renames itself.
    mem.task(TASK, 71, 70, b"gunzip", 0, LEADER);
    let t = read(&mut r, false, false, &mut regs, &mem)
        .unwrap()
        .task
        .unwrap();
    assert_eq!(t.thread(), "gunzip");
    // Another task: a kernel thread, its own leader.
    const KT: u64 = 0xffff_8880_0500_0000;
    mem.task(KT, 12, 12, b"kworker/0:1", PF_KTHREAD, KT);
    mem.put(GS + SLOT, &KT.to_le_bytes());
    let t = read(&mut r, false, false, &mut regs, &mem)
        .unwrap()
        .task
        .unwrap();
    assert!(t.kernel_thread);
    assert_eq!((t.pid, t.process().as_str()), (12, "kworker/0:1"));
}

#[test]
fn a_register_held_task_needs_no_memory_for_its_pointer() {
    let mut mem = Mem::default();
    mem.task(TASK, 9, 9, b"sh", 0, TASK);
    let mut regs = Regs::default();
    regs.0.insert(Reg::TaskBase, TASK);
    let mut r = TaskReader::new(spec(Current::InRegister), Arch::Aarch64);
    let t = read(&mut r, false, true, &mut regs, &mem)
        .unwrap()
        .task
        .unwrap();
    assert_eq!((t.tid, t.thread().as_str()), (9, "sh"));
    // aarch64 has no user-mode register for it (TPIDR_EL1 holds an offset, never taken for
    // a task): unknown, said once.
    regs.0.insert(Reg::TaskBaseUser, TASK);
    let rec = read(&mut r, true, false, &mut regs, &mem).unwrap();
    assert_eq!(rec.task, Err(TaskUnknown::NoRegister));
    assert_eq!(read(&mut r, true, false, &mut regs, &mem), None);
}

#[test]
fn seeing_every_switch_a_user_sample_without_register_is_the_last_task_named() {
    let mut mem = Mem::default();
    mem.task(TASK, 9, 9, b"sh", 0, TASK);
    mem.task(LEADER, 12, 12, b"cat", 0, LEADER);
    let mut regs = Regs::default();
    regs.0.insert(Reg::TaskBase, TASK);
    let mut r = TaskReader::new(spec(Current::InRegister), Arch::Aarch64).seeing_switches();
    read(&mut r, false, true, &mut regs, &mem).unwrap();
    // User mode: the kernel-mode sample's task, nothing new to write.
    assert_eq!(read(&mut r, true, false, &mut regs, &mem), None);
    // A switch names the next task; the user samples after it are that task's.
    let next = r.switched_to(LEADER, 6, 1, |a, o| mem.read(a, o));
    assert_eq!(next.task.unwrap().thread(), "cat");
    assert_eq!(read(&mut r, true, false, &mut regs, &mem), None);
    let restated = read(&mut r, true, true, &mut regs, &mem).unwrap();
    assert_eq!(restated.task.unwrap().tid, 12);
    // Kernel entry code before it puts the task back in the register: the user's stack
    // pointer is there, and the task is still the one switched to.
    regs.0.insert(Reg::TaskBase, 0x7fff_f000);
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
    // Not seeing switches, that is a bad pointer.
    let mut blind = TaskReader::new(spec(Current::InRegister), Arch::Aarch64);
    let rec = read(&mut blind, false, true, &mut regs, &mem).unwrap();
    assert_eq!(rec.task, Err(TaskUnknown::BadPointer));
    // The page-table-isolation trampoline: a kernel address not mapped yet.
    regs.0.insert(Reg::TaskBase, 0xffff_8880_0600_0000);
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
}

#[test]
fn bad_pointers_unreadable_tasks_and_names_without_terminator_are_unknown() {
    let (mut r, mut regs, mut mem) = x86_64();
    // The slot holds a user address.
    mem.put(GS + SLOT, &0x4000u64.to_le_bytes());
    assert_eq!(
        read(&mut r, false, true, &mut regs, &mem).unwrap().task,
        Err(TaskUnknown::BadPointer)
    );
    // A kernel address with nothing there.
    mem.put(GS + SLOT, &0xffff_8880_0600_0000u64.to_le_bytes());
    assert_eq!(
        read(&mut r, false, false, &mut regs, &mem).unwrap().task,
        Err(TaskUnknown::Unreadable)
    );
    // Sixteen letters, no NUL; then control bytes.
    mem.put(GS + SLOT, &TASK.to_le_bytes());
    mem.put(TASK + 0x7a0, b"abcdefghijklmnop");
    assert_eq!(
        read(&mut r, false, false, &mut regs, &mem).unwrap().task,
        Err(TaskUnknown::BadName)
    );
    mem.put(TASK + 0x7a0, b"a\x01b\0\0\0\0\0\0\0\0\0\0\0\0\0");
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
    // No GS base at all.
    let mut none = Regs::default();
    assert_eq!(
        read(&mut r, false, false, &mut none, &mem).unwrap().task,
        Err(TaskUnknown::NoRegister)
    );
}

#[test]
fn kernel_mode_below_the_kernel_is_a_boot_stage() {
    let (mut r, mut regs, mem) = x86_64();
    let rec = r.read(0x400_0000, false, None, 5, 0, true, &mut regs, |a, o| {
        mem.read(a, o)
    });
    assert_eq!(rec.unwrap().task, Err(TaskUnknown::Boot));
    assert_eq!(
        read(&mut r, false, false, &mut regs, &mem)
            .unwrap()
            .task
            .unwrap()
            .tid,
        71
    );
}

#[test]
fn a_thread_whose_leader_is_gone_is_unknown_not_misnamed() {
    let (mut r, mut regs, mut mem) = x86_64();
    mem.put(TASK + 0x5e8, &0u64.to_le_bytes());
    assert_eq!(
        read(&mut r, false, true, &mut regs, &mem).unwrap().task,
        Err(TaskUnknown::BadPointer)
    );
}

#[test]
fn in_the_same_address_space_a_rename_shows_within_the_checks_period() {
    let (mut r, mut regs, mut mem) = x86_64();
    let at = |r: &mut TaskReader, regs: &mut Regs, mem: &Mem, space: u64| {
        let pc = 0xffff_ffff_8100_0000;
        r.read(pc, false, Some(space), 5, 1, false, regs, |a, o| {
            mem.read(a, o)
        })
    };
    assert!(at(&mut r, &mut regs, &mem, 0x1000).is_some());
    mem.task(TASK, 71, 70, b"renamed", 0, LEADER);
    // Not read again at once in the same address space...
    let seen: Vec<bool> = (0..=NAME_CHECK_EVERY)
        .map(|_| at(&mut r, &mut regs, &mem, 0x1000).is_some())
        .collect();
    // ...but within the period; and at once in another address space (an exec).
    assert_eq!(seen.iter().filter(|&&s| s).count(), 1, "{seen:?}");
    assert_eq!(seen.last(), Some(&true));
    mem.task(TASK, 71, 70, b"execd", 0, LEADER);
    let t = at(&mut r, &mut regs, &mem, 0x2000).unwrap().task.unwrap();
    assert_eq!(t.thread(), "execd");
}

/// `tasks=POINTER->ID,NAME`: a global pointer in low memory (the i386 example kernel's), null
/// before the first task; pid = tid = ID, no flags read, no register needed.
#[test]
fn a_described_kernel_s_global_pointer_names_its_task() {
    const CURRENT: u64 = 0x11_38c8;
    const HASHER: u64 = 0x10_d93c;
    let spec = crate::task::dwarf::ResolvedTasks {
        address: CURRENT,
        strukt: "Task".into(),
        id: 0,
        name: 4,
        name_len: 16,
        name_array_len: 16,
    }
    .spec();
    let mut r = TaskReader::new(spec, Arch::I386);
    let mut mem = Mem::default();
    mem.put(CURRENT, &0u32.to_le_bytes());
    mem.put(HASHER, &7u32.to_le_bytes());
    mem.put(HASHER + 4, b"hasher\0\0\0\0\0\0\0\0\0\0");
    let mut regs = Regs::default();
    let mut read = |r: &mut TaskReader, mem: &Mem| {
        r.read(0x10_7c50, false, None, 1, 0, false, &mut regs, |a, b| {
            mem.read(a, b)
        })
    };
    let before = read(&mut r, &mem).unwrap();
    assert_eq!(before.task, Err(TaskUnknown::BadPointer));
    mem.put(CURRENT, &(HASHER as u32).to_le_bytes());
    let t = read(&mut r, &mem).unwrap().task.unwrap();
    assert_eq!(
        (t.address, t.tid, t.pid, t.kernel_thread),
        (HASHER, 7, 7, false)
    );
    assert_eq!(&t.thread_name[..7], b"hasher\0");
    assert_eq!(t.process_name, t.thread_name);
    assert_eq!(read(&mut r, &mem), None);
}

#[test]
fn just_after_a_switch_a_stale_current_task_pointer_is_the_switched_to_task() {
    let (r, mut regs, mut mem) = x86_64();
    let mut r = r.seeing_switches();
    mem.task(LEADER, 70, 70, b"gzip", 0, LEADER);
    read(&mut r, false, true, &mut regs, &mem).unwrap();
    // The hook saw the switch to LEADER; the per-CPU slot still holds TASK (x86 stores the
    // next task in `__switch_to`, after the hook).
    let next = r.switched_to(LEADER, 6, 1, |a, o| mem.read(a, o));
    assert_eq!(next.task.unwrap().tid, 70);
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
    // Once the kernel stored it, the pointer and the switch agree: nothing new either.
    mem.put(GS + SLOT, &LEADER.to_le_bytes());
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
    // A pointer that disagrees for longer (a switch the hook missed) is believed.
    mem.put(GS + SLOT, &TASK.to_le_bytes());
    let rec = read(&mut r, false, false, &mut regs, &mem).unwrap();
    assert_eq!(rec.task.unwrap().tid, 71);
}

#[test]
fn the_slot_read_ahead_is_the_one_read_uses() {
    let (r, mut regs, _) = x86_64();
    assert_eq!(r.current_slot(false, &mut regs), Some(GS + SLOT));
    // User mode: k_gs_base holds no kernel address, gs_base does (before a swapgs).
    assert_eq!(r.current_slot(true, &mut regs), Some(GS + SLOT));
    let mut none = Regs::default();
    assert_eq!(r.current_slot(false, &mut none), None);
    let reg = TaskReader::new(spec(Current::InRegister), Arch::Aarch64);
    assert_eq!(reg.current_slot(false, &mut regs), None);
}

#[test]
fn a_task_recorded_again_after_an_unknown_stretch_needs_no_memory() {
    let mut mem = Mem::default();
    mem.task(TASK, 9, 9, b"sh", 0, TASK);
    let mut regs = Regs::default();
    regs.0.insert(Reg::TaskBase, TASK);
    let mut r = TaskReader::new(spec(Current::InRegister), Arch::Aarch64).seeing_switches();
    let first = read(&mut r, false, true, &mut regs, &mem).unwrap();
    // Identity-mapped kernel code (below the kernel's addresses), then a sample whose task
    // memory the page tables of that moment do not reach: the task is the one it was.
    let boot = r.read(0x4000_0000, false, None, 6, 1, false, &mut regs, |_, _| {
        false
    });
    assert_eq!(boot.unwrap().task, Err(TaskUnknown::Boot));
    let again = r.read(
        0xffff_ffff_8100_0000,
        false,
        None,
        7,
        1,
        false,
        &mut regs,
        |_, _| false,
    );
    assert_eq!(again.unwrap().task, first.task);
}

/// i386 Linux: FS's base in kernel mode is the CPU's `__per_cpu_offset`, added to the
/// per-CPU symbol's link address (32 bits wrap); in user mode FS is the program's, and the
/// task is unknown (the switches name it, where they are seen).
#[test]
fn i386_adds_the_fs_base_offset_to_the_symbol_in_kernel_mode_only() {
    const SYMBOL: u64 = 0xc1e5_e6e8;
    const OFFSET: u64 = 0x3600_0000; // the CPU's area at 0xf7e5_e6e8
    const TASK32: u64 = 0xc340_0000;
    let mut mem = Mem::default();
    mem.put(0xf7e5_e6e8, &(TASK32 as u32).to_le_bytes());
    mem.task(TASK32, 7, 7, b"md5sum", 0, TASK32);
    let mut regs = Regs::default();
    regs.0.insert(Reg::TaskBase, OFFSET);
    let mut r = TaskReader::new(spec(Current::PerCpu { offset: SYMBOL }), Arch::I386);
    let pc = 0xc100_0000;
    let t = r.read(pc, false, None, 5, 0, true, &mut regs, |a, o| {
        mem.read(a, o)
    });
    let t = t.unwrap().task.unwrap();
    assert_eq!(
        (t.address, t.tid, t.process().as_str()),
        (TASK32, 7, "md5sum")
    );
    // A base whose sum wraps past 4 GiB: the 32-bit address.
    let mut wrapped = Mem::default();
    wrapped.put(0x0010_0000 + 0xc000_0000, &(TASK32 as u32).to_le_bytes());
    wrapped.task(TASK32, 8, 8, b"dd", 0, TASK32);
    regs.0.insert(
        Reg::TaskBase,
        0x0010_0000 + 0xc000_0000 + (1 << 32) - SYMBOL,
    );
    let mut r = TaskReader::new(spec(Current::PerCpu { offset: SYMBOL }), Arch::I386);
    let t = r.read(pc, false, None, 5, 0, true, &mut regs, |a, o| {
        wrapped.read(a, o)
    });
    assert_eq!(t.unwrap().task.unwrap().tid, 8);
    // User mode: FS is the program's.
    let mut r = TaskReader::new(spec(Current::PerCpu { offset: SYMBOL }), Arch::I386);
    let t = r.read(0x0804_8000, true, None, 5, 0, true, &mut regs, |a, o| {
        mem.read(a, o)
    });
    assert_eq!(t.unwrap().task, Err(TaskUnknown::NoRegister));
}

/// aarch64 Linux with `__entry_task` in its kallsyms: `SP_EL0` in kernel mode; in user mode
/// (where `SP_EL0` is the program's stack pointer) and in entry code before the kernel
/// loads it, the per-CPU slot: the symbol's link address plus `TPIDR_EL1`.
#[test]
fn aarch64_user_mode_reads_the_per_cpu_entry_task() {
    const ENTRY_TASK: u64 = 0xffff_8000_0a2d_7b48;
    const TPIDR: u64 = 0x0000_7fff_7ae4_0000;
    let slot = ENTRY_TASK.wrapping_add(TPIDR);
    let mut mem = Mem::default();
    mem.task(TASK, 9, 9, b"sh", 0, TASK);
    mem.task(LEADER, 101, 101, b"gzip", 0, LEADER);
    mem.put(slot, &LEADER.to_le_bytes());
    let mut regs = Regs::default();
    regs.0.insert(Reg::TaskBase, TASK);
    regs.0.insert(Reg::TaskBaseUser, TPIDR);
    let spec = spec(Current::RegisterElsePerCpu { offset: ENTRY_TASK });
    let mut r = TaskReader::new(spec, Arch::Aarch64);
    // Kernel mode: the register, not the slot.
    let t = read(&mut r, false, true, &mut regs, &mem)
        .unwrap()
        .task
        .unwrap();
    assert_eq!(t.thread(), "sh");
    // User mode: the slot.
    regs.0.insert(Reg::TaskBase, 0xffff_f000);
    let t = read(&mut r, true, false, &mut regs, &mem)
        .unwrap()
        .task
        .unwrap();
    assert_eq!((t.tid, t.thread().as_str()), (101, "gzip"));
    // Entry code with the program's stack pointer still in SP_EL0: the slot, nothing new.
    assert_eq!(read(&mut r, false, false, &mut regs, &mem), None);
    // The slot is read ahead in either mode.
    assert_eq!(r.current_slot(true, &mut regs), Some(slot));
    assert_eq!(r.current_slot(false, &mut regs), Some(slot));
    // No TPIDR_EL1: user mode has no register; entry code's is a bad pointer.
    regs.0.remove(&Reg::TaskBaseUser);
    let rec = read(&mut r, true, false, &mut regs, &mem).unwrap();
    assert_eq!(rec.task, Err(TaskUnknown::NoRegister));
    let rec = read(&mut r, false, false, &mut regs, &mem).unwrap();
    assert_eq!(rec.task, Err(TaskUnknown::BadPointer));
    assert_eq!(r.current_slot(true, &mut regs), None);
    // A slot whose memory cannot be read (user mode at EL0: kernel memory is denied), or
    // that is no kernel address: in user mode nothing names the task; in entry code the
    // register is still a bad pointer.
    for tpidr in [TPIDR + 0x1000, 0x8000_0000_0000_0000] {
        regs.0.insert(Reg::TaskBaseUser, tpidr);
        let mut r = TaskReader::new(spec, Arch::Aarch64);
        let rec = read(&mut r, true, true, &mut regs, &mem).unwrap();
        assert_eq!(rec.task, Err(TaskUnknown::NoRegister));
        let rec = read(&mut r, false, false, &mut regs, &mem).unwrap();
        assert_eq!(rec.task, Err(TaskUnknown::BadPointer));
    }
}
