//! Code bytes at sampled user addresses (record kind 6), so that the aggregator can tell
//! which program ran in which address space when several are linked at the same addresses.
//!
//! The first time a vCPU samples a user-mode PC in a 4 KiB page of an address space (a
//! page-table base), the plugin reads [`CODE_BYTES`] bytes of code there; later samples of
//! that page cost one hash lookup. Bounded per vCPU: at most [`MAX_PER_SPACE`] records per
//! address space and [`MAX_PAGES`] pages in all, after which nothing more is read.

use kern_profile_format::{CodeBytes, Privilege, SampleExtras, SampleRecord};
use rustc_hash::{FxHashMap, FxHashSet};

/// Bytes of code read at a sampled PC (fewer at the end of a readable page).
pub const CODE_BYTES: usize = 64;
/// Records per address space and vCPU.
pub const MAX_PER_SPACE: u32 = 32;
/// (address space, page) pairs a vCPU remembers.
pub const MAX_PAGES: usize = 4096;

const PAGE: u64 = 0x1000;

/// One vCPU's record of the pages whose code it has read.
#[derive(Debug, Clone, Default)]
pub struct CodeSampler {
    seen: FxHashSet<(u64, u64)>,
    per_space: FxHashMap<u64, u32>,
    buf: Vec<u8>,
}

impl CodeSampler {
    /// The code-bytes record due for sample `rec` (with its extras `x`), if it is the
    /// vCPU's first user-mode sample in its page of its address space; `mem(addr, out)`
    /// reads guest memory at a virtual address (through the sampled vCPU's page tables)
    /// and says whether it could.
    pub fn sample<M>(
        &mut self,
        rec: &SampleRecord<'_>,
        x: &SampleExtras,
        mut mem: M,
    ) -> Option<CodeBytes<'_>>
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let base = x.page_table_base?;
        let user = match x.privilege {
            Privilege::Unknown => rec.user,
            p => p == Privilege::User,
        };
        if !user {
            return None;
        }
        let page = rec.pc / PAGE;
        if self.seen.contains(&(base, page)) || self.seen.len() >= MAX_PAGES {
            return None;
        }
        let count = self.per_space.entry(base).or_insert(0);
        if *count >= MAX_PER_SPACE {
            return None;
        }
        *count += 1;
        self.seen.insert((base, page));
        // Up to the end of the page when the next one cannot be read.
        let to_page_end = (PAGE - rec.pc % PAGE).min(CODE_BYTES as u64) as usize;
        self.buf.resize(CODE_BYTES, 0);
        let n = if mem(rec.pc, &mut self.buf[..]) {
            CODE_BYTES
        } else if to_page_end < CODE_BYTES && mem(rec.pc, &mut self.buf[..to_page_end]) {
            to_page_end
        } else {
            return None;
        };
        Some(CodeBytes {
            vcpu: rec.vcpu,
            page_table_base: base,
            vaddr: rec.pc,
            bytes: &self.buf[..n],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::StopReason;

    fn rec(pc: u64, user: bool) -> SampleRecord<'static> {
        SampleRecord {
            vcpu: 3,
            user,
            stop: StopReason::NullFramePointer,
            time_ns: 0,
            icount: 0,
            pc,
            sp: 0,
            sp_word: None,
            frames: &[],
            entry_resolved: false,
        }
    }

    fn user(base: u64) -> SampleExtras {
        SampleExtras {
            privilege: Privilege::User,
            page_table_base: Some(base),
            ..SampleExtras::default()
        }
    }

    /// Guest memory: code bytes equal to their address's low byte below 0x4001000, nothing
    /// readable above.
    fn mem(addr: u64, out: &mut [u8]) -> bool {
        if addr + out.len() as u64 > 0x0400_1000 {
            return false;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = (addr + i as u64) as u8;
        }
        true
    }

    #[test]
    fn first_sample_of_each_page_and_space_reads_code() {
        let mut c = CodeSampler::default();
        let r = c
            .sample(&rec(0x0400_0210, true), &user(0x10f000), mem)
            .unwrap();
        assert_eq!(
            (r.vcpu, r.page_table_base, r.vaddr),
            (3, 0x10f000, 0x0400_0210)
        );
        assert_eq!(r.bytes.len(), CODE_BYTES);
        assert_eq!(r.bytes[0], 0x10);
        // The same page again: nothing; the same page of another address space: a record.
        assert!(c
            .sample(&rec(0x0400_0300, true), &user(0x10f000), mem)
            .is_none());
        assert!(c
            .sample(&rec(0x0400_0300, true), &user(0x110000), mem)
            .is_some());
    }

    #[test]
    fn kernel_samples_and_missing_bases_read_nothing() {
        let mut c = CodeSampler::default();
        let kernel = SampleExtras {
            privilege: Privilege::Kernel,
            page_table_base: Some(0x10f000),
            ..SampleExtras::default()
        };
        assert!(c.sample(&rec(0x0010_0000, false), &kernel, mem).is_none());
        let no_base = SampleExtras {
            privilege: Privilege::User,
            ..SampleExtras::default()
        };
        assert!(c.sample(&rec(0x0400_0000, true), &no_base, mem).is_none());
    }

    #[test]
    fn code_at_a_pages_end_is_read_up_to_it() {
        let mut c = CodeSampler::default();
        let r = c.sample(&rec(0x0400_0ff0, true), &user(1), mem).unwrap();
        assert_eq!(r.bytes.len(), 16);
        // Unreadable altogether: no record, and the page is not tried again.
        assert!(c.sample(&rec(0x0500_0000, true), &user(1), mem).is_none());
        assert!(c
            .sample(&rec(0x0500_0010, true), &user(1), |_, _| true)
            .is_none());
    }

    #[test]
    fn records_are_bounded_per_space_and_in_all() {
        let mut c = CodeSampler::default();
        let always = |_: u64, _: &mut [u8]| true;
        let n = (0..1000u64)
            .filter(|p| c.sample(&rec(p * PAGE, true), &user(7), always).is_some())
            .count();
        assert_eq!(n, MAX_PER_SPACE as usize);
        let mut c = CodeSampler::default();
        let n = (0..MAX_PAGES as u64 * 2)
            .filter(|s| c.sample(&rec(0, true), &user(s * PAGE), always).is_some())
            .count();
        assert_eq!(n, MAX_PAGES);
    }
}
