//! `flight=SECS`: the flight recorder's ring. The writer thread keeps whole batches in
//! memory instead of writing them, and forgets those older than the window; the ring is
//! written when asked (a trigger function, QEMU's exit). Whole batches, because each batch
//! restates its vCPU's task and is a run of records a reader takes as it comes: cutting
//! one would leave records without their context.
//!
//! The window is host time, the same clock as the samples' `time_ns`, measured against the
//! newest batch of any vCPU: a vCPU that stopped sampling (halted, hung with interrupts
//! off) has nothing in the window, as it did nothing in it. A batch spans at most
//! [`MAX_AGE_NS`](crate::batch::MAX_AGE_NS), so the ring keeps the window and up to that
//! much before it.

use std::collections::VecDeque;

use crate::writer::Batch;

/// Ring settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlightConfig {
    /// Keep batches whose newest record is at most this old (host ns).
    pub window_ns: u64,
    /// ... and at most this many bytes of them (the oldest go first).
    pub max_bytes: u64,
}

/// The ring's default bound on memory when `max_size=` gives none.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// What left the ring unwritten.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub samples: u64,
    pub events: u64,
    /// Of them, those that left for the byte bound rather than for their age.
    pub samples_for_size: u64,
}

/// Batches of the last `window_ns`, in the order they came.
#[derive(Debug)]
pub struct FlightRing {
    cfg: FlightConfig,
    batches: VecDeque<Batch>,
    bytes: u64,
    newest_ns: u64,
    evicted: Evicted,
}

impl FlightRing {
    pub fn new(cfg: FlightConfig) -> Self {
        FlightRing {
            cfg,
            batches: VecDeque::new(),
            bytes: 0,
            newest_ns: 0,
            evicted: Evicted::default(),
        }
    }

    /// Keeps `b`; returns the buffers of the batches that left the ring, for reuse.
    pub fn push(&mut self, b: Batch) -> Vec<Vec<u8>> {
        self.newest_ns = self.newest_ns.max(b.last_ns);
        self.bytes += b.bytes.len() as u64;
        self.batches.push_back(b);
        let mut freed = Vec::new();
        while let Some(front) = self.batches.front() {
            let old = self.too_old(front);
            if !old && self.bytes <= self.cfg.max_bytes {
                break;
            }
            let front = self.batches.pop_front().expect("front exists");
            freed.push(self.evict(front, !old));
        }
        freed
    }

    fn too_old(&self, b: &Batch) -> bool {
        b.last_ns.saturating_add(self.cfg.window_ns) < self.newest_ns
    }

    fn evict(&mut self, b: Batch, for_size: bool) -> Vec<u8> {
        self.bytes -= b.bytes.len() as u64;
        self.evicted.samples += b.samples;
        self.evicted.events += b.events;
        if for_size {
            self.evicted.samples_for_size += b.samples;
        }
        b.bytes
    }

    /// Empties the ring: its batches of the window, oldest first. Older ones behind a newer
    /// front (vCPUs hand batches over at different times) are counted as evicted.
    pub fn drain(&mut self) -> Vec<Batch> {
        let all: Vec<Batch> = self.batches.drain(..).collect();
        let mut kept = Vec::with_capacity(all.len());
        for b in all {
            if self.too_old(&b) {
                self.evict_counted(&b);
            } else {
                kept.push(b);
            }
        }
        self.bytes = 0;
        kept
    }

    fn evict_counted(&mut self, b: &Batch) {
        self.evicted.samples += b.samples;
        self.evicted.events += b.events;
    }

    /// What left the ring so far.
    pub fn evicted(&self) -> Evicted {
        self.evicted
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(last_ns: u64, len: usize, samples: u64) -> Batch {
        Batch {
            bytes: vec![last_ns as u8; len],
            samples,
            events: 1,
            last_ns,
        }
    }

    const SEC: u64 = 1_000_000_000;

    fn ring(window_ns: u64, max_bytes: u64) -> FlightRing {
        FlightRing::new(FlightConfig {
            window_ns,
            max_bytes,
        })
    }

    #[test]
    fn keeps_only_the_window() {
        let mut r = ring(2 * SEC, u64::MAX);
        for t in 0..10 {
            r.push(batch(t * SEC, 10, 3));
        }
        let kept: Vec<u64> = r.drain().iter().map(|b| b.last_ns / SEC).collect();
        assert_eq!(kept, [7, 8, 9]);
        assert_eq!(r.evicted().samples, 21);
        assert_eq!(r.evicted().events, 7);
        assert_eq!(r.evicted().samples_for_size, 0);
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn bytes_are_bounded_oldest_first() {
        let mut r = ring(100 * SEC, 25);
        let mut freed = 0;
        for t in 0..5 {
            freed += r.push(batch(t, 10, 1)).len();
        }
        assert_eq!(freed, 3);
        assert!(r.bytes() <= 25);
        assert_eq!(r.evicted().samples_for_size, 3);
        let kept: Vec<u64> = r.drain().iter().map(|b| b.last_ns).collect();
        assert_eq!(kept, [3, 4]);
    }

    /// A vCPU's older batch behind another's newer one is not written either.
    #[test]
    fn old_batches_behind_a_newer_front_are_left_out() {
        let mut r = ring(SEC, u64::MAX);
        r.push(batch(5 * SEC, 1, 1));
        r.push(batch(SEC, 1, 2));
        r.push(batch(5 * SEC + 1, 1, 4));
        let kept: Vec<u64> = r.drain().iter().map(|b| b.samples).collect();
        assert_eq!(kept, [1, 4]);
        assert_eq!(r.evicted().samples, 2);
    }
}
