//! Code bytes at sampled user addresses (record kind 6), so that the aggregator can tell
//! which program ran in which address space when several are linked at the same addresses.
//!
//! The first time a vCPU samples a user-mode PC in a 4 KiB page of an address space (a
//! page-table base), or in another 256-byte chunk of it, the plugin reads [`CODE_BYTES`]
//! bytes of code there; a later user-mode sample of that page reads again the bytes read in
//! its chunk (the page's first read at a user-mode pc where its chunk has none) and compares
//! them: each chunk's, because programs may share code at one address (two builds of one
//! source, a function moved by another put before it), and a page's first read may have
//! fallen there. Bytes that changed say
//! the page directory now runs another program (a kernel that reuses one for programs run
//! one after another, as an exec that frees the old directory and gets the same page back):
//! the address space is forgotten and the new bytes recorded, which tells the aggregator,
//! reading in file order, that the space's next program begins there. Bounded per vCPU: at
//! most [`MAX_PER_SPACE`] records per address space and program, [`MAX_PAGES`] pages and
//! [`MAX_CHANGES`] program changes in all, after which nothing more is read.
//!
//! A process may never be sampled in user mode (a shell waiting in system calls): its
//! system calls' stacks hold its user addresses all the same, past the kernel entry. So a
//! kernel-mode sample in an address space with no user-mode sample yet reads the code at
//! the user addresses its walk found past the outermost entry (the interrupted pc, then the
//! return addresses: the pc may be a shared page such as i386 Linux's vDSO, which no program
//! holds), [`MAX_FROM_ENTRY`] pages per sample at most and [`MAX_FROM_KERNEL`] records in
//! all. Only where the kernel lies at the top of the address space and the address below it
//! (Linux: i386's 3G/1G split, the upper half on 64-bit guests), so no kernel code is taken
//! for a program's: a record no given program holds is ignored, but one that could be the
//! kernel's is not worth the doubt.

use kern_profile_format::{frame_marker, Arch, CodeBytes, Privilege, SampleExtras, SampleRecord};
use rustc_hash::{FxHashMap, FxHashSet};

/// Bytes of code read at a sampled PC (fewer at the end of a readable page).
pub const CODE_BYTES: usize = 64;
/// Records per address space and vCPU.
pub const MAX_PER_SPACE: u32 = 32;
/// (address space, page) pairs a vCPU remembers.
pub const MAX_PAGES: usize = 4096;
/// Pages read for one kernel-mode sample.
pub const MAX_FROM_ENTRY: usize = 4;
/// Records a vCPU reads for kernel-mode samples in all.
pub const MAX_FROM_KERNEL: u32 = 256;
/// Program changes a vCPU records in all (a guest that rewrites its code all the time, a
/// JIT, would otherwise record at every sample).
pub const MAX_CHANGES: u32 = 256;

const PAGE: u64 = 0x1000;

/// Bytes of a page per record at most: a later user-mode sample in another chunk of a page
/// is recorded too, as one record's 64 bytes may be code that several programs share.
const CHUNK: u64 = 256;

/// What was read in one page of one address space: the pc of its first read at a user-mode
/// pc, whose [`Window`] a later sample compares where its own chunk has none (`None`: read
/// only at a return address of a kernel-mode sample's walk, maybe garbage in data, never
/// compared); the chunks read at user-mode pcs.
#[derive(Debug, Clone, Copy)]
struct Seen {
    first_user_pc: Option<u64>,
    chunks: u16,
}

fn chunk_bit(pc: u64) -> u16 {
    1 << ((pc % PAGE) / CHUNK)
}

/// One vCPU's record of the pages whose code it has read.
#[derive(Debug, Clone)]
pub struct CodeSampler {
    /// (address space, page) → what was read there; `None`: nothing could be.
    seen: FxHashMap<(u64, u64), Option<Seen>>,
    /// Program changes recorded.
    changes: u32,
    per_space: FxHashMap<u64, u32>,
    /// Address spaces with a user-mode sample: their program's code is read there.
    user_spaces: FxHashSet<u64>,
    /// Records read for kernel-mode samples.
    from_kernel: u32,
    /// Where Linux's kernel addresses begin: user addresses lie below.
    kernel_start: u64,
    /// (address space, pc / CHUNK) → the read at a user-mode pc in that chunk: what a later
    /// sample there compares.
    windows: FxHashMap<(u64, u64), Window>,
    buf: Vec<u8>,
}

/// One read at a user-mode pc: where, how many bytes of it lie in its page, their hash.
#[derive(Debug, Clone, Copy)]
struct Window {
    vaddr: u64,
    len: usize,
    hash: u64,
}

impl CodeSampler {
    /// A vCPU's sampler for a guest of `arch`.
    pub fn new(arch: Arch) -> Self {
        CodeSampler {
            seen: FxHashMap::default(),
            changes: 0,
            per_space: FxHashMap::default(),
            user_spaces: FxHashSet::default(),
            from_kernel: 0,
            kernel_start: kern_profile_arch::guest(arch).kernel_start(),
            windows: FxHashMap::default(),
            buf: Vec::new(),
        }
    }

    /// The code-bytes records due for sample `rec` (with its extras `x`), passed to `out`:
    /// at its pc if it is the vCPU's first user-mode sample in its page of its address
    /// space; for a kernel-mode sample in an address space without a user-mode sample, at
    /// the user addresses past the entry from it (see the module's text). `mem(addr, out)`
    /// reads guest memory at a virtual address (through the sampled vCPU's page tables)
    /// and says whether it could.
    pub fn sample<M>(
        &mut self,
        rec: &SampleRecord<'_>,
        x: &SampleExtras,
        mut mem: M,
        mut out: impl FnMut(&CodeBytes<'_>),
    ) where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let Some(base) = x.page_table_base else {
            return;
        };
        let user = match x.privilege {
            Privilege::Unknown => rec.user,
            p => p == Privilege::User,
        };
        if user {
            self.user_spaces.insert(base);
            let seen = self.seen.get(&(base, rec.pc / PAGE)).copied();
            let first = seen.flatten().and_then(|s| s.first_user_pc);
            let changed = first.and_then(|f| self.changed(base, rec.pc, f, &mut mem));
            let c = match (seen, changed) {
                // The record at the address whose bytes changed: the aggregator starts the
                // space's next program where a record's address repeats with other bytes.
                (_, Some(at)) => self.restart(rec.vcpu, base, at, &mut mem),
                (Some(Some(was)), None) if was.chunks & chunk_bit(rec.pc) == 0 => {
                    self.more(rec.vcpu, base, rec.pc, was, &mut mem)
                }
                (Some(_), None) => None,
                (None, None) => self.read(rec.vcpu, base, rec.pc, true, &mut mem),
            };
            if let Some(c) = c {
                out(&c);
            }
            return;
        }
        // A walk that crossed from the program into the kernel says its frames past the
        // entry are the program's, wherever the kernel lies; else the kernel's place says.
        let crossed = rec.stop.from_user();
        if self.user_spaces.contains(&base)
            || self.from_kernel >= MAX_FROM_KERNEL
            || (!crossed && rec.pc < self.kernel_start)
        {
            return;
        }
        // Past the outermost entry: the interrupted pc, then its return addresses.
        let Some(entry) = rec
            .frames
            .iter()
            .rposition(|&a| a == frame_marker::KERNEL_ENTRY)
        else {
            return;
        };
        let mut tried = 0;
        for &addr in &rec.frames[entry + 1..] {
            // A marker (another entry or stack switch) or a kernel address: no user part.
            if addr < frame_marker::LIMIT || (!crossed && addr >= self.kernel_start) {
                break;
            }
            if tried == MAX_FROM_ENTRY || self.from_kernel >= MAX_FROM_KERNEL {
                break;
            }
            if self.seen.contains_key(&(base, addr / PAGE)) {
                continue;
            }
            tried += 1;
            self.from_kernel += 1;
            if let Some(c) = self.read(rec.vcpu, base, addr, false, &mut mem) {
                out(&c);
            }
        }
    }

    /// The code at `pc` in address space `base`, the first time its page is asked for
    /// within the bounds; `user_pc`: `pc` is a user-mode sample's.
    fn read<M>(
        &mut self,
        vcpu: u32,
        base: u64,
        pc: u64,
        user_pc: bool,
        mem: &mut M,
    ) -> Option<CodeBytes<'_>>
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let page = pc / PAGE;
        if self.seen.contains_key(&(base, page)) || self.seen.len() >= MAX_PAGES {
            return None;
        }
        if !self.count(base) {
            return None;
        }
        let Some((n, len)) = self.fill(pc, mem) else {
            self.seen.insert((base, page), None);
            return None;
        };
        let seen = Seen {
            first_user_pc: user_pc.then_some(pc),
            chunks: if user_pc { chunk_bit(pc) } else { 0 },
        };
        if user_pc {
            self.remember(base, pc, len);
        }
        self.seen.insert((base, page), Some(seen));
        Some(self.record(vcpu, base, pc, n))
    }

    /// The code at user-mode `pc`, in a chunk of a page read before (`was`) that no
    /// user-mode sample read yet; it becomes the page's compared read if `was` came from a
    /// kernel-mode sample's walk.
    fn more<M>(
        &mut self,
        vcpu: u32,
        base: u64,
        pc: u64,
        was: Seen,
        mem: &mut M,
    ) -> Option<CodeBytes<'_>>
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let mut now = Seen {
            chunks: was.chunks | chunk_bit(pc),
            ..was
        };
        let page = pc / PAGE;
        if !self.count(base) {
            self.seen.insert((base, page), Some(now));
            return None;
        }
        let read = self.fill(pc, mem);
        if read.is_some() && was.first_user_pc.is_none() {
            now.first_user_pc = Some(pc);
        }
        self.seen.insert((base, page), Some(now));
        let (n, len) = read?;
        self.remember(base, pc, len);
        Some(self.record(vcpu, base, pc, n))
    }

    /// Keeps the read at user-mode `pc` (its first `len` bytes, in the buffer) as its
    /// chunk's, to compare at later samples there.
    fn remember(&mut self, base: u64, pc: u64, len: usize) {
        let window = Window {
            vaddr: pc,
            len,
            hash: hash(&self.buf[..len]),
        };
        self.windows.insert((base, pc / CHUNK), window);
    }

    /// Counts a record of address space `base`: false past its bound.
    fn count(&mut self, base: u64) -> bool {
        let count = self.per_space.entry(base).or_insert(0);
        if *count >= MAX_PER_SPACE {
            return false;
        }
        *count += 1;
        true
    }

    /// Reads the code at `pc` into the buffer: its length, and how much of it lies in `pc`'s
    /// page (up to the end of the page when the next one cannot be read).
    fn fill<M>(&mut self, pc: u64, mem: &mut M) -> Option<(usize, usize)>
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        let to_page_end = (PAGE - pc % PAGE).min(CODE_BYTES as u64) as usize;
        self.buf.resize(CODE_BYTES, 0);
        let n = if mem(pc, &mut self.buf[..]) {
            CODE_BYTES
        } else if to_page_end < CODE_BYTES && mem(pc, &mut self.buf[..to_page_end]) {
            to_page_end
        } else {
            return None;
        };
        Some((n, n.min(to_page_end)))
    }

    fn record(&self, vcpu: u32, base: u64, pc: u64, n: usize) -> CodeBytes<'_> {
        CodeBytes {
            vcpu,
            page_table_base: base,
            vaddr: pc,
            bytes: &self.buf[..n],
        }
    }

    /// Where the code read at a user-mode pc in `pc`'s chunk (else the page's first such
    /// read, at `first`) is no longer there, if it is not (within the bound on program
    /// changes).
    fn changed<M>(&mut self, base: u64, pc: u64, first: u64, mem: &mut M) -> Option<u64>
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        if self.changes >= MAX_CHANGES {
            return None;
        }
        let w = *self
            .windows
            .get(&(base, pc / CHUNK))
            .or_else(|| self.windows.get(&(base, first / CHUNK)))?;
        self.buf.resize(w.len, 0);
        let other = mem(w.vaddr, &mut self.buf[..w.len]) && hash(&self.buf[..w.len]) != w.hash;
        other.then_some(w.vaddr)
    }

    /// The address space runs another program: forgets it, and starts afresh with the code
    /// at `pc`.
    fn restart<M>(&mut self, vcpu: u32, base: u64, pc: u64, mem: &mut M) -> Option<CodeBytes<'_>>
    where
        M: FnMut(u64, &mut [u8]) -> bool,
    {
        self.changes += 1;
        self.seen.retain(|&(b, _), _| b != base);
        self.windows.retain(|&(b, _), _| b != base);
        self.per_space.remove(&base);
        self.read(vcpu, base, pc, true, mem)
    }
}

/// A hash of code bytes, to tell whether they changed.
fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::StopReason;

    const KE: u64 = frame_marker::KERNEL_ENTRY;

    fn rec(pc: u64, user: bool) -> SampleRecord<'static> {
        kernel_rec(pc, user, &[])
    }

    fn kernel_rec(pc: u64, user: bool, frames: &'static [u64]) -> SampleRecord<'static> {
        SampleRecord {
            vcpu: 3,
            user,
            stop: StopReason::NullFramePointer.into(),
            time_ns: 0,
            icount: 0,
            pc,
            sp: 0,
            sp_word: None,
            frames,
            entry_resolved: false,
        }
    }

    fn extras(privilege: Privilege, base: u64) -> SampleExtras {
        SampleExtras {
            privilege,
            page_table_base: Some(base),
            ..SampleExtras::default()
        }
    }

    fn user(base: u64) -> SampleExtras {
        extras(Privilege::User, base)
    }

    fn kernel(base: u64) -> SampleExtras {
        extras(Privilege::Kernel, base)
    }

    /// Guest memory: code bytes equal to their address's low byte below 0x4001000, nothing
    /// readable above (but the i386 kernel's and the vDSO's pages).
    fn mem(addr: u64, out: &mut [u8]) -> bool {
        let end = addr + out.len() as u64;
        let readable =
            end <= 0x0400_1000 || (0xb7f0_0000..0xb7f0_1000).contains(&addr) || addr >= 0xc000_0000;
        if !readable {
            return false;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = (addr + i as u64) as u8;
        }
        true
    }

    /// (vcpu, address space, address, bytes) of each record a sample gives.
    fn take<M: FnMut(u64, &mut [u8]) -> bool>(
        c: &mut CodeSampler,
        r: &SampleRecord<'_>,
        x: &SampleExtras,
        m: M,
    ) -> Vec<(u32, u64, u64, Vec<u8>)> {
        let mut got = Vec::new();
        c.sample(r, x, m, |b| {
            got.push((b.vcpu, b.page_table_base, b.vaddr, b.bytes.to_vec()))
        });
        got
    }

    /// What a kernel-mode sample at `pc` walked through `frames` in address space `base`
    /// gives.
    fn take_kernel<M: FnMut(u64, &mut [u8]) -> bool>(
        c: &mut CodeSampler,
        pc: u64,
        frames: &'static [u64],
        base: u64,
        m: M,
    ) -> Vec<(u32, u64, u64, Vec<u8>)> {
        take(c, &kernel_rec(pc, false, frames), &kernel(base), m)
    }

    fn i386() -> CodeSampler {
        CodeSampler::new(Arch::I386)
    }

    #[test]
    fn first_sample_of_each_page_and_space_reads_code() {
        let mut c = i386();
        let r = take(&mut c, &rec(0x0400_0210, true), &user(0x10f000), mem);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].0, r[0].1, r[0].2), (3, 0x10f000, 0x0400_0210));
        assert_eq!(r[0].3.len(), CODE_BYTES);
        assert_eq!(r[0].3[0], 0x10);
        // The same chunk of the page again: nothing; another chunk: a record; the same page
        // of another address space: a record.
        assert!(take(&mut c, &rec(0x0400_0220, true), &user(0x10f000), mem).is_empty());
        assert_eq!(
            take(&mut c, &rec(0x0400_0300, true), &user(0x10f000), mem).len(),
            1
        );
        assert!(take(&mut c, &rec(0x0400_0310, true), &user(0x10f000), mem).is_empty());
        assert_eq!(
            take(&mut c, &rec(0x0400_0300, true), &user(0x110000), mem).len(),
            1
        );
    }

    #[test]
    fn kernel_samples_without_an_entry_and_missing_bases_read_nothing() {
        let mut c = i386();
        assert!(take(&mut c, &rec(0xc010_0000, false), &kernel(0x10f000), mem).is_empty());
        let no_base = SampleExtras {
            privilege: Privilege::User,
            ..SampleExtras::default()
        };
        assert!(take(&mut c, &rec(0x0400_0000, true), &no_base, mem).is_empty());
    }

    /// A system call of a process never sampled in user mode (i386 Linux): the kernel's
    /// frames, the entry, the interrupted pc in the vDSO, the program's return addresses.
    const SYSCALL: &[u64] = &[
        0xc010_2000,
        0xc010_1000,
        KE,
        0xb7f0_0420,
        0x0400_0510,
        0x0400_0600,
    ];

    #[test]
    fn a_kernel_sample_reads_the_user_code_past_the_entry() {
        let mut c = i386();
        let r = take_kernel(&mut c, 0xc010_3000, SYSCALL, 0x20f000, mem);
        // The vDSO's page and the program's (once: 0x4000600 is on the same page).
        let got: Vec<(u64, u64)> = r.iter().map(|r| (r.1, r.2)).collect();
        assert_eq!(got, [(0x20f000, 0xb7f0_0420), (0x20f000, 0x0400_0510)]);
        assert_eq!(r[1].3[0], 0x10);
        // Pages once read are not read again.
        assert!(take_kernel(&mut c, 0xc010_3000, SYSCALL, 0x20f000, mem).is_empty());
        // Once the address space has a user-mode sample, its kernel samples read nothing.
        let mut c = i386();
        take(&mut c, &rec(0x0400_0800, true), &user(0x20f000), mem);
        assert!(take_kernel(&mut c, 0xc010_3000, SYSCALL, 0x20f000, mem).is_empty());
    }

    #[test]
    fn only_lower_half_addresses_past_the_outermost_entry_are_read() {
        let mut c = i386();
        // An interrupt of kernel code: the interrupted pc is the kernel's.
        let kernel_irq: &[u64] = &[0xc010_2000, KE, 0xc010_5000, 0xc010_6000];
        assert!(take_kernel(&mut c, 0xc010_3000, kernel_irq, 1, mem).is_empty());
        // An interrupt inside a system call: the outer entry's user part only, up to a
        // kernel address (garbage past the program's first frame).
        let nested: &[u64] = &[
            0xc010_2000,
            KE,
            0xc010_5000,
            KE,
            0x0400_0100,
            0xc010_7000,
            0x0400_0200,
        ];
        let r = take_kernel(&mut c, 0xc010_3000, nested, 1, mem);
        assert_eq!(r.iter().map(|r| r.2).collect::<Vec<_>>(), [0x0400_0100]);
        // A kernel low in memory (the example kernels): nothing tells user from kernel.
        let low: &[u64] = &[0x10_2000, KE, 0x0400_0100];
        assert!(take_kernel(&mut c, 0x10_3000, low, 2, mem).is_empty());
        // 64-bit guests: the kernel's is the upper half.
        let mut c = CodeSampler::new(Arch::X86_64);
        let x64: &[u64] = &[0xffff_ffff_8100_0000, KE, 0x0400_0100];
        let r = take_kernel(&mut c, 0xffff_ffff_8100_1000, x64, 3, mem);
        assert_eq!(r.len(), 1);
        assert!(take_kernel(&mut c, 0xc010_3000, low, 4, mem).is_empty());
    }

    /// A classic kernel in the lower half (xv6's at 0x80100000, below i386 Linux's split):
    /// only a walk that says it crossed from the program marks the frames past the entry as
    /// the program's.
    #[test]
    fn a_walk_that_crossed_from_user_space_names_the_programs_frames_anywhere() {
        const FRAMES: &[u64] = &[0x8010_2000, KE, 0x0000_1234, 0x0000_2345];
        let mut c = i386();
        // The reason alone (an older walker's): the kernel is below the split, so nothing.
        assert!(take_kernel(&mut c, 0x8010_1000, FRAMES, 0x3f_f000, mem).is_empty());
        let mut crossed = kernel_rec(0x8010_1000, false, FRAMES);
        crossed.stop = kern_profile_format::WalkEnd::new(
            StopReason::NullFramePointer,
            kern_profile_format::Walker::FramePointers,
            true,
        );
        let got = take(&mut c, &crossed, &kernel(0x3f_f000), mem);
        let read: Vec<u64> = got.iter().map(|r| r.2).collect();
        assert_eq!(read, [0x1234, 0x2345]);
    }

    #[test]
    fn kernel_samples_read_within_their_bounds() {
        let always = |_: u64, _: &mut [u8]| true;
        // At most MAX_FROM_ENTRY pages a sample.
        static MANY: [u64; 10] = {
            let mut f = [0u64; 10];
            f[0] = KE;
            let mut i = 1;
            while i < 10 {
                f[i] = i as u64 * PAGE;
                i += 1;
            }
            f
        };
        let mut c = i386();
        let r = take_kernel(&mut c, 0xc010_0000, &MANY, 1, always);
        assert_eq!(r.len(), MAX_FROM_ENTRY);
        // MAX_FROM_KERNEL in all, over address spaces.
        let mut c = i386();
        let n: usize = (0..MAX_FROM_KERNEL as u64)
            .map(|s| take_kernel(&mut c, 0xc010_0000, &MANY, s * PAGE, always).len())
            .sum();
        assert_eq!(n, MAX_FROM_KERNEL as usize);
    }

    #[test]
    fn code_at_a_pages_end_is_read_up_to_it() {
        let mut c = i386();
        let r = take(&mut c, &rec(0x0400_0ff0, true), &user(1), mem);
        assert_eq!(r[0].3.len(), 16);
        // Unreadable altogether: no record, and the page is not tried again.
        assert!(take(&mut c, &rec(0x0500_0000, true), &user(1), mem).is_empty());
        assert!(take(&mut c, &rec(0x0500_0010, true), &user(1), |_, _| true).is_empty());
    }

    #[test]
    fn records_are_bounded_per_space_and_in_all() {
        let mut c = i386();
        let always = |_: u64, _: &mut [u8]| true;
        let n: usize = (0..1000u64)
            .map(|p| take(&mut c, &rec(p * PAGE, true), &user(7), always).len())
            .sum();
        assert_eq!(n, MAX_PER_SPACE as usize);
        let mut c = i386();
        let n: usize = (0..MAX_PAGES as u64 * 2)
            .map(|s| take(&mut c, &rec(0, true), &user(s * PAGE), always).len())
            .sum();
        assert_eq!(n, MAX_PAGES);
    }

    /// Guest memory whose code bytes are their address's low byte plus `shift`.
    fn program(shift: u8) -> impl FnMut(u64, &mut [u8]) -> bool {
        move |addr, out| {
            for (i, b) in out.iter_mut().enumerate() {
                *b = ((addr + i as u64) as u8).wrapping_add(shift);
            }
            true
        }
    }

    #[test]
    fn another_program_in_a_reused_address_space_is_recorded_again() {
        let mut c = i386();
        let first = take(&mut c, &rec(0x0400_0210, true), &user(1), program(0));
        assert_eq!(first.len(), 1);
        take(&mut c, &rec(0x0400_1010, true), &user(1), program(0));
        // The same code in the same chunk of the page: nothing more.
        assert!(take(&mut c, &rec(0x0400_0220, true), &user(1), program(0)).is_empty());
        // Other code there now: the bytes at the address first read, then each page anew.
        let again = take(&mut c, &rec(0x0400_0220, true), &user(1), program(5));
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].1, again[0].2), (1, 0x0400_0210));
        assert_eq!(again[0].3[0], 0x15);
        assert_eq!(
            take(&mut c, &rec(0x0400_1010, true), &user(1), program(5)).len(),
            1
        );
        assert!(take(&mut c, &rec(0x0400_1020, true), &user(1), program(5)).is_empty());
        // Another address space is not forgotten with it.
        take(&mut c, &rec(0x0400_0210, true), &user(2), program(0));
        take(&mut c, &rec(0x0400_0220, true), &user(1), program(9));
        assert!(take(&mut c, &rec(0x0400_0220, true), &user(2), program(0)).is_empty());
    }

    /// Two programs with the same code where a page was first read (a function moved into
    /// the place of one just like it) but other code in another chunk read since: a sample
    /// there sees the change, and records it at that chunk's read.
    #[test]
    fn a_change_outside_the_pages_first_read_is_seen_in_its_own_chunk() {
        let b = |addr: u64, out: &mut [u8]| {
            for (i, o) in out.iter_mut().enumerate() {
                let a = addr + i as u64;
                *o = (a as u8).wrapping_add(if a >= 0x0400_0400 { 7 } else { 0 });
            }
            true
        };
        let mut c = i386();
        take(&mut c, &rec(0x0400_0210, true), &user(1), program(0));
        take(&mut c, &rec(0x0400_0480, true), &user(1), program(0));
        // The first read's bytes are the same in both: nothing there.
        assert!(take(&mut c, &rec(0x0400_0220, true), &user(1), b).is_empty());
        // The other chunk's are not.
        let again = take(&mut c, &rec(0x0400_0490, true), &user(1), b);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].2, again[0].3[0]), (0x0400_0480, 0x87));
        // From then on, program B's reads are the ones compared.
        assert!(take(&mut c, &rec(0x0400_0490, true), &user(1), b).is_empty());
        assert_eq!(take(&mut c, &rec(0x0400_0210, true), &user(1), b).len(), 1);
        let back = take(&mut c, &rec(0x0400_0490, true), &user(1), program(0));
        assert_eq!(back.iter().map(|r| r.2).collect::<Vec<_>>(), [0x0400_0480]);
    }

    /// A page first read at a return address of a kernel-mode sample's walk (maybe data):
    /// never compared; the first user-mode sample there is read and compared from then on.
    #[test]
    fn only_reads_at_user_mode_pcs_are_compared() {
        let mut c = i386();
        let r = take_kernel(&mut c, 0xc010_3000, SYSCALL, 5, program(0));
        assert!(r.iter().any(|r| r.2 == 0x0400_0510));
        // Other bytes at 0x4000510 now (data that changed): no program change, but the
        // user-mode pc's chunk is read.
        let u = take(&mut c, &rec(0x0400_0580, true), &user(5), program(3));
        assert_eq!(u.iter().map(|r| r.2).collect::<Vec<_>>(), [0x0400_0580]);
        // From then on that read is the one compared.
        assert!(take(&mut c, &rec(0x0400_0590, true), &user(5), program(3)).is_empty());
        let changed = take(&mut c, &rec(0x0400_0590, true), &user(5), program(4));
        assert_eq!(
            changed.iter().map(|r| r.2).collect::<Vec<_>>(),
            [0x0400_0580]
        );
    }

    #[test]
    fn program_changes_are_bounded() {
        let mut c = i386();
        let n: usize = (0..MAX_CHANGES * 2 + 2)
            .map(|k| take(&mut c, &rec(0x0400_0210, true), &user(1), program(k as u8)).len())
            .sum();
        assert_eq!(n, 1 + MAX_CHANGES as usize);
    }
}
