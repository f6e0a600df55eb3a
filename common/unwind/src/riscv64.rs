//! riscv64 frame records, as GCC and LLVM lay them out with frame pointers: `fp` (`s0`)
//! points just *above* the record, which holds the caller's `fp` at `fp - 16` and the return
//! address at `fp - 8`:
//!
//! ```text
//! fp - 16     saved fp of the caller
//! fp - 8      return address into the caller
//! fp          (the caller's frame, the top of this one)
//! ```
//!
//! A function without a record of its own (a leaf as rustc's `force-frame-pointers=non-leaf`
//! or GCC leave it, or any function before its prologue) runs with the caller's `fp`; its
//! caller is only in `ra`, which the recorder records beside the walk and the reader inserts
//! where the call-frame information says `ra` still holds the return address.
//!
//! GCC 12 leaves may save only `s0`, at `fp - 8`, with no `ra` below it: the first record
//! then holds a stack address (the caller's `fp`) where the return address should be. The
//! walk recognises it (a value just above `fp`, aligned like a frame pointer) and goes on
//! from that saved `fp` without a return address.

use kern_profile_arch::riscv64::FRAME_RECORD;

use crate::records::Layout;

/// Where the records are, for [`crate::walk_guest`] (the crate's `records` module).
pub(crate) const LAYOUT: Layout = Layout {
    below: FRAME_RECORD.below,
    align: FRAME_RECORD.align,
    strip: core::convert::identity,
    gcc_leaf: true,
    final_regs: None,
    irq_stack: 0,
};

#[cfg(test)]
mod tests {
    use crate::{walk_guest, Crossings, Walk};
    use kern_profile_format::{Arch, StopReason};

    /// The plain walk: no crossings, no span.
    const NO: Crossings = Crossings {
        linux_pt_regs: false,
        maybe_linux: false,
        interrupt_frames: false,
        user_mode: false,
        kernel_cs: 0,
        stack_switches: 0,
        stack_span: 0,
    };

    /// Little-endian words mapped at `base`.
    struct Stack {
        base: u64,
        words: Vec<u64>,
    }

    impl Stack {
        fn new(base: u64, n: usize) -> Self {
            Stack {
                base,
                words: vec![0; n],
            }
        }
        fn put(&mut self, addr: u64, v: u64) {
            self.words[((addr - self.base) / 8) as usize] = v;
        }
        /// A record for the frame whose fp is `fp`.
        fn record(&mut self, fp: u64, saved_fp: u64, ret: u64) {
            self.put(fp - 16, saved_fp);
            self.put(fp - 8, ret);
        }
        fn read(&self, addr: u64, out: &mut [u8]) -> bool {
            let Some(off) = addr.checked_sub(self.base) else {
                return false;
            };
            let end = off + out.len() as u64;
            if end > self.words.len() as u64 * 8 {
                return false;
            }
            let bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
            out.copy_from_slice(&bytes[off as usize..end as usize]);
            true
        }

        /// The plain walk of this stack from `fp`, its record at or above `floor`.
        fn walk(&self, floor: u64, fp: u64, depth: usize, out: &mut [u64]) -> Walk {
            walk_guest(
                Arch::Riscv64,
                floor,
                fp,
                depth,
                NO,
                |a, b| self.read(a, b),
                out,
            )
        }
    }

    #[test]
    fn walks_records_below_fp() {
        let mut s = Stack::new(0x8000_1000, 64);
        s.record(0x8000_1040, 0x8000_1080, 0x8000_0100);
        s.record(0x8000_1080, 0x8000_10c0, 0x8000_0200);
        s.record(0x8000_10c0, 0, 0x8000_0300);
        let mut out = [0; 8];
        let w = s.walk(0x8000_1010, 0x8000_1040, 8, &mut out);
        assert_eq!(w.stop, StopReason::NullFramePointer);
        assert_eq!(&out[..w.frames], &[0x8000_0100, 0x8000_0200, 0x8000_0300]);
    }

    #[test]
    fn gcc_leaf_record_without_ra_is_skipped() {
        let mut s = Stack::new(0x8000_1000, 64);
        // The leaf saved only s0 (= the caller's fp 0x8000_1080) at fp - 8.
        s.put(0x8000_1040 - 8, 0x8000_1080);
        s.record(0x8000_1080, 0, 0x8000_0200);
        let mut out = [0; 8];
        let w = s.walk(0x8000_1030, 0x8000_1040, 8, &mut out);
        assert_eq!(w.stop, StopReason::NullFramePointer);
        assert_eq!(&out[..w.frames], &[0x8000_0200]);
    }

    #[test]
    fn bad_chains_stop_with_a_reason() {
        let mut s = Stack::new(0x8000_1000, 64);
        // A cycle: the record points back at its own frame.
        s.record(0x8000_1040, 0x8000_1040, 0x8000_0100);
        let mut out = [0; 8];
        let w = s.walk(0x8000_1000, 0x8000_1040, 8, &mut out);
        assert_eq!((w.frames, w.stop), (1, StopReason::NotIncreasing));
        // Unmapped, misaligned, below the stack pointer, depth.
        let w = s.walk(0, 0x9000_0000, 8, &mut out);
        assert_eq!((w.frames, w.stop), (0, StopReason::Unreadable));
        let w = s.walk(0, 0x8000_1048, 8, &mut out);
        assert_eq!(w.stop, StopReason::Misaligned);
        let w = s.walk(0x8000_1100, 0x8000_1040, 8, &mut out);
        assert_eq!(w.stop, StopReason::NotIncreasing);
        let w = s.walk(0, 0x8000_1040, 0, &mut out);
        assert_eq!(w.stop, StopReason::DepthLimit);
        let w = s.walk(0, 8, 8, &mut out);
        assert_eq!(w.stop, StopReason::Misaligned);
        let w = s.walk(0, 0x10, 8, &mut out);
        assert_eq!(w.stop, StopReason::Unreadable);
    }
}
