//! The task record (kind 9): which guest task a vCPU runs, written when that changes, so that
//! the vCPU's samples after it in the file are that task's (its thread, its process, their
//! names) until its next task record.

use crate::error::FormatError;
use crate::kind;
use crate::raw_reader::corrupt;
use crate::source::{u32_at, u64_at};

/// Bytes of a task record's body.
pub const TASK_RECORD_LEN: usize = 64;
/// Bytes of a task name (Linux's `TASK_COMM_LEN`), NUL-padded.
pub const TASK_NAME_LEN: usize = 16;

/// flags bit: a kernel thread (Linux `PF_KTHREAD`).
const FLAG_KERNEL_THREAD: u8 = 1;
/// flags bit: the task could not be read; byte 5 says why.
const FLAG_UNKNOWN: u8 = 2;

/// Who a vCPU runs, as read from the guest's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TaskIdentity {
    /// The task's address (Linux: its `task_struct`).
    pub address: u64,
    /// The thread id (Linux `task_struct.pid`).
    pub tid: u32,
    /// The process id (Linux `tgid`); the thread id of kernels without processes.
    pub pid: u32,
    /// A kernel thread (Linux `PF_KTHREAD`), not a user program's.
    pub kernel_thread: bool,
    /// The thread's name (Linux `comm`), NUL-padded.
    pub thread_name: [u8; TASK_NAME_LEN],
    /// The process's name (the group leader's `comm`), NUL-padded.
    pub process_name: [u8; TASK_NAME_LEN],
}

impl TaskIdentity {
    /// The thread's name, up to its NUL, with bytes that are not UTF-8 replaced.
    pub fn thread(&self) -> String {
        name_of(&self.thread_name)
    }

    /// The process's name (its group leader's thread name).
    pub fn process(&self) -> String {
        name_of(&self.process_name)
    }
}

/// A name's bytes up to the first NUL (all of them when there is none).
pub fn name_bytes(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// A name's bytes up to the first NUL (all 16 when there is none), lossily as UTF-8.
pub fn name_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(name_bytes(bytes)).into_owned()
}

/// Why a vCPU's task could not be read (byte 5 of an unknown task's record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskUnknown {
    /// QEMU exposes no register the current task is found from.
    NoRegister,
    /// The current-task pointer is null, or not a kernel address.
    BadPointer,
    /// The task's memory could not be read.
    Unreadable,
    /// A name has no terminator or bytes no name has (the layout may be wrong).
    BadName,
    /// Kernel-mode code outside the kernel's addresses: a boot stage before the kernel
    /// proper (a bzImage's decompressor), which has no tasks.
    Boot,
    /// A reason this reader does not know (a later recorder's).
    Other(u8),
}

impl TaskUnknown {
    /// The reason's code in the record.
    pub fn code(self) -> u8 {
        match self {
            TaskUnknown::NoRegister => 1,
            TaskUnknown::BadPointer => 2,
            TaskUnknown::Unreadable => 3,
            TaskUnknown::BadName => 4,
            TaskUnknown::Boot => 5,
            TaskUnknown::Other(c) => c,
        }
    }

    /// The reason with `code`.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => TaskUnknown::NoRegister,
            2 => TaskUnknown::BadPointer,
            3 => TaskUnknown::Unreadable,
            4 => TaskUnknown::BadName,
            5 => TaskUnknown::Boot,
            c => TaskUnknown::Other(c),
        }
    }

    /// How reports name the reason.
    pub fn describe(self) -> String {
        match self {
            TaskUnknown::NoRegister => "no current-task register".into(),
            TaskUnknown::BadPointer => "current-task pointer not a kernel address".into(),
            TaskUnknown::Unreadable => "task memory unreadable".into(),
            TaskUnknown::BadName => "task name malformed".into(),
            TaskUnknown::Boot => "boot code before the kernel's tasks".into(),
            TaskUnknown::Other(c) => format!("reason {c}"),
        }
    }
}

/// One task record: from its time on, vCPU `vcpu` runs `task` (or an unknown task).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskRecord {
    pub vcpu: u32,
    /// Host time since the plugin started, ns, of the sample that first saw the task.
    pub time_ns: u64,
    pub task: Result<TaskIdentity, TaskUnknown>,
}

impl TaskRecord {
    /// Appends the record, kind and length included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(kind::TASK);
        out.extend_from_slice(&(TASK_RECORD_LEN as u32).to_le_bytes());
        out.extend_from_slice(&self.vcpu.to_le_bytes());
        let (flags, reason, t) = match &self.task {
            Ok(t) => (
                if t.kernel_thread {
                    FLAG_KERNEL_THREAD
                } else {
                    0
                },
                0,
                *t,
            ),
            Err(why) => (FLAG_UNKNOWN, why.code(), TaskIdentity::default()),
        };
        out.extend_from_slice(&[flags, reason, 0, 0]);
        out.extend_from_slice(&self.time_ns.to_le_bytes());
        out.extend_from_slice(&t.address.to_le_bytes());
        out.extend_from_slice(&t.tid.to_le_bytes());
        out.extend_from_slice(&t.pid.to_le_bytes());
        out.extend_from_slice(&t.thread_name);
        out.extend_from_slice(&t.process_name);
    }

    /// Decodes a record body (the record at `offset`, for errors).
    pub(crate) fn decode(b: &[u8], offset: u64) -> Result<Self, FormatError> {
        if b.len() != TASK_RECORD_LEN {
            return Err(corrupt(
                offset,
                format!(
                    "task record should be {TASK_RECORD_LEN} bytes, record says {}",
                    b.len()
                ),
            ));
        }
        let flags = b[4];
        let task = if flags & FLAG_UNKNOWN != 0 {
            Err(TaskUnknown::from_code(b[5]))
        } else {
            let mut thread_name = [0; TASK_NAME_LEN];
            let mut process_name = [0; TASK_NAME_LEN];
            thread_name.copy_from_slice(&b[32..48]);
            process_name.copy_from_slice(&b[48..64]);
            Ok(TaskIdentity {
                address: u64_at(b, 16),
                tid: u32_at(b, 24),
                pid: u32_at(b, 28),
                kernel_thread: flags & FLAG_KERNEL_THREAD != 0,
                thread_name,
                process_name,
            })
        };
        Ok(TaskRecord {
            vcpu: u32_at(b, 0),
            time_ns: u64_at(b, 8),
            task,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> [u8; TASK_NAME_LEN] {
        let mut n = [0; TASK_NAME_LEN];
        n[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    #[test]
    fn a_task_and_an_unknown_one_read_back() {
        let known = TaskRecord {
            vcpu: 1,
            time_ns: 42,
            task: Ok(TaskIdentity {
                address: 0xffff_8880_0123_4000,
                tid: 71,
                pid: 70,
                kernel_thread: false,
                thread_name: name("worker"),
                process_name: name("gzip"),
            }),
        };
        let unknown = TaskRecord {
            vcpu: 0,
            time_ns: 7,
            task: Err(TaskUnknown::BadName),
        };
        for rec in [known, unknown] {
            let mut out = Vec::new();
            rec.encode(&mut out);
            assert_eq!(out[0], kind::TASK);
            assert_eq!(out.len(), 5 + TASK_RECORD_LEN);
            assert_eq!(TaskRecord::decode(&out[5..], 0).unwrap(), rec);
        }
        assert_eq!(known.task.unwrap().process(), "gzip");
    }

    #[test]
    fn a_record_of_the_wrong_length_is_corrupt_and_names_its_offset() {
        let err = TaskRecord::decode(&[0; 63], 1234).unwrap_err().to_string();
        assert!(err.contains("1234") && err.contains("63"), "{err}");
    }

    #[test]
    fn a_name_without_terminator_keeps_its_sixteen_bytes() {
        assert_eq!(name_of(b"abcdefghijklmnop"), "abcdefghijklmnop");
        assert_eq!(name_of(b"sh\0garbage\0\0\0\0\0\0"), "sh");
    }
}
