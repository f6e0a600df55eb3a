//! A read-ahead cache over guest memory reads. Each guest read costs a page walk in QEMU, and
//! the frame records of a stack usually sit within a few hundred bytes of each other, so the
//! stack walk reads a window of up to [`WINDOW`] bytes (never past the end of a page, so
//! that the window is readable whenever the record in it is) and serves the next records
//! from it.
//!
//! Each sample may fetch at most [`FETCH_BUDGET`] times from guest memory: whatever the
//! guest's frame chain (one frame per page, thousands deep), a sample costs at most that many
//! QEMU reads; a walk that needs more stops with `StopReason::ReadBudget`.

/// Bytes read ahead.
pub const WINDOW: usize = 512;
/// Windows never cross a boundary of this size (the smallest guest page).
pub const PAGE: u64 = 4096;
/// Guest-memory fetches one sample may make: 32 windows hold 16 KiB of stack, more than a
/// 64-frame kernel stack with a user stack and an interrupt stack needs.
pub const FETCH_BUDGET: u32 = 32;

/// A cached window of guest memory.
#[derive(Debug, Clone)]
pub struct WindowReader {
    base: u64,
    len: usize,
    buf: [u8; WINDOW],
    /// The highest guest address.
    max_addr: u64,
    /// Fetches left in this sample.
    fetches_left: u32,
    /// A read of this sample was refused for want of budget.
    refused: bool,
}

impl WindowReader {
    /// A reader for a guest whose addresses end at `max_addr`.
    pub fn new(max_addr: u64) -> Self {
        WindowReader {
            base: 0,
            len: 0,
            buf: [0; WINDOW],
            max_addr,
            fetches_left: FETCH_BUDGET,
            refused: false,
        }
    }

    /// Starts a sample: forgets the cached bytes (guest memory may have changed) and gives
    /// it a fresh fetch budget.
    pub fn start_sample(&mut self) {
        self.len = 0;
        self.fetches_left = FETCH_BUDGET;
        self.refused = false;
    }

    /// Whether a read of this sample failed because the sample spent its fetch budget.
    pub fn budget_spent(&self) -> bool {
        self.refused
    }

    /// Reads `out.len()` bytes at `addr`, from the window or through `fetch(addr, buf)`,
    /// which reads guest memory and returns whether it could.
    pub fn read<F>(&mut self, addr: u64, out: &mut [u8], mut fetch: F) -> bool
    where
        F: FnMut(u64, &mut [u8]) -> bool,
    {
        let n = out.len() as u64;
        if n == 0 {
            return true;
        }
        let Some(last) = addr.checked_add(n - 1) else {
            return false;
        };
        if last > self.max_addr {
            return false;
        }
        if self.len > 0 && addr >= self.base && last < self.base + self.len as u64 {
            let at = (addr - self.base) as usize;
            out.copy_from_slice(&self.buf[at..at + out.len()]);
            return true;
        }
        if self.fetches_left == 0 {
            self.refused = true;
            return false;
        }
        self.fetches_left -= 1;
        // Up to the window size, the page end and the address space end.
        let to_page_end = PAGE - (addr & (PAGE - 1));
        let to_space_end = (self.max_addr - addr).saturating_add(1);
        let want = (WINDOW as u64).min(to_page_end).min(to_space_end) as usize;
        if want < out.len() {
            // The record crosses a page: read it alone.
            self.len = 0;
            return fetch(addr, out);
        }
        if !fetch(addr, &mut self.buf[..want]) {
            self.len = 0;
            return false;
        }
        self.base = addr;
        self.len = want;
        out.copy_from_slice(&self.buf[..out.len()]);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory where byte at `a` is `a as u8`, readable in [lo, hi).
    fn mem(
        lo: u64,
        hi: u64,
        calls: &mut Vec<(u64, usize)>,
    ) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        move |addr, buf| {
            calls.push((addr, buf.len()));
            if addr < lo || addr.saturating_add(buf.len() as u64) > hi {
                return false;
            }
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (addr + i as u64) as u8;
            }
            true
        }
    }

    fn check(out: &[u8], addr: u64) {
        for (i, &b) in out.iter().enumerate() {
            assert_eq!(b, (addr + i as u64) as u8);
        }
    }

    #[test]
    fn serves_nearby_reads_from_one_window() {
        let mut calls = Vec::new();
        let mut w = WindowReader::new(u64::MAX);
        let mut out = [0u8; 16];
        for addr in [0x1000u64, 0x1010, 0x1100, 0x11f0] {
            assert!(w.read(addr, &mut out, mem(0, 1 << 20, &mut calls)));
            check(&out, addr);
        }
        assert_eq!(calls, vec![(0x1000, WINDOW)]);
        // Just past the window: a new one.
        assert!(w.read(0x1200, &mut out, mem(0, 1 << 20, &mut calls)));
        check(&out, 0x1200);
        assert_eq!(calls.len(), 2);
        w.start_sample();
        assert!(w.read(0x1200, &mut out, mem(0, 1 << 20, &mut calls)));
        assert_eq!(calls.len(), 3);
    }

    #[test]
    fn a_sample_fetches_at_most_its_budget() {
        let mut calls = Vec::new();
        let mut w = WindowReader::new(u64::MAX);
        let mut out = [0u8; 8];
        // One frame per page: every read a fetch.
        for i in 0..FETCH_BUDGET as u64 {
            assert!(w.read(0x10_0000 + i * PAGE, &mut out, mem(0, 1 << 30, &mut calls)));
        }
        assert!(!w.budget_spent());
        assert!(!w.read(0x80_0000, &mut out, mem(0, 1 << 30, &mut calls)));
        assert!(w.budget_spent());
        assert_eq!(calls.len(), FETCH_BUDGET as usize);
        // Still served from the last window.
        let last = 0x10_0000 + (FETCH_BUDGET as u64 - 1) * PAGE;
        assert!(w.read(last + 8, &mut out, mem(0, 1 << 30, &mut calls)));
        w.start_sample();
        assert!(!w.budget_spent());
        assert!(w.read(0x80_0000, &mut out, mem(0, 1 << 30, &mut calls)));
    }

    #[test]
    fn windows_stop_at_page_ends() {
        let mut calls = Vec::new();
        let mut w = WindowReader::new(u64::MAX);
        let mut out = [0u8; 8];
        // Readable only up to the page end: the window must not reach beyond it.
        assert!(w.read(0x1ff0, &mut out, mem(0, 0x2000, &mut calls)));
        check(&out, 0x1ff0);
        assert_eq!(calls, vec![(0x1ff0, 16)]);
        // A record crossing the page end is read alone.
        calls.clear();
        let mut out = [0u8; 16];
        assert!(w.read(0x2ff8, &mut out, mem(0, 0x4000, &mut calls)));
        check(&out, 0x2ff8);
        assert_eq!(calls, vec![(0x2ff8, 16)]);
    }

    #[test]
    fn unreadable_and_out_of_range() {
        let mut calls = Vec::new();
        let mut w = WindowReader::new(u32::MAX as u64);
        let mut out = [0u8; 8];
        assert!(!w.read(0x5000, &mut out, mem(0, 0x1000, &mut calls)));
        assert!(!w.read(0xffff_fffc, &mut out, mem(0, u64::MAX, &mut calls)));
        let mut w = WindowReader::new(u64::MAX);
        assert!(!w.read(u64::MAX - 3, &mut out, mem(0, u64::MAX, &mut calls)));
        assert_eq!(calls.len(), 1, "only the first read reaches memory");
        // The top of a 32-bit space: windows end there.
        let mut w = WindowReader::new(u32::MAX as u64);
        calls.clear();
        assert!(w.read(0xffff_fff0, &mut out, mem(0, 1 << 33, &mut calls)));
        assert_eq!(calls, vec![(0xffff_fff0, 16)]);
        assert!(w.read(0, &mut [], mem(0, 0, &mut calls)));
    }
}
