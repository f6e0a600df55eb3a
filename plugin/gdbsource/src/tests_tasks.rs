//! Tasks through the fake stub: each vCPU's task named from x86_64's `gs_base` (in `g`), its
//! current-task pointer read ahead with the registers, and a task seen again not read again.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use kern_profile_format::TaskIdentity;
use kern_profile_sampler::task::{Current, TaskSpec, PF_KTHREAD};

use crate::fake::{self, Stub};
use crate::sampling::{sample, SampleOptions};
use crate::{stacks, Limits, StackOptions};

const STACK: u64 = 0xffff_c900_0001_0000;
const SLOT: u64 = 0x1fb80;
const GS: [u64; 2] = [0xffff_8880_07c0_0000, 0xffff_8880_07d0_0000];
const TASKS: [u64; 2] = [0xffff_8880_0300_0000, 0xffff_8880_0310_0000];
const LEADER: u64 = 0xffff_8880_0320_0000;

fn spec() -> TaskSpec {
    TaskSpec {
        current: Current::PerCpu { offset: SLOT },
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

/// An x86_64 vCPU in the kernel, its per-CPU base `gs`: QEMU's `g` layout (rip at 16 * 8,
/// cs after eflags, fs_base gs_base k_gs_base cr0 cr2 cr3 after the segments).
fn x86_64_regs(pc: u64, gs: u64) -> Vec<u8> {
    let mut g = vec![0u8; 608];
    let mut put = |at: usize, v: &[u8]| g[at..at + v.len()].copy_from_slice(v);
    put(7 * 8, &(STACK + 0x800).to_le_bytes());
    put(16 * 8, &pc.to_le_bytes());
    put(16 * 8 + 12, &0x10u32.to_le_bytes());
    put(172, &gs.to_le_bytes());
    put(188 + 16, &0x1000u64.to_le_bytes());
    g
}

fn task(tid: u32, pid: u32, name: &[u8], leader: u64) -> Vec<u8> {
    let s = spec();
    let mut m = vec![0u8; 0x800];
    let mut put = |at: u32, v: &[u8]| m[at as usize..at as usize + v.len()].copy_from_slice(v);
    put(s.tid, &tid.to_le_bytes());
    put(s.pid, &pid.to_le_bytes());
    put(s.name, name);
    put(s.leader, &leader.to_le_bytes());
    m
}

fn stub() -> Stub {
    Stub {
        architecture: "i386:x86-64",
        regs: vec![
            x86_64_regs(0xffff_ffff_8100_0010, GS[0]),
            x86_64_regs(0xffff_ffff_8100_0020, GS[1]),
        ],
        memory: vec![
            (STACK, vec![0u8; 0x1000]),
            (GS[0] + SLOT, TASKS[0].to_le_bytes().to_vec()),
            (GS[1] + SLOT, TASKS[1].to_le_bytes().to_vec()),
            (TASKS[0], task(1, 1, b"init", TASKS[0])),
            (TASKS[1], task(71, 70, b"worker", LEADER)),
            (LEADER, task(70, 70, b"gzip", LEADER)),
        ],
        no_ack: true,
        ..Stub::default()
    }
}

fn quick() -> Limits {
    Limits {
        reply_timeout: Duration::from_millis(500),
        hello_timeout: Duration::from_millis(300),
        max_packet: 64 << 10,
    }
}

fn named(t: &TaskIdentity) -> (u32, u32, String, String) {
    (t.tid, t.pid, t.thread(), t.process())
}

#[test]
fn each_vcpu_names_its_task_and_process() {
    let (addr, h) = fake::serve(stub());
    let opts = StackOptions {
        tasks: Some(spec()),
        ..StackOptions::default()
    };
    let snap = stacks(&addr, quick(), opts).unwrap();
    h.join().unwrap();
    let tasks: Vec<_> = snap
        .vcpus
        .iter()
        .map(|v| named(&v.task.unwrap().unwrap()))
        .collect();
    assert_eq!(tasks[0], (1, 1, "init".into(), "init".into()));
    assert_eq!(tasks[1], (71, 70, "worker".into(), "gzip".into()));
}

#[test]
fn without_a_spec_no_task_is_read() {
    let (addr, h) = fake::serve(stub());
    let snap = stacks(&addr, quick(), StackOptions::default()).unwrap();
    let seen = h.join().unwrap();
    assert!(snap.vcpus.iter().all(|v| v.task.is_none()));
    let slot = format!("m{:x},8", GS[0] + SLOT);
    assert!(!seen.requests.contains(&slot), "{:?}", seen.requests);
}

/// After the first look, a task is written only when it changes, and a look reads the
/// current-task pointer with the registers (one round trip): no read of the task itself.
#[test]
fn later_looks_read_the_pointer_ahead_and_the_same_task_not_again() {
    let (addr, h) = fake::serve(stub());
    let opts = SampleOptions {
        rate_hz: 200,
        duration: Some(Duration::from_millis(120)),
        stopped_budget: 1.0,
        stack: StackOptions {
            tasks: Some(spec()),
            ..StackOptions::default()
        },
    };
    let mut looks = Vec::new();
    sample(
        &addr,
        quick(),
        &opts,
        &AtomicBool::new(false),
        |_, _| Ok(()),
        |_, vcpus| {
            looks.push(vcpus.iter().map(|v| v.task).collect::<Vec<_>>());
            Ok(())
        },
    )
    .unwrap();
    let seen = h.join().unwrap();
    assert!(looks.len() >= 3, "{} looks", looks.len());
    assert!(looks[0].iter().all(|t| matches!(t, Some(Ok(_)))));
    assert!(looks[1..].iter().flatten().all(Option::is_none));
    let looks_after: Vec<&[String]> = seen
        .requests
        .split(|r| r == "interrupt")
        .skip(1)
        .map(|l| l.split(|r| r == "c").next().unwrap())
        .filter(|l| !l.is_empty() && !l[0].starts_with('D'))
        .collect();
    assert!(!looks_after.is_empty());
    for l in looks_after {
        let shape: Vec<&str> = l.iter().map(|r| &r[..1]).collect();
        assert_eq!(shape, ["g", "m", "m", "H", "g", "m", "m"], "{l:?}");
        assert_eq!(l[2], format!("m{:x},8", GS[0] + SLOT));
        assert_eq!(l[6], format!("m{:x},8", GS[1] + SLOT));
    }
}

/// A one-task memory at `at`, its leader itself.
fn lone_task(at: u64, tid: u32, name: &[u8]) -> (u64, Vec<u8>) {
    (at, task(tid, tid, name, at))
}

fn names_of(stub: Stub, spec: TaskSpec) -> (Vec<Option<(u32, String)>>, Vec<String>) {
    let (addr, h) = fake::serve(stub);
    let opts = StackOptions {
        tasks: Some(spec),
        ..StackOptions::default()
    };
    let snap = stacks(&addr, quick(), opts).unwrap();
    let seen = h.join().unwrap();
    let names = snap
        .vcpus
        .iter()
        .map(|v| v.task.unwrap().ok().map(|t| (t.tid, t.thread())))
        .collect();
    (names, seen.requests)
}

/// i386 Linux: `fs_base` (in `g`, after the 16 registers eax to gs) is the CPU's per-CPU
/// offset in kernel mode, added to `current_task`'s link address.
#[test]
fn i386_reads_the_task_at_fs_base_plus_the_symbol() {
    const SYMBOL: u64 = 0xc1e5_e6e8;
    const TASK: u64 = 0xc340_0000;
    let mut g = vec![0u8; 344];
    let mut put = |at: usize, v: u32| g[at..at + 4].copy_from_slice(&v.to_le_bytes());
    put(4 * 4, 0xc2a0_1f00); // esp
    put(8 * 4, 0xc100_0010); // eip
    put(10 * 4, 0x60); // cs: the kernel's
    put(16 * 4, 0x3600_0000); // fs_base
    let stub = Stub {
        architecture: "i386",
        regs: vec![g],
        memory: vec![
            (0xf7e5_e6e8, (TASK as u32).to_le_bytes().to_vec()),
            lone_task(TASK, 99, b"md5sum"),
        ],
        no_ack: true,
        ..Stub::default()
    };
    let spec = TaskSpec {
        current: Current::PerCpu { offset: SYMBOL },
        ..spec()
    };
    let (names, _) = names_of(stub, spec);
    assert_eq!(names, [Some((99, "md5sum".to_string()))]);
}

/// aarch64 Linux: `SP_EL0` (read with `p`, in the same round trip as `g`) holds `current`
/// in kernel mode; a program's sample names no task.
#[test]
fn aarch64_reads_sp_el0_in_kernel_mode() {
    const TASK: u64 = 0xffff_0000_c340_0000;
    let regs = |pc: u64, cpsr: u32| {
        let mut g = vec![0u8; 34 * 8 + 8];
        g[31 * 8..32 * 8].copy_from_slice(&(STACK + 0x800).to_le_bytes());
        g[32 * 8..33 * 8].copy_from_slice(&pc.to_le_bytes());
        g[33 * 8..33 * 8 + 4].copy_from_slice(&cpsr.to_le_bytes());
        g
    };
    let stub = Stub {
        architecture: "aarch64",
        regs: vec![regs(0xffff_8000_8100_0010, 0x3c5), regs(0x40_1000, 0)],
        memory: vec![(STACK, vec![0u8; 0x1000]), lone_task(TASK, 42, b"gzip")],
        extra: vec![("SP_EL0", vec![TASK, 0x7fff_f000])],
        no_ack: true,
        ..Stub::default()
    };
    let spec = TaskSpec {
        current: Current::InRegister,
        ..spec()
    };
    let (names, requests) = names_of(stub, spec);
    assert_eq!(names, [Some((42, "gzip".to_string())), None]);
    let p = format!("p{:x}", fake::EXTRA_REGNUM);
    assert_eq!(requests.iter().filter(|r| **r == p).count(), 2);
}

/// riscv64 Linux: `tp` (x4, in `g`) holds `current` in kernel mode, `sscratch` (with `p`)
/// in user mode.
#[test]
fn riscv64_reads_tp_in_the_kernel_and_sscratch_in_a_program() {
    const TASKS: [u64; 2] = [0xffff_ffd8_0340_0000, 0xffff_ffd8_0350_0000];
    let regs = |pc: u64, tp: u64| {
        let mut g = vec![0u8; 33 * 8];
        g[2 * 8..3 * 8].copy_from_slice(&(STACK + 0x800).to_le_bytes());
        g[4 * 8..5 * 8].copy_from_slice(&tp.to_le_bytes());
        g[32 * 8..33 * 8].copy_from_slice(&pc.to_le_bytes());
        g
    };
    let stub = Stub {
        architecture: "riscv:rv64",
        regs: vec![
            regs(0xffff_ffff_8000_1000, TASKS[0]),
            regs(0x1_0000, 0x3f_f000_0000),
        ],
        memory: vec![
            (STACK, vec![0u8; 0x1000]),
            lone_task(TASKS[0], 7, b"kworker"),
            lone_task(TASKS[1], 8, b"sh"),
        ],
        extra: vec![("priv", vec![1, 0]), ("sscratch", vec![0, TASKS[1]])],
        no_ack: true,
        ..Stub::default()
    };
    let spec = TaskSpec {
        current: Current::InRegister,
        ..spec()
    };
    let (names, _) = names_of(stub, spec);
    assert_eq!(
        names,
        [
            Some((7, "kworker".to_string())),
            Some((8, "sh".to_string()))
        ]
    );
}
