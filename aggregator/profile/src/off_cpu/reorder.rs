//! The switch and task records of all vCPUs back in time order. Each vCPU's records are in
//! order in the file, but the vCPUs' batches interleave by when they were handed to the
//! writer (up to a batch's age apart, more when the writer lags): a task's switch in on one
//! vCPU can come before its switch out on another. Held back for [`WINDOW_NS`] of recording
//! time, so memory follows the records of that window, not the recording.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use kern_profile_format::{SwitchRecord, TaskRecord};

/// How long records are held for the others to catch up: far beyond a batch's age (the
/// plugin hands a batch over within 100 ms of its first record).
pub const WINDOW_NS: u64 = 2_000_000_000;

/// A record the off-CPU view consumes.
#[derive(Debug, Clone)]
pub enum Event {
    Switch(SwitchRecord),
    Task(TaskRecord),
}

impl Event {
    fn time_ns(&self) -> u64 {
        match self {
            Event::Switch(s) => s.time_ns,
            Event::Task(t) => t.time_ns,
        }
    }
}

/// An event in the heap, ordered by its time, then by its place in the file (a vCPU's
/// records at the same time, a switch and its next task's record, stay in order).
#[derive(Debug, Clone)]
struct Held {
    time_ns: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.time_ns, self.seq) == (o.time_ns, o.seq)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Held {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.time_ns, self.seq).cmp(&(o.time_ns, o.seq))
    }
}

/// The reorder buffer.
#[derive(Debug, Default, Clone)]
pub struct Reorder {
    heap: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// The latest time pushed.
    latest: u64,
}

impl Reorder {
    /// Holds `event`; then hands `out` every event older than the window, oldest first.
    pub fn push(&mut self, event: Event, out: impl FnMut(Event)) {
        let time_ns = event.time_ns();
        self.latest = self.latest.max(time_ns);
        self.seq += 1;
        self.heap.push(Reverse(Held {
            time_ns,
            seq: self.seq,
            event,
        }));
        self.release(self.latest.saturating_sub(WINDOW_NS), out);
    }

    /// Hands `out` every event held, oldest first.
    pub fn drain(&mut self, out: impl FnMut(Event)) {
        self.release(u64::MAX, out);
    }

    fn release(&mut self, before: u64, mut out: impl FnMut(Event)) {
        while self
            .heap
            .peek()
            .is_some_and(|Reverse(h)| h.time_ns <= before)
        {
            if let Some(Reverse(h)) = self.heap.pop() {
                out(h.event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::TaskUnknown;

    fn task(vcpu: u32, time_ns: u64) -> Event {
        Event::Task(TaskRecord {
            vcpu,
            time_ns,
            task: Err(TaskUnknown::BadName),
        })
    }

    fn times(events: &[Event]) -> Vec<(u32, u64)> {
        events
            .iter()
            .map(|e| match e {
                Event::Task(t) => (t.vcpu, t.time_ns),
                Event::Switch(s) => (s.vcpu, s.time_ns),
            })
            .collect()
    }

    #[test]
    fn batches_of_two_vcpus_come_out_in_time_order_within_the_window() {
        let mut r = Reorder::default();
        let mut out = Vec::new();
        // vCPU 1's batch (times 10, 30) written before vCPU 0's (5, 20, 30).
        for e in [
            task(1, 10),
            task(1, 30),
            task(0, 5),
            task(0, 20),
            task(0, 30),
        ] {
            r.push(e, |e| out.push(e));
        }
        assert!(out.is_empty(), "all within the window");
        r.push(task(0, 30 + WINDOW_NS), |e| out.push(e));
        assert_eq!(
            times(&out),
            [(0, 5), (1, 10), (0, 20), (1, 30), (0, 30)],
            "by time, ties in file order"
        );
        r.drain(|e| out.push(e));
        assert_eq!(out.len(), 6);
    }
}
