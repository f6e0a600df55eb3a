use super::*;

/// A fake guest memory: `bytes` mapped at `base`, everything else unreadable.
struct Mem {
    base: u64,
    bytes: Vec<u8>,
    width: PtrWidth,
    reads: usize,
}

impl Mem {
    fn new(base: u64, len: usize, width: PtrWidth) -> Self {
        Mem {
            base,
            bytes: vec![0; len],
            width,
            reads: 0,
        }
    }

    fn put(&mut self, addr: u64, v: u64) {
        let w = self.width.bytes();
        let at = (addr - self.base) as usize;
        self.bytes[at..at + w].copy_from_slice(&v.to_le_bytes()[..w]);
    }

    /// Writes a frame record at `fp`.
    fn frame(&mut self, fp: u64, saved_fp: u64, ret: u64) {
        self.put(fp, saved_fp);
        self.put(fp + self.width.bytes() as u64, ret);
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads += 1;
        assert_eq!(
            buf.len(),
            2 * self.width.bytes(),
            "one whole record per read"
        );
        let Some(off) = addr.checked_sub(self.base) else {
            return false;
        };
        let Ok(off) = usize::try_from(off) else {
            return false;
        };
        match self.bytes.get(off..off.saturating_add(buf.len())) {
            Some(src) if src.len() == buf.len() => {
                buf.copy_from_slice(src);
                true
            }
            _ => false,
        }
    }

    fn walk(&mut self, fp: u64, max_depth: usize) -> (Vec<u64>, StopReason) {
        let mut out = vec![0; 64];
        let width = self.width;
        let r = walk(fp, width, max_depth, |a, b| self.read(a, b), &mut out);
        out.truncate(r.frames);
        (out, r.stop)
    }
}

const BOTH: [PtrWidth; 2] = [PtrWidth::W4, PtrWidth::W8];

/// A chain of `n` frames, 0x40 bytes apart, starting at base + 0x100; the outermost frame
/// holds `last_saved`. Returns the memory, the first FP and the return addresses.
fn chain(width: PtrWidth, n: usize, last_saved: u64) -> (Mem, u64, Vec<u64>) {
    let base = 0x10_0000;
    let mut m = Mem::new(base, 0x100 + 0x40 * (n + 1), width);
    let mut rets = Vec::new();
    for i in 0..n {
        let fp = base + 0x100 + 0x40 * i as u64;
        let saved = if i + 1 == n { last_saved } else { fp + 0x40 };
        let ret = 0xc010_0000 + i as u64 * 0x11;
        m.frame(fp, saved, ret);
        rets.push(ret);
    }
    (m, base + 0x100, rets)
}

#[test]
fn normal_chain_ends_at_null_fp() {
    for w in BOTH {
        let (mut m, fp, rets) = chain(w, 5, 0);
        let (frames, stop) = m.walk(fp, 64);
        assert_eq!(frames, rets, "{w:?}");
        assert_eq!(stop, StopReason::NullFramePointer);
        assert_eq!(m.reads, 5);
    }
}

#[test]
fn null_fp_at_start_reads_nothing() {
    for w in BOTH {
        let (mut m, _, _) = chain(w, 2, 0);
        assert_eq!(m.walk(0, 64), (vec![], StopReason::NullFramePointer));
        assert_eq!(m.reads, 0);
    }
}

/// x86 asks no alignment of a frame pointer: an odd chain (FreePascal's threads start their
/// stacks at `top - 1`: 8n+7 on x86_64, 4n+3 on i386) is walked to its root.
#[test]
fn odd_frame_pointers_are_followed() {
    for w in BOTH {
        let wb = w.bytes() as u64;
        let base = 0x10_0000;
        let mut m = Mem::new(base, 0x400, w);
        // Three records at wb*n - 1, 0x48 apart, the outermost holding a null frame pointer.
        let fps: Vec<u64> = (0..3).map(|i| base + 0x100 + 0x48 * i + wb - 1).collect();
        for (i, &fp) in fps.iter().enumerate() {
            let saved = fps.get(i + 1).copied().unwrap_or(0);
            m.frame(fp, saved, 0xc010_0000 + i as u64);
        }
        assert_eq!(fps[0] % wb, wb - 1);
        let (frames, stop) = m.walk(fps[0], 64);
        assert_eq!(frames, [0xc010_0000, 0xc010_0001, 0xc010_0002], "{w:?}");
        assert_eq!(stop, StopReason::NullFramePointer, "{w:?}");
        // An odd saved frame pointer into zeroed memory: no caller there.
        m.frame(fps[2], fps[2] + 0x41, 0xc010_0002);
        let (frames, stop) = m.walk(fps[0], 64);
        assert_eq!(frames.len(), 3, "{w:?}");
        assert_eq!(stop, StopReason::NullReturnAddress, "{w:?}");
        // Still strictly upwards: an odd pointer below the last is a loop's.
        m.frame(fps[2], fps[1] + 1, 0xc010_0002);
        let (_, stop) = m.walk(fps[0], 64);
        assert_eq!(stop, StopReason::NotIncreasing, "{w:?}");
    }
}

#[test]
fn loops_and_downward_steps_stop() {
    for w in BOTH {
        // A frame that points at itself.
        let (mut m, fp, rets) = chain(w, 1, 0);
        m.frame(fp, fp, rets[0]);
        assert_eq!(m.walk(fp, 64), (rets.clone(), StopReason::NotIncreasing));
        // A two-frame cycle.
        let (mut m, fp, rets) = chain(w, 2, 0);
        m.frame(fp + 0x40, fp, rets[1]);
        assert_eq!(m.walk(fp, 64), (rets, StopReason::NotIncreasing));
        // A step downwards.
        let (mut m, fp, rets) = chain(w, 3, 0x10_0000 + 0x100 - 0x40);
        assert_eq!(m.walk(fp, 64), (rets, StopReason::NotIncreasing));
    }
}

#[test]
fn walk_above_rejects_fp_below_floor() {
    for w in BOTH {
        let (mut m, fp, rets) = chain(w, 2, 0);
        let mut out = [0u64; 8];
        let r = walk_above(fp + 8, fp, w, 8, |a, b| m.read(a, b), &mut out);
        assert_eq!(
            r,
            Walk {
                frames: 0,
                stop: StopReason::NotIncreasing,
                walker: kern_profile_format::Walker::FramePointers,
                from_user: false
            }
        );
        let r = walk_above(fp, fp, w, 8, |a, b| m.read(a, b), &mut out);
        assert_eq!(
            r,
            Walk {
                frames: 2,
                stop: StopReason::NullFramePointer,
                walker: kern_profile_format::Walker::FramePointers,
                from_user: false
            }
        );
        assert_eq!(&out[..2], &rets[..]);
    }
}

#[test]
fn unreadable_memory() {
    for w in BOTH {
        let (mut m, _, _) = chain(w, 2, 0);
        assert_eq!(m.walk(0x2000_0000, 64), (vec![], StopReason::Unreadable));
        // A chain that leads out of the mapped memory.
        let (mut m, fp, rets) = chain(w, 3, 0x3000_0000);
        assert_eq!(m.walk(fp, 64), (rets, StopReason::Unreadable));
        // A record straddling the end of the mapping.
        let end = m.base + m.bytes.len() as u64;
        assert_eq!(
            m.walk(end - w.bytes() as u64, 64),
            (vec![], StopReason::Unreadable)
        );
    }
}

#[test]
fn null_return_address() {
    for w in BOTH {
        let (mut m, fp, rets) = chain(w, 3, 0);
        m.frame(fp + 0x80, 0, 0);
        assert_eq!(
            m.walk(fp, 64),
            (rets[..2].to_vec(), StopReason::NullReturnAddress)
        );
    }
}

#[test]
fn depth_cap() {
    for w in BOTH {
        let (mut m, fp, rets) = chain(w, 10, 0);
        assert_eq!(m.walk(fp, 3), (rets[..3].to_vec(), StopReason::DepthLimit));
        assert_eq!(m.reads, 3);
        // Exactly as deep as the chain: the chain's own end wins.
        assert_eq!(m.walk(fp, 10), (rets.clone(), StopReason::NullFramePointer));
        // Depth 0.
        assert_eq!(m.walk(fp, 0), (vec![], StopReason::DepthLimit));
        // The output slice caps the depth too.
        let mut out = [0u64; 4];
        let r = walk(fp, w, 100, |a, b| m.read(a, b), &mut out);
        assert_eq!(
            r,
            Walk {
                frames: 4,
                stop: StopReason::DepthLimit,
                walker: kern_profile_format::Walker::FramePointers,
                from_user: false
            }
        );
        assert_eq!(&out[..], &rets[..4]);
    }
}

#[test]
fn i386_ignores_upper_bytes_and_32_bit_wrap() {
    // Width 4 reads 32-bit words even if the record bytes around them are not zero.
    let mut m = Mem::new(0x1000, 0x100, PtrWidth::W4);
    m.bytes.fill(0xee);
    m.frame(0x1010, 0, 0xc000_1234);
    assert_eq!(
        m.walk(0x1010, 8),
        (vec![0xc000_1234], StopReason::NullFramePointer)
    );
    // A record that would run past 4 GiB, and a value beyond 32 bits: never read.
    let mut m = Mem::new(0xffff_ff00, 0x100, PtrWidth::W4);
    assert_eq!(m.walk(0xffff_fffc, 8), (vec![], StopReason::Unreadable));
    assert_eq!(m.walk(0x1_0000_0000, 8), (vec![], StopReason::Unreadable));
    assert_eq!(m.reads, 0);
}

#[test]
fn x86_64_near_the_top_of_the_address_space() {
    let base = u64::MAX - 0x3f; // 0xffff_ffff_ffff_ffc0
    let mut m = Mem::new(base, 0x40, PtrWidth::W8);
    m.frame(base, base + 0x10, 0xffff_ffff_8000_0010);
    m.frame(base + 0x10, base + 0x30, 0xffff_ffff_8000_0020);
    m.frame(base + 0x30, 0, 0xffff_ffff_8000_0030);
    assert_eq!(
        m.walk(base, 8),
        (
            vec![
                0xffff_ffff_8000_0010,
                0xffff_ffff_8000_0020,
                0xffff_ffff_8000_0030
            ],
            StopReason::NullFramePointer
        )
    );
    // The last possible aligned FP: its record would wrap around.
    assert_eq!(m.walk(u64::MAX - 7, 8), (vec![], StopReason::Unreadable));
    // Pointing there from a readable frame.
    m.frame(base + 0x30, u64::MAX - 7, 0xffff_ffff_8000_0030);
    let (frames, stop) = m.walk(base, 8);
    assert_eq!(frames.len(), 3);
    assert_eq!(stop, StopReason::Unreadable);
}

/// xorshift64*, for reproducible garbage.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn garbage_never_panics_and_stays_short() {
    for w in BOTH {
        for seed in 0..2000u64 {
            let mut next = rng(seed);
            let depth = (next() % 40) as usize;
            let mut reads = 0usize;
            let mut out = vec![0; (next() % 50) as usize];
            let fp = match seed % 4 {
                0 => next(),
                1 => next() & !7,
                2 => u64::MAX - (next() % 64),
                _ => next() % 0x1_0000,
            };
            let r = walk(
                fp,
                w,
                depth,
                |addr, buf| {
                    reads += 1;
                    assert!(addr.checked_add(buf.len() as u64 - 1).is_some());
                    for b in buf.iter_mut() {
                        *b = next() as u8;
                    }
                    // Mostly upward-ish garbage, sometimes unreadable.
                    !next().is_multiple_of(8)
                },
                &mut out,
            );
            assert!(r.frames <= depth.min(out.len()));
            assert!(reads <= depth.min(out.len()));
            assert!(out[..r.frames].iter().all(|&a| a != 0 && a <= w.max_addr()));
        }
    }
}

#[test]
fn reader_that_writes_nothing_gives_null_return() {
    for w in BOTH {
        let mut out = [0u64; 4];
        let r = walk(0x1000, w, 4, |_, _| true, &mut out);
        assert_eq!(
            r,
            Walk {
                frames: 0,
                stop: StopReason::NullReturnAddress,
                walker: kern_profile_format::Walker::FramePointers,
                from_user: false
            }
        );
    }
}

#[test]
fn long_upward_garbage_chain_is_capped() {
    // Each record points 16 bytes higher: a "valid" chain as long as memory allows.
    for w in BOTH {
        let mut out = vec![0u64; 1024];
        let wb = w.bytes() as u64;
        let r = walk(
            0x1000,
            w,
            1024,
            |addr, buf| {
                buf[..wb as usize].copy_from_slice(&(addr + 16).to_le_bytes()[..wb as usize]);
                buf[wb as usize..].copy_from_slice(&0xabcu64.to_le_bytes()[..wb as usize]);
                true
            },
            &mut out,
        );
        assert_eq!(
            r,
            Walk {
                frames: 1024,
                stop: StopReason::DepthLimit,
                walker: kern_profile_format::Walker::FramePointers,
                from_user: false
            }
        );
    }
}

#[test]
fn widths() {
    assert_eq!(PtrWidth::from_bytes(4), Ok(PtrWidth::W4));
    assert_eq!(PtrWidth::from_bytes(8), Ok(PtrWidth::W8));
    assert_eq!(PtrWidth::from_bytes(2), Err(BadWidth(2)));
    assert_eq!(
        BadWidth(3).to_string(),
        "pointer width must be 4 or 8 bytes, not 3"
    );
    assert_eq!(PtrWidth::W4.word(&[1, 2, 3, 4, 5, 6, 7, 8]), 0x0403_0201);
    assert_eq!(PtrWidth::W8.word(&[1, 2]), 0x0201);
}
