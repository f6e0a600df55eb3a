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
