//! A vCPU's buffer of encoded samples (and allocation events), handed to the writer when it
//! is full or old enough.

use kern_profile_format::{
    encode_sample_v2, CodeBytes, SampleExtras, SampleRecord, SwitchRecord, TaskRecord,
};

use crate::writer::Batch;

/// Hand the batch over when it holds this many bytes.
pub const BATCH_BYTES: usize = 60 << 10;
/// ... or when its first sample is this old (host ns),
pub const MAX_AGE_NS: u64 = 100_000_000;
/// ... or when samples come slower than this (host ns apart): no point in waiting then.
pub const SLOW_NS: u64 = 50_000_000;

/// Encoded samples of one vCPU.
#[derive(Debug, Default)]
pub struct SampleBuffer {
    batch: Batch,
    first_ns: u64,
    last_ns: Option<u64>,
}

impl SampleBuffer {
    pub fn new(buf: Vec<u8>) -> Self {
        SampleBuffer {
            batch: Batch {
                bytes: buf,
                ..Batch::default()
            },
            first_ns: 0,
            last_ns: None,
        }
    }

    /// Encodes a sample (format version 2); returns whether the batch should be handed over
    /// now.
    pub fn push(&mut self, ptr_width: usize, s: &SampleRecord<'_>, x: &SampleExtras) -> bool {
        let now = s.time_ns;
        if self.is_empty() {
            self.first_ns = now;
        }
        encode_sample_v2(&mut self.batch.bytes, ptr_width, s, x);
        self.batch.samples += 1;
        self.due(now)
    }

    /// Appends what `encode` writes, which returns how many records (allocation events, not
    /// samples) it wrote; returns whether the batch should be handed over now.
    pub fn push_events(&mut self, now: u64, encode: impl FnOnce(&mut Vec<u8>) -> u64) -> bool {
        if self.is_empty() {
            self.first_ns = now;
        }
        let n = encode(&mut self.batch.bytes);
        if n == 0 {
            return false;
        }
        self.batch.events += n;
        self.due(now)
    }

    fn due(&mut self, now: u64) -> bool {
        let slow = self
            .last_ns
            .is_some_and(|last| now.saturating_sub(last) >= SLOW_NS);
        self.last_ns = Some(now);
        self.batch.bytes.len() >= BATCH_BYTES
            || now.saturating_sub(self.first_ns) >= MAX_AGE_NS
            || slow
    }

    /// Encodes a code-bytes record; it goes out with the next samples.
    pub fn push_code(&mut self, ptr_width: usize, c: &CodeBytes<'_>) {
        c.encode(&mut self.batch.bytes, ptr_width);
    }

    /// Encodes a task record; the samples after it ran in that task.
    pub fn push_task(&mut self, t: &TaskRecord) {
        t.encode(&mut self.batch.bytes);
    }

    /// Encodes a task switch and the next task's record; returns whether the batch should be
    /// handed over now.
    pub fn push_switch(&mut self, ptr_width: usize, s: &SwitchRecord, next: &TaskRecord) -> bool {
        if self.batch.bytes.is_empty() {
            self.first_ns = s.time_ns;
        }
        s.encode(&mut self.batch.bytes, ptr_width);
        next.encode(&mut self.batch.bytes);
        self.due(s.time_ns)
    }

    pub fn is_empty(&self) -> bool {
        self.batch.samples == 0 && self.batch.events == 0
    }

    pub fn samples(&self) -> u64 {
        self.batch.samples
    }

    /// Takes the batch out, leaving `fresh` (an empty buffer) in its place.
    pub fn take(&mut self, fresh: Vec<u8>) -> Batch {
        self.batch.last_ns = self.last_ns.unwrap_or(self.first_ns);
        std::mem::replace(
            &mut self.batch,
            Batch {
                bytes: fresh,
                ..Batch::default()
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{
        Arch, CpuMode, Privilege, Record, SamplingMode, StopReason, VERSION_2,
    };
    use kern_profile_test_support::alloc_event::alloc_event;
    use kern_profile_test_support::raw_file::{marked_header, raw_header, read_back};

    /// An i386 header of `period=1` over `vcpus` vCPUs.
    fn i386(vcpus: u32) -> kern_profile_format::Header {
        raw_header(Arch::I386, SamplingMode::PeriodInstructions(1), vcpus)
    }

    fn rec(t: u64, frames: &[u64]) -> SampleRecord<'_> {
        SampleRecord {
            vcpu: 1,
            user: false,
            stop: StopReason::NullFramePointer.into(),
            time_ns: t,
            icount: t * 3,
            pc: 0xc000_1000,
            sp: 0x9000,
            sp_word: Some(0xc000_2000),
            frames,
            entry_resolved: true,
        }
    }

    fn extras() -> SampleExtras {
        SampleExtras {
            mode: CpuMode::Paging,
            privilege: Privilege::Kernel,
            return_register: Some(0xc000_3000),
            page_table_base: Some(0x1000),
        }
    }

    #[test]
    fn hands_over_when_full() {
        let mut b = SampleBuffer::new(Vec::new());
        let frames = [0xc000_0000u64; 64];
        let mut n = 0;
        while !b.push(4, &rec(n, &frames), &extras()) {
            n += 1;
        }
        assert!(b.batch.bytes.len() >= BATCH_BYTES);
        let batch = b.take(Vec::new());
        assert_eq!(batch.samples, n + 1);
        assert!(b.is_empty());
        // The bytes are valid records.
        let mut r = read_back(VERSION_2, &i386(1), &batch.bytes);
        let mut count = 0;
        while let Some(Record::Sample(s)) = r.next_record().unwrap() {
            assert_eq!(s.frame_count(), 64);
            assert_eq!(s.icount, s.time_ns * 3);
            assert_eq!(s.return_register(), Some(0xc000_3000));
            assert_eq!(s.privilege(), Privilege::Kernel);
            count += 1;
        }
        assert_eq!(count, n + 1);
    }

    #[test]
    fn hands_over_when_old_or_slow() {
        let mut b = SampleBuffer::new(Vec::new());
        assert!(!b.push(8, &rec(1_000, &[]), &SampleExtras::default()));
        assert!(!b.push(8, &rec(2_000, &[]), &SampleExtras::default()));
        assert!(b.push(8, &rec(1_000 + MAX_AGE_NS, &[]), &SampleExtras::default()));
        b.take(Vec::new());
        // Slow sampling: every sample goes out at once.
        let mut b = SampleBuffer::new(Vec::new());
        assert!(!b.push(8, &rec(0, &[]), &SampleExtras::default()));
        assert!(b.push(8, &rec(SLOW_NS, &[]), &SampleExtras::default()));
        assert_eq!(b.samples(), 2);
        b.take(Vec::new());
        assert!(b.push(8, &rec(2 * SLOW_NS, &[]), &SampleExtras::default()));
    }

    #[test]
    fn allocation_events_ride_along_with_samples() {
        use kern_profile_format::memtrace::Op;
        use kern_profile_format::{AllocEvent, Privilege, VERSION_3};
        let mut b = SampleBuffer::new(Vec::new());
        assert!(!b.push_events(5, |_| 0), "nothing written, nothing due");
        assert!(b.is_empty());
        let x = SampleExtras {
            privilege: Privilege::Kernel,
            ..SampleExtras::default()
        };
        assert!(!b.push(4, &rec(10, &[0xc000_1234]), &x));
        let ev = AllocEvent {
            ptr: 0x40_1000,
            ..alloc_event(1, Op::Free, 0, 11, &[0xc000_1234])
        };
        assert!(!b.push_events(11, |out| {
            ev.encode(4, out);
            1
        }));
        let batch = b.take(Vec::new());
        assert_eq!((batch.samples, batch.events), (1, 1));
        let h = marked_header(Arch::I386, SamplingMode::PeriodInstructions(1), 2);
        let mut r = read_back(VERSION_3, &h, &batch.bytes);
        match r.next_record().unwrap() {
            Some(Record::Sample(s)) => {
                assert_eq!(s.privilege(), Privilege::Kernel);
                assert_eq!(s.frames().collect::<Vec<_>>(), [0xc000_1234]);
            }
            other => panic!("{other:?}"),
        }
        match r.next_record().unwrap() {
            Some(Record::AllocEvent(e)) => assert_eq!((e.op, e.ptr), (Op::Free, 0x40_1000)),
            other => panic!("{other:?}"),
        }
    }
    #[test]
    fn code_bytes_go_out_with_the_samples_and_are_no_samples() {
        let mut b = SampleBuffer::new(Vec::new());
        let code = kern_profile_format::CodeBytes {
            vcpu: 1,
            page_table_base: 0x10f000,
            vaddr: 0x0400_0210,
            bytes: &[0x55, 0x89, 0xe5],
        };
        b.push_code(4, &code);
        assert!(b.is_empty());
        b.push(4, &rec(1, &[]), &extras());
        let batch = b.take(Vec::new());
        assert_eq!(batch.samples, 1);
        let mut r = read_back(VERSION_2, &i386(2), &batch.bytes);
        match r.next_record().unwrap() {
            Some(Record::CodeBytes(c)) => assert_eq!(c, code),
            other => panic!("{other:?}"),
        }
        assert!(matches!(r.next_record().unwrap(), Some(Record::Sample(_))));
    }
}
