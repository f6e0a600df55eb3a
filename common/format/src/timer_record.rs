//! The host-timer record (kind 4): what `delay=` sampling did, and how long each vCPU was
//! halted, so a report can tell an idle vCPU from one that was not sampled.

use crate::kind;

/// One vCPU's share of the host timer's ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VcpuTime {
    /// Host time spent halted (QEMU's idle callback to its resume callback), ns.
    pub idle_ns: u64,
    /// Ticks that found the vCPU halted (no sample).
    pub idle_ticks: u64,
    /// Ticks that armed the vCPU (a sample at its next block entry); a tick that found it
    /// still armed is not counted.
    pub armed_ticks: u64,
    /// Ticks skipped because the vCPU's samples had taken more than their share of its
    /// host time (slow stack walks).
    pub throttled_ticks: u64,
}

/// `trigger=interrupt`: how long samples waited for an interrupt after the tick
/// that armed their vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InterruptWaits {
    /// Samples taken at an interrupt.
    pub samples: u64,
    /// Of those, the ones that waited longer than [`LONG_WAIT_NS`]: the vCPU ran that long
    /// with interrupts masked, or took none (a guest's timer interrupts every 1 to 10 ms).
    pub long: u64,
    /// Host ns waited, all samples together.
    pub total_ns: u64,
    /// The longest wait, ns.
    pub max_ns: u64,
}

/// A wait longer than a guest's slowest usual timer interrupt period (100 Hz).
pub const LONG_WAIT_NS: u64 = 10_000_000;

impl InterruptWaits {
    /// Counts one sample that waited `ns` after its tick.
    pub fn add(&mut self, ns: u64) {
        self.samples += 1;
        self.long += (ns > LONG_WAIT_NS) as u64;
        self.total_ns = self.total_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds another vCPU's figures.
    pub fn merge(&mut self, o: &InterruptWaits) {
        self.samples += o.samples;
        self.long += o.long;
        self.total_ns = self.total_ns.saturating_add(o.total_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// The mean wait, ns.
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.samples).unwrap_or(0)
    }

    /// `N samples waited M µs on average for their interrupt (longest L ms), K of them over
    /// 10 ms`, for the plugin's exit line and the report alike.
    pub fn describe(&self) -> String {
        format!(
            "{} samples waited {} µs on average for their interrupt (longest {:.3} ms), {} of them over {} ms",
            self.samples,
            self.mean_ns() / 1000,
            self.max_ns as f64 / 1e6,
            self.long,
            LONG_WAIT_NS / 1_000_000
        )
    }
}

/// The host-timer record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostTimerStats {
    /// Mean interval between ticks, ns (`delay=` × 1000).
    pub interval_ns: u64,
    pub ticks: u64,
    /// Ticks skipped because the timer thread woke too late.
    pub late: u64,
    pub vcpus: Vec<VcpuTime>,
    /// `trigger=interrupt`: the samples' waits.
    pub interrupts: Option<InterruptWaits>,
}

const FIXED: usize = 28;
const PER_VCPU: usize = 32;
const WAITS: usize = 32;

impl HostTimerStats {
    /// Appends the record, kind and length included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(kind::HOST_TIMER);
        let len = FIXED + PER_VCPU * self.vcpus.len() + self.interrupts.map_or(0, |_| WAITS);
        out.extend_from_slice(&(len as u32).to_le_bytes());
        for v in [self.interval_ns, self.ticks, self.late] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(self.vcpus.len() as u32).to_le_bytes());
        for v in &self.vcpus {
            for x in [v.idle_ns, v.idle_ticks, v.armed_ticks, v.throttled_ticks] {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        if let Some(w) = &self.interrupts {
            for x in [w.samples, w.long, w.total_ns, w.max_ns] {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
    }

    /// Decodes a record body; None if its length does not match its vCPU count.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let u64_at = |at: usize| Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?));
        let n = u32::from_le_bytes(b.get(24..28)?.try_into().ok()?) as usize;
        let end = FIXED.checked_add(n.checked_mul(PER_VCPU)?)?;
        let interrupts = match b.len().checked_sub(end)? {
            0 => None,
            WAITS => Some(InterruptWaits {
                samples: u64_at(end)?,
                long: u64_at(end + 8)?,
                total_ns: u64_at(end + 16)?,
                max_ns: u64_at(end + 24)?,
            }),
            _ => return None,
        };
        let vcpus = (0..n)
            .map(|i| {
                let at = FIXED + PER_VCPU * i;
                Some(VcpuTime {
                    idle_ns: u64_at(at)?,
                    idle_ticks: u64_at(at + 8)?,
                    armed_ticks: u64_at(at + 16)?,
                    throttled_ticks: u64_at(at + 24)?,
                })
            })
            .collect::<Option<_>>()?;
        Some(HostTimerStats {
            interval_ns: u64_at(0)?,
            ticks: u64_at(8)?,
            late: u64_at(16)?,
            vcpus,
            interrupts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_a_wrong_length() {
        let t = HostTimerStats {
            interval_ns: 10_000,
            ticks: 5,
            late: 1,
            vcpus: vec![
                VcpuTime {
                    idle_ns: 7,
                    idle_ticks: 2,
                    armed_ticks: 3,
                    throttled_ticks: 4,
                };
                2
            ],
            interrupts: None,
        };
        let mut out = Vec::new();
        t.encode(&mut out);
        assert_eq!(out[0], kind::HOST_TIMER);
        let body = &out[5..];
        assert_eq!(
            u32::from_le_bytes(out[1..5].try_into().unwrap()) as usize,
            body.len()
        );
        assert_eq!(HostTimerStats::decode(body), Some(t));
        assert_eq!(HostTimerStats::decode(&body[..body.len() - 1]), None);
        assert_eq!(HostTimerStats::decode(&[]), None);
        let mut huge = body[..FIXED].to_vec();
        huge[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(HostTimerStats::decode(&huge), None);
    }

    #[test]
    fn interrupt_waits_round_trip() {
        let mut w = InterruptWaits::default();
        w.add(3_000_000);
        w.add(25_000_000);
        assert_eq!(
            (w.samples, w.long, w.max_ns, w.mean_ns()),
            (2, 1, 25_000_000, 14_000_000)
        );
        let t = HostTimerStats {
            interval_ns: 10_000,
            ticks: 9,
            late: 0,
            vcpus: vec![VcpuTime::default()],
            interrupts: Some(w),
        };
        let mut out = Vec::new();
        t.encode(&mut out);
        let body = &out[5..];
        assert_eq!(HostTimerStats::decode(body), Some(t));
        // Neither the plain length nor the plain length and the waits: refused.
        assert_eq!(HostTimerStats::decode(&body[..body.len() - 8]), None);
    }
}
