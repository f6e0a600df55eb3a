//! Task records (kind 9) and task switches (kind 10), as the recorder writes them around a
//! switch: the switch, then a task record naming the task that runs next.

use kern_profile_format::{
    LeftAs, StopReason, SwitchRecord, TaskIdentity, TaskRecord, WalkEnd, Walker, TASK_NAME_LEN,
};

/// A task name's 16 NUL-padded bytes.
pub fn task_name(s: &str) -> [u8; TASK_NAME_LEN] {
    let mut n = [0; TASK_NAME_LEN];
    let len = s.len().min(TASK_NAME_LEN);
    n[..len].copy_from_slice(&s.as_bytes()[..len]);
    n
}

/// A task at `address`: thread `tid` named `thread` of process `pid` named `process`.
pub fn identity(address: u64, tid: u32, pid: u32, thread: &str, process: &str) -> TaskIdentity {
    TaskIdentity {
        address,
        tid,
        pid,
        kernel_thread: false,
        thread_name: task_name(thread),
        process_name: task_name(process),
    }
}

/// vCPU `vcpu` runs `task` from `time_ns` on.
pub fn task_record(vcpu: u32, time_ns: u64, task: TaskIdentity) -> TaskRecord {
    TaskRecord {
        vcpu,
        time_ns,
        task: Ok(task),
    }
}

/// vCPU `vcpu` leaves `prev` (as `left_as`, stopped at `pc` with return addresses `frames`,
/// innermost first) for `next` at `time_ns`, having run `icount` instructions.
#[allow(clippy::too_many_arguments)]
pub fn switch(
    vcpu: u32,
    time_ns: u64,
    icount: Option<u64>,
    prev: u64,
    next: u64,
    left_as: LeftAs,
    pc: u64,
    frames: &[u64],
) -> SwitchRecord {
    SwitchRecord {
        vcpu,
        time_ns,
        icount,
        prev,
        next,
        left_as,
        stop: WalkEnd::new(StopReason::NullFramePointer, Walker::FramePointers, false),
        pc,
        frames: frames.to_vec(),
    }
}

/// Appends a switch with `width`-byte words, then the task record of `next_task`, as the
/// recorder does.
pub fn encode_switch_to(
    out: &mut Vec<u8>,
    width: usize,
    s: &SwitchRecord,
    next_task: TaskIdentity,
) {
    s.encode(out, width);
    task_record(s.vcpu, s.time_ns, next_task).encode(out);
}
