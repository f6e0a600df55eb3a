use super::*;
use std::collections::BTreeMap;

/// Sparse fake guest memory: words at addresses, everything else unreadable.
struct Mem {
    width: PtrWidth,
    words: BTreeMap<u64, u64>,
}

impl Mem {
    fn new(width: PtrWidth) -> Self {
        Mem {
            width,
            words: BTreeMap::new(),
        }
    }

    fn put(&mut self, addr: u64, v: u64) {
        self.words.insert(addr, v);
    }

    fn frame(&mut self, fp: u64, saved_fp: u64, ret: u64) {
        self.put(fp, saved_fp);
        self.put(fp + self.width.bytes() as u64, ret);
    }

    /// Reads whole words only.
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        let w = self.width.bytes();
        for (i, chunk) in buf.chunks_mut(w).enumerate() {
            match self.words.get(&(addr + (i * w) as u64)) {
                Some(v) if chunk.len() == w => chunk.copy_from_slice(&v.to_le_bytes()[..w]),
                _ => return false,
            }
        }
        true
    }

    fn walk(&self, floor: u64, fp: u64, crossings: Crossings) -> (Vec<u64>, StopReason) {
        let mut out = vec![0; 32];
        let r = walk_across(
            floor,
            fp,
            self.width,
            32,
            crossings,
            |a, b| self.read(a, b),
            &mut out,
        );
        out.truncate(r.frames);
        (out, r.stop)
    }
}

const KE: u64 = frame_marker::KERNEL_ENTRY;
const SW: u64 = frame_marker::STACK_SWITCH;

/// x86_64 Linux: a syscall handler's frames, then the encoded pt_regs pointer, then the
/// user program's frames (user stack far below the kernel stack).
#[test]
fn x86_64_linux_syscall_goes_on_into_user_space() {
    let mut m = Mem::new(PtrWidth::W8);
    let kstack = 0xffff_c900_0001_3f00u64;
    let regs = 0xffff_c900_0001_3f58u64;
    let ustack = 0x7ffe_1000u64;
    m.frame(kstack, kstack + 0x20, 0xffff_ffff_8100_0100); // ksys_read <- ...
    m.frame(kstack + 0x20, regs | 1, 0xffff_ffff_8100_0200); // do_syscall_64's frame
    m.put(regs + 32, ustack); // bp
    m.put(regs + 128, 0x40_1234); // ip
    m.put(regs + 136, 0x33); // cs: user
    m.put(regs + 152, ustack - 0x18); // sp: the user stack
    m.frame(ustack, ustack + 0x30, 0x40_2000);
    m.frame(ustack + 0x30, 0, 0x40_3000);
    let (frames, stop) = m.walk(kstack - 8, kstack, Crossings::ALL);
    assert_eq!(
        frames,
        [
            0xffff_ffff_8100_0100,
            0xffff_ffff_8100_0200,
            KE,
            0x40_1234,
            0x40_2000,
            0x40_3000
        ]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
    // Without crossings the encoded pointer is an odd frame pointer, followed as any other:
    // no record there.
    let (frames, stop) = m.walk(kstack - 8, kstack, Crossings::default());
    assert_eq!(frames.len(), 2);
    assert_eq!(stop, StopReason::Unreadable);
}

/// i386 Linux: the encoded pointer has its top bit cleared; an interrupt of kernel code
/// goes on in the interrupted kernel function's frames.
#[test]
fn i386_linux_interrupt_of_kernel_code() {
    let mut m = Mem::new(PtrWidth::W4);
    let regs = 0xc1a0_1f00u64;
    m.frame(0xc1a0_1e00, 0xc1a0_1e40, 0xc100_1000); // handler
    m.frame(0xc1a0_1e40, regs & 0x7fff_ffff, 0xc100_2000); // common_interrupt
    m.put(regs + 20, 0xc1a0_1f80); // bp of the interrupted function
    m.put(regs + 48, 0xc100_3333); // ip
    m.put(regs + 52, 0x60); // cs: kernel
    m.frame(0xc1a0_1f80, 0, 0xc100_4000);
    let (frames, stop) = m.walk(0xc1a0_1df0, 0xc1a0_1e00, Crossings::ALL);
    assert_eq!(
        frames,
        [0xc100_1000, 0xc100_2000, KE, 0xc100_3333, 0xc100_4000]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
}

/// A lower-half i386 kernel (the example kernels, at 1 MiB) never looks for pt_regs: every
/// one of its frame pointers has the top bit clear.
#[test]
fn i386_lower_half_frames_are_not_decoded() {
    let mut m = Mem::new(PtrWidth::W4);
    m.frame(0x0010_0f00, 0x0010_0f40, 0x0010_1000);
    m.frame(0x0010_0f40, 0, 0x0010_2000);
    // Plausible registers where a decode would look: they must not be read.
    m.put(0x8010_0f40 + 20, 0x0010_0f80);
    m.put(0x8010_0f40 + 48, 0x0010_3333);
    m.put(0x8010_0f40 + 52, 0x08);
    let (frames, stop) = m.walk(0x0010_0ef0, 0x0010_0f00, Crossings::ALL);
    assert_eq!(frames, [0x0010_1000, 0x0010_2000]);
    assert_eq!(stop, StopReason::NullFramePointer);
}

/// A value that decodes to registers below the stack being walked, or to registers without
/// a code selector, is not a pt_regs pointer.
#[test]
fn implausible_pt_regs_are_not_crossed() {
    let mut m = Mem::new(PtrWidth::W8);
    let regs = 0x1000u64; // below the stack
    m.frame(0x8000, regs | 1, 0xaaaa);
    m.put(regs + 32, 0x9000);
    m.put(regs + 128, 0x1234);
    m.put(regs + 136, 0x33);
    let (frames, stop) = m.walk(0x7ff0, 0x8000, Crossings::ALL);
    // Not decoded: the odd pointer is followed down as a stack switch, to nothing readable.
    assert_eq!((frames, stop), (vec![0xaaaa, SW], StopReason::Unreadable));
    let mut m = Mem::new(PtrWidth::W8);
    let regs = 0x9000u64;
    m.frame(0x8000, regs | 1, 0xaaaa);
    m.put(regs + 32, 0xa000);
    m.put(regs + 128, 0x1234);
    m.put(regs + 136, 0x0); // null selector
    let (frames, stop) = m.walk(0x7ff0, 0x8000, Crossings::ALL);
    assert_eq!((frames, stop), (vec![0xaaaa], StopReason::Unreadable));
}

/// A system-call stub that keeps the user's frame pointer: the kernel chain jumps down to
/// the user stack, which gets a guard of its own.
#[test]
fn a_jump_down_to_the_user_stack_is_a_stack_switch() {
    let mut m = Mem::new(PtrWidth::W4);
    m.frame(0x8010_0f00, 0x8010_0f40, 0x8000_1000); // sys_work
    m.frame(0x8010_0f40, 0x0000_7f00, 0x8000_2000); // syscall stub's caller frame
    m.frame(0x0000_7f00, 0x0000_7f40, 0x0000_0500); // user: syscall wrapper
    m.frame(0x0000_7f40, 0, 0x0000_0600); // user: main
    let (frames, stop) = m.walk(0x8010_0ef0, 0x8010_0f00, Crossings::ALL);
    assert_eq!(
        frames,
        [0x8000_1000, 0x8000_2000, SW, 0x500, 0x600],
        "kernel frames, the switch, the user frames"
    );
    assert_eq!(stop, StopReason::NullFramePointer);
    let (frames, stop) = m.walk(0x8010_0ef0, 0x8010_0f00, Crossings::default());
    assert_eq!(frames, [0x8000_1000, 0x8000_2000]);
    assert_eq!(stop, StopReason::NotIncreasing);
}

/// i386 Linux's SYSENTER path (Debian's 686 kernel): `entry_SYSENTER_32` saves `pt_regs`
/// without encoding a pointer to them and calls `do_SYSENTER_32`, whose record keeps the
/// user's `ebp` at `sysenter`: the user stack pointer, as the vDSO's `__kernel_vsyscall` set
/// it over `[ebp, edx, ecx, return]`. The kernel copies it into `pt_regs->sp` and reloads
/// `pt_regs->bp` from it. The user part is the landing pad, then the vDSO's caller, never
/// `edx` (a read's count, which the walk took for a return address before).
#[test]
fn i386_linux_sysenter_crosses_into_the_vdso_caller() {
    let mut m = Mem::new(PtrWidth::W4);
    let kstack = 0xc2a0_1f00u64;
    let rec = kstack + 0x20; // do_SYSENTER_32's record
    let regs = rec + 8;
    let user_sp = 0xbfff_f000u64;
    let user_bp = 0xbfff_f100u64;
    m.frame(kstack, rec, 0xc10d_0100); // ksys_read <- ...
    m.frame(rec, user_sp, 0xc191_a0a8); // the return into entry_SYSENTER_32
    m.put(regs + 20, user_bp); // bp, reloaded from the user stack
    m.put(regs + 48, 0xb7ff_0429); // ip: the vDSO's landing pad
    m.put(regs + 52, 0x73); // cs: user
    m.put(regs + 60, user_sp); // sp
    m.put(user_sp, user_bp); // the pushed ebp
    m.put(user_sp + 4, 0x1_0000); // edx: the read's count
    m.put(user_sp + 8, 3); // ecx
    m.put(user_sp + 12, 0x0805_1234); // the return into the caller of __kernel_vsyscall
    m.frame(user_bp, 0, 0x0804_9000);
    let (frames, stop) = m.walk(kstack - 8, kstack, Crossings::ALL);
    assert_eq!(
        frames,
        [
            0xc10d_0100,
            0xc191_a0a8,
            KE,
            0xb7ff_0429,
            0x0805_1234,
            0x0804_9000
        ]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
    // A stub that kept the user's own frame pointer (bp is the record's, sp elsewhere):
    // the user chain goes on at bp.
    m.frame(rec, user_bp, 0xc191_a0a8);
    m.put(regs + 60, user_sp - 0x40);
    let (frames, _) = m.walk(kstack - 8, kstack, Crossings::ALL);
    assert_eq!(
        frames,
        [0xc10d_0100, 0xc191_a0a8, KE, 0xb7ff_0429, 0x0804_9000]
    );
    // Registers that hold neither are no pt_regs: a stack switch, as before.
    m.put(regs + 20, user_bp + 4);
    let (frames, _) = m.walk(kstack - 8, kstack, Crossings::ALL);
    assert_eq!(frames[..3], [0xc10d_0100, 0xc191_a0a8, SW]);
}

/// A non-Linux kernel's system-call stub that starts with `push ebp; mov ebp, esp` right
/// below the CPU's interrupt frame (the example kernel's `syscall_entry`): the record's
/// "return address" is the interrupted user ip, so the walk marks a kernel entry there and
/// goes on down in the user stack.
#[test]
fn an_entry_stub_below_a_user_interrupt_frame_is_a_kernel_entry() {
    for width in [PtrWidth::W4, PtrWidth::W8] {
        let w = width.bytes() as u64;
        let mut m = Mem::new(width);
        let stub = 0x0060_0f40u64;
        m.frame(0x0060_0f00, stub, 0x0010_1000); // sys_work <- dispatch
        m.frame(stub, 0x0004_7f00, 0x0004_0123); // the stub: user bp, user ip
        m.put(stub + 2 * w, 0x1b); // cs: ring 3
        m.put(stub + 3 * w, 0x202); // flags: IF and the fixed bit
        m.put(stub + 4 * w, 0x0004_7ef0); // user sp
        m.put(stub + 5 * w, 0x23); // ss: ring 3
        m.frame(0x0004_7f00, 0x0004_7f40, 0x0004_0500); // user: round <- run
        m.frame(0x0004_7f40, 0, 0x0004_0600); // user: run <- _start
        let (frames, stop) = m.walk(0x0060_0ef0, 0x0060_0f00, Crossings::ALL);
        assert_eq!(
            frames,
            [0x0010_1000, KE, 0x0004_0123, 0x0004_0500, 0x0004_0600],
            "{width:?}"
        );
        assert_eq!(stop, StopReason::NullFramePointer);
        // A ring-0 selector or flags with a reserved bit set: only a stack switch.
        for (at, bad) in [(2, 0x08), (3, 0x8202), (5, 0x10)] {
            let mut m2 = Mem::new(width);
            m2.words = m.words.clone();
            m2.put(stub + at * w, bad);
            let (frames, _) = m2.walk(0x0060_0ef0, 0x0060_0f00, Crossings::ALL);
            assert_eq!(
                frames[..3],
                [0x0010_1000, 0x0004_0123, SW],
                "{width:?} word {at} = {bad:#x}"
            );
        }
        // Off: the old walk.
        let off = Crossings {
            interrupt_frames: false,
            ..Crossings::ALL
        };
        let (frames, _) = m.walk(0x0060_0ef0, 0x0060_0f00, off);
        assert_eq!(frames[..3], [0x0010_1000, 0x0004_0123, SW]);
    }
}

/// A classic exec (V6 Unix, xv6): the program's first frame record holds the fake return
/// address 0xffffffff and the frame pointer the trap frame held, here the kernel stack's. The
/// walk of a system call ends at that record, in user space: no switch back to the kernel.
#[test]
fn a_classic_program_start_ends_the_user_stack() {
    for width in [PtrWidth::W4, PtrWidth::W8] {
        let w = width.bytes() as u64;
        let fake = width.max_addr();
        let mut m = Mem::new(width);
        let stub = 0x0060_0f40u64;
        m.frame(0x0060_0f00, stub, 0x0010_1000); // sys_work <- dispatch
        m.frame(stub, 0x0004_7f00, 0x0004_0123); // the stub: user bp, user ip
        m.put(stub + 2 * w, 0x1b); // cs: ring 3
        m.put(stub + 3 * w, 0x202); // flags
        m.put(stub + 4 * w, 0x0004_7ef0); // user sp
        m.put(stub + 5 * w, 0x23); // ss: ring 3
        m.frame(0x0004_7f00, 0x0004_7f40, 0x0004_0500); // user: syscall <- main
                                                        // main's record: the kernel's stack pointer as saved frame pointer, the fake return.
        m.frame(0x0004_7f40, 0x0010_0f80, fake);
        // What lies there: the kernel's own frames, which must not be read as the user's.
        m.frame(0x0010_0f80, 0x0010_0fc0, 0x0010_2000);
        m.frame(0x0010_0fc0, 0, 0x0010_3000);
        let (frames, stop) = m.walk(0x0060_0ef0, 0x0060_0f00, Crossings::ALL);
        assert_eq!(
            frames,
            [0x0010_1000, KE, 0x0004_0123, 0x0004_0500],
            "{width:?}"
        );
        assert_eq!(stop, StopReason::NullReturnAddress, "{width:?}");
        // The same program sampled in user mode ends there too.
        let user = Crossings {
            user_mode: true,
            ..Crossings::ALL
        };
        let (frames, stop) = m.walk(0x0004_7ef0, 0x0004_7f00, user);
        assert_eq!(frames, [0x0004_0500], "{width:?}");
        assert_eq!(stop, StopReason::NullReturnAddress);
    }
}

/// Garbage in a user program's first frame record without the fake return address: a frame
/// pointer below the user stack is no stack switch (only an entry leads into the kernel),
/// one beyond its span is not read.
#[test]
fn a_user_stack_takes_no_switch() {
    let mut m = Mem::new(PtrWidth::W4);
    let user = Crossings {
        user_mode: true,
        ..Crossings::ALL
    };
    m.frame(0x0004_7f00, 0x0004_7f40, 0x0004_0500); // user: syscall <- main
    m.frame(0x0004_7f40, 0x0002_0f80, 0x0004_0600); // main <- garbage, below
    m.frame(0x0002_0f80, 0, 0x0010_2000); // the kernel's stack
    let (frames, stop) = m.walk(0x0004_7ef0, 0x0004_7f00, user);
    assert_eq!(frames, [0x0004_0500, 0x0004_0600]);
    assert_eq!(stop, StopReason::NotIncreasing);
    // A kernel walk still switches there (an IRQ stack below the task's).
    let (frames, _) = m.walk(0x0004_7ef0, 0x0004_7f00, Crossings::ALL);
    assert_eq!(frames, [0x0004_0500, 0x0004_0600, SW, 0x0010_2000]);
    // Above the span: not read, whatever lies there.
    m.frame(0x0004_7f40, 0x0104_7f40, 0x0004_0600);
    m.frame(0x0104_7f40, 0, 0x0010_2000);
    let (frames, stop) = m.walk(0x0004_7ef0, 0x0004_7f00, user);
    assert_eq!(frames, [0x0004_0500, 0x0004_0600]);
    assert_eq!(stop, StopReason::OffStack);
}

/// A non-Linux kernel's interrupt stub (`push ebp; mov ebp, esp` right below the frame the
/// CPU pushed when it interrupted kernel code): with the kernel's code selector known, the
/// walk marks a kernel entry and goes on up through the interrupted function's frames.
#[test]
fn an_interrupt_of_kernel_code_is_a_kernel_entry() {
    for width in [PtrWidth::W4, PtrWidth::W8] {
        let w = width.bytes() as u64;
        let mut m = Mem::new(width);
        let stub = 0x0020_0f40u64;
        m.frame(0x0020_0f00, stub, 0x0010_1000); // timer_tick <- the stub
        m.frame(stub, 0x0020_0fc0, 0x0010_2345); // the stub: interrupted bp and ip
        m.put(stub + 2 * w, 0x08); // cs: the kernel's
        m.put(stub + 3 * w, 0x202); // flags: IF and the fixed bit
        m.put(stub + 4 * w, 0x0020_0fb0); // x86_64: sp above the record
        m.put(stub + 5 * w, 0x10); // x86_64: ss
        m.frame(0x0020_0fc0, 0, 0x0010_3000); // the interrupted function's caller
        let kernel = Crossings {
            kernel_cs: 0x08,
            ..Crossings::ALL
        };
        let (frames, stop) = m.walk(0x0020_0ef0, 0x0020_0f00, kernel);
        assert_eq!(
            frames,
            [0x0010_1000, KE, 0x0010_2345, 0x0010_3000],
            "{width:?}"
        );
        assert_eq!(stop, StopReason::NullFramePointer);
        // Unknown selector, another selector, or interrupts off: plain frames.
        let plain = [0x0010_1000, 0x0010_2345, 0x0010_3000];
        let (frames, _) = m.walk(0x0020_0ef0, 0x0020_0f00, Crossings::ALL);
        assert_eq!(frames, plain, "{width:?}");
        let other = Crossings {
            kernel_cs: 0x60,
            ..Crossings::ALL
        };
        let (frames, _) = m.walk(0x0020_0ef0, 0x0020_0f00, other);
        assert_eq!(frames, plain, "{width:?}");
        m.put(stub + 3 * w, 0x2);
        let (frames, _) = m.walk(0x0020_0ef0, 0x0020_0f00, kernel);
        assert_eq!(frames, plain, "{width:?}");
    }
}

/// An interrupt frame is only looked for where the chain leaves its stack: frame records
/// going up are plain calls whatever lies above them.
#[test]
fn interrupt_frames_are_not_looked_for_on_the_way_up() {
    let mut m = Mem::new(PtrWidth::W4);
    m.frame(0x1000, 0x1100, 0xa);
    m.put(0x1008, 0x1b);
    m.put(0x100c, 0x202);
    m.put(0x1010, 0x2000);
    m.put(0x1014, 0x23);
    m.frame(0x1100, 0, 0xb);
    let (frames, stop) = m.walk(0x0ff0, 0x1000, Crossings::ALL);
    assert_eq!(
        (frames, stop),
        (vec![0xa, 0xb], StopReason::NullFramePointer)
    );
}

/// Nothing beyond a stack's span is read: a chain climbing far above where its stack began,
/// or an interrupted context whose frame pointer lies far from its stack pointer (data in
/// the register of code built without frame pointers), stops before reading there.
#[test]
fn frames_beyond_the_stack_span_are_not_read() {
    let mut m = Mem::new(PtrWidth::W8);
    let far = 0x10_0000 + STACK_SPAN;
    m.frame(0x10_0000, 0x10_0100, 0xa);
    m.frame(0x10_0100, far, 0xb);
    m.frame(far, 0, 0xc); // readable, but off the stack
    let (frames, stop) = m.walk(0x10_0000, 0x10_0000, Crossings::ALL);
    assert_eq!((frames, stop), (vec![0xa, 0xb], StopReason::OffStack));
    let unbounded = Crossings {
        stack_span: 0,
        ..Crossings::ALL
    };
    let (frames, _) = m.walk(0x10_0000, 0x10_0000, unbounded);
    assert_eq!(frames, [0xa, 0xb, 0xc]);
    // x86_64 Linux: the user bp is garbage far above the user sp.
    let mut m = Mem::new(PtrWidth::W8);
    let regs = 0xffff_c900_0001_3f58u64;
    m.frame(0xffff_c900_0001_3f00, regs | 1, 0xffff_ffff_8100_0100);
    m.put(regs + 32, 0xfbad_2488_0000); // bp: not a frame pointer
    m.put(regs + 128, 0x40_1234);
    m.put(regs + 136, 0x33);
    m.put(regs + 152, 0x7ffe_1000);
    m.frame(0xfbad_2488_0000, 0, 0x40_2000);
    let (frames, stop) = m.walk(0xffff_c900_0001_3ef0, 0xffff_c900_0001_3f00, Crossings::ALL);
    assert_eq!(frames, [0xffff_ffff_8100_0100, KE, 0x40_1234]);
    assert_eq!(stop, StopReason::OffStack);
}

/// i386 Linux: a handler on an interrupt stack (8 KiB, 8 KiB-aligned, the interrupted stack
/// pointer in its lowest word) whose frame chain jumps up to the task stack, far beyond the
/// span: the jump is a stack switch, and the walk goes on up the task stack through the
/// interrupt's pt_regs into the interrupted function.
#[test]
fn i386_linux_leaves_an_interrupt_stack_upwards() {
    let mut m = Mem::new(PtrWidth::W4);
    let irq_stack = 0xc200_4000u64;
    let task = 0xc340_1e00u64; // 20 MiB above: beyond the 128 KiB span
    let regs = task + 0x100;
    m.put(irq_stack, task - 0x10); // prev_esp, saved by execute_on_irq_stack
    m.frame(irq_stack + 0x1f00, irq_stack + 0x1f40, 0xc100_1000); // io_serial_out
    m.frame(irq_stack + 0x1f40, task, 0xc100_2000); // handle_edge_irq
    m.frame(task, task + 0x40, 0xc100_3000); // __handle_irq, on the task stack
    m.frame(task + 0x40, regs & 0x7fff_ffff, 0xc100_4000); // common_interrupt
    m.put(regs + 20, task + 0x180); // bp of the interrupted function
    m.put(regs + 48, 0xc100_5555); // ip
    m.put(regs + 52, 0x60); // cs: kernel
    m.frame(task + 0x180, 0, 0xc100_6000);
    let (frames, stop) = m.walk(irq_stack + 0x1ef0, irq_stack + 0x1f00, Crossings::ALL);
    assert_eq!(
        frames,
        [
            0xc100_1000,
            0xc100_2000,
            SW,
            0xc100_3000,
            0xc100_4000,
            KE,
            0xc100_5555,
            0xc100_6000
        ]
    );
    assert_eq!(stop, StopReason::NullFramePointer);
}

/// i386 Linux's soft interrupts: `do_softirq_own_stack` saves the stack pointer, then calls
/// `call_on_stack`, whose frame record lies just below the saved pointer.
#[test]
fn i386_linux_leaves_a_soft_interrupt_stack_through_a_call() {
    let mut m = Mem::new(PtrWidth::W4);
    let softirq_stack = 0xc20f_c000u64;
    let saved = 0xc340_1e00u64;
    let call_frame = saved - 8; // call_on_stack: its return address, then its saved ebp
    m.put(softirq_stack, saved);
    m.frame(softirq_stack + 0x1f70, call_frame, 0xc100_1000); // __do_softirq
    m.frame(call_frame, saved + 0x20, 0xc100_2000); // call_on_stack, into do_softirq_own_stack
    m.frame(saved + 0x20, 0, 0xc100_3000);
    let (frames, stop) = m.walk(
        softirq_stack + 0x1f60,
        softirq_stack + 0x1f70,
        Crossings::ALL,
    );
    assert_eq!(frames, [0xc100_1000, SW, 0xc100_2000, 0xc100_3000]);
    assert_eq!(stop, StopReason::NullFramePointer);
}

/// An upward jump beyond the span stays a stop where the stack's lowest word does not name
/// the frame's stack (not an interrupt stack, or garbage), and a lower-half stack (not Linux)
/// reads nothing there.
#[test]
fn an_upward_jump_without_a_saved_stack_pointer_stays_off_the_stack() {
    let irq_stack = 0xc200_4000u64;
    let far = 0xc340_1e00u64;
    for saved in [None, Some(0u64), Some(far + 0x200), Some(far - 0x4000)] {
        let mut m = Mem::new(PtrWidth::W4);
        if let Some(v) = saved {
            m.put(irq_stack, v);
        }
        m.frame(irq_stack + 0x1f00, far, 0xc100_1000);
        m.frame(far, 0, 0xc100_2000);
        let (frames, stop) = m.walk(irq_stack + 0x1ef0, irq_stack + 0x1f00, Crossings::ALL);
        assert_eq!(
            (frames, stop),
            (vec![0xc100_1000], StopReason::OffStack),
            "{saved:?}"
        );
    }
    let mut m = Mem::new(PtrWidth::W4);
    m.put(0x0020_4000, 0x0340_1df0);
    m.frame(0x0020_5f00, 0x0340_1e00, 0x0010_1000);
    m.frame(0x0340_1e00, 0, 0x0010_2000);
    let (frames, stop) = m.walk(0x0020_5ef0, 0x0020_5f00, Crossings::ALL);
    assert_eq!((frames, stop), (vec![0x0010_1000], StopReason::OffStack));
}

/// A cycle costs at most one pass per allowed switch, then stops as before.
#[test]
fn a_cycle_ends_after_the_allowed_switches() {
    let mut m = Mem::new(PtrWidth::W8);
    m.frame(0x1000, 0x1100, 0xa);
    m.frame(0x1100, 0x1000, 0xb);
    let (frames, stop) = m.walk(0x0ff0, 0x1000, Crossings::ALL);
    assert_eq!(frames, [0xa, 0xb, SW, 0xa, 0xb, SW, 0xa, 0xb]);
    assert_eq!(stop, StopReason::NotIncreasing);
}

/// The sampled function's own frame pointer below the stack pointer is garbage, not a switch.
#[test]
fn the_first_frame_pointer_never_switches() {
    let mut m = Mem::new(PtrWidth::W8);
    m.frame(0x1000, 0, 0xa);
    let (frames, stop) = m.walk(0x2000, 0x1000, Crossings::ALL);
    assert_eq!((frames, stop), (vec![], StopReason::NotIncreasing));
}

/// Markers count against the depth; the walk never writes past it.
#[test]
fn markers_respect_the_depth_cap() {
    let mut m = Mem::new(PtrWidth::W8);
    m.frame(0x1000, 0x1100, 0xa);
    m.frame(0x1100, 0x1000, 0xb);
    let mut out = vec![0; 3];
    let r = walk_across(
        0,
        0x1000,
        PtrWidth::W8,
        3,
        Crossings::ALL,
        |a, b| m.read(a, b),
        &mut out,
    );
    assert_eq!((r.frames, r.stop), (3, StopReason::DepthLimit));
    assert_eq!(out, [0xa, 0xb, SW]);
}

/// Garbage everywhere: never a panic, always a stop within the depth.
#[test]
fn random_memory_never_panics() {
    for seed in 0..200u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        for width in [PtrWidth::W4, PtrWidth::W8] {
            let mut m = Mem::new(width);
            let w = width.bytes() as u64;
            for _ in 0..64 {
                let addr = rng.u64(0..0x400) * w;
                let v = if rng.bool() {
                    rng.u64(0..0x1000)
                } else {
                    rng.u64(..)
                };
                m.put(addr, v & width.max_addr());
            }
            let (frames, _) = m.walk(0, rng.u64(0..0x1000), Crossings::ALL);
            assert!(frames.len() <= 32);
        }
    }
}

/// Crossings as the plugin makes them for a kernel `os` (x86, ring 0, selector unknown).
fn for_os(os: KernelOs) -> Crossings {
    Crossings::ALL.for_kernel(os)
}

const OSES: [KernelOs; 3] = [KernelOs::Linux, KernelOs::Unknown, KernelOs::Other];

/// A FreePascal unikernel's thread: its stack starts at `top - 1`, so every frame pointer
/// is odd (8n+7 on x86_64, 4n+3 on i386). Four records up to the thread's root, whose saved
/// frame pointer is null; returns the memory, the frame pointers and the return addresses.
fn odd_thread(width: PtrWidth, top: u64) -> (Mem, Vec<u64>, Vec<u64>) {
    let offsets: &[u64] = match width {
        PtrWidth::W8 => &[0x1f9, 0x109, 0x59, 0x11],
        PtrWidth::W4 => &[0x1a1, 0x101, 0x45, 0x0d],
    };
    let fps: Vec<u64> = offsets.iter().map(|o| top - o).collect();
    let rets: Vec<u64> = (0..fps.len() as u64)
        .map(|i| 0x0010_2000 + 0x40 * i)
        .collect();
    let mut m = Mem::new(width);
    for (i, &fp) in fps.iter().enumerate() {
        m.frame(fp, fps.get(i + 1).copied().unwrap_or(0), rets[i]);
    }
    (m, fps, rets)
}

/// The FreePascal chain is walked to its root on every kernel, x86_64 and i386, lower and
/// upper half: no alignment is asked, and no Linux layout is seen in it.
#[test]
fn an_odd_frame_pointer_chain_is_walked_to_its_root() {
    for (width, top) in [
        (PtrWidth::W8, 0x0020_0000u64),
        (PtrWidth::W8, 0xffff_8000_0020_0000),
        (PtrWidth::W4, 0x0020_0000),
        (PtrWidth::W4, 0xc020_0000),
    ] {
        let w = width.bytes() as u64;
        let (m, fps, rets) = odd_thread(width, top);
        assert!(fps.iter().all(|fp| fp % w == w - 1), "{fps:x?}");
        for os in OSES {
            let (frames, stop) = m.walk(fps[0] - 0x20, fps[0], for_os(os));
            assert_eq!(frames, rets, "{width:?} {top:#x} {os:?}");
            assert_eq!(
                stop,
                StopReason::NullFramePointer,
                "{width:?} {top:#x} {os:?}"
            );
        }
        let (frames, stop) = m.walk(fps[0] - 0x20, fps[0], Crossings::default());
        assert_eq!((frames, stop), (rets, StopReason::NullFramePointer));
    }
}

/// Words of a FreePascal thread's stack where an encoded pointer would lead (the odd frame
/// pointer less 1, + Linux's `pt_regs` offsets): a ring-3 selector and a nonzero ip, which on
/// Linux make an entry. A kernel known to be another, or unknown (those words are no Linux
/// selectors, no flags), gets its whole chain and no invented `[kernel entry]`.
#[test]
fn an_odd_chain_yields_no_kernel_entry_unless_the_kernel_is_linux() {
    let top = 0xffff_8000_0020_0000u64;
    let (mut m, fps, rets) = odd_thread(PtrWidth::W8, top);
    // Under the second record: bp, ip, cs (ring 3, not Linux's), flags, sp, ss.
    let regs = fps[1] - 1;
    m.put(regs + 32, fps[2]);
    m.put(regs + 128, 0x40_1000);
    m.put(regs + 136, 0x1b);
    m.put(regs + 144, 0x1234_5678);
    m.put(regs + 152, top - 0x100);
    m.put(regs + 160, 0x23);
    // Under the third: Linux's user selectors, but no flags the CPU pushes.
    let regs = fps[2] - 1;
    m.put(regs + 32, fps[3]);
    m.put(regs + 128, 0x40_2000);
    m.put(regs + 136, 0x33);
    m.put(regs + 144, 0x8000_0000_0000_0000);
    m.put(regs + 152, top - 0x80);
    m.put(regs + 160, 0x2b);
    for os in [KernelOs::Unknown, KernelOs::Other] {
        let (frames, stop) = m.walk(fps[0] - 0x20, fps[0], for_os(os));
        assert!(!frames.contains(&KE), "{os:?}: {frames:x?}");
        assert_eq!((frames, stop), (rets.clone(), StopReason::NullFramePointer));
    }
    // On Linux an odd frame pointer is its encoding, and these words its registers.
    let (frames, _) = m.walk(fps[0] - 0x20, fps[0], for_os(KernelOs::Linux));
    assert_eq!(frames[..3], [rets[0], KE, 0x40_1000]);
}

/// x86_64 Linux's encoded `pt_regs` as its entry code saves them (cs, flags, ss as the CPU
/// pushed them): decoded on Linux and on an unknown kernel, not on another one. Contents
/// short of Linux's (a selector of another GDT, flags with a reserved bit, a user ip in the
/// kernel half) are decoded on Linux only, as before.
#[test]
fn a_real_encoded_pt_regs_is_decoded_unless_the_kernel_is_another() {
    let mut m = Mem::new(PtrWidth::W8);
    let kstack = 0xffff_c900_0001_3f00u64;
    let regs = 0xffff_c900_0001_3f58u64;
    let ustack = 0x7ffe_1000u64;
    m.frame(kstack, kstack + 0x20, 0xffff_ffff_8100_0100); // ksys_read <- ...
    m.frame(kstack + 0x20, regs | 1, 0xffff_ffff_8100_0200); // do_syscall_64's frame
    m.put(regs + 32, ustack); // bp
    m.put(regs + 128, 0x40_1234); // ip
    m.put(regs + 136, 0x33); // cs: __USER_CS
    m.put(regs + 144, 0x246); // flags
    m.put(regs + 152, ustack - 0x18); // sp: the user stack
    m.put(regs + 160, 0x2b); // ss: __USER_DS
    m.frame(ustack, ustack + 0x30, 0x40_2000);
    m.frame(ustack + 0x30, 0, 0x40_3000);
    let kernel = [0xffff_ffff_8100_0100, 0xffff_ffff_8100_0200];
    let crossed = [kernel[0], kernel[1], KE, 0x40_1234, 0x40_2000, 0x40_3000];
    for os in [KernelOs::Linux, KernelOs::Unknown] {
        let (frames, stop) = m.walk(kstack - 8, kstack, for_os(os));
        assert_eq!(frames, crossed, "{os:?}");
        assert_eq!(stop, StopReason::NullFramePointer, "{os:?}");
    }
    // Another kernel: the odd pointer is a frame pointer, with nothing readable there.
    let (frames, stop) = m.walk(kstack - 8, kstack, for_os(KernelOs::Other));
    assert_eq!((frames, stop), (kernel.to_vec(), StopReason::Unreadable));
    for (at, bad) in [
        (136, 0x2b),
        (144, 0x8246),
        (128, 0xffff_ffff_8100_0300),
        (160, 0x18),
    ] {
        let mut m2 = Mem::new(PtrWidth::W8);
        m2.words = m.words.clone();
        m2.put(regs + at, bad);
        let (frames, _) = m2.walk(kstack - 8, kstack, for_os(KernelOs::Linux));
        assert_eq!(frames[2], KE, "Linux, {at} = {bad:#x}");
        let (frames, _) = m2.walk(kstack - 8, kstack, for_os(KernelOs::Unknown));
        assert_eq!(frames, kernel, "unknown, {at} = {bad:#x}");
    }
    // An interrupt of kernel code: __KERNEL_CS, a kernel ip, ss 0 or __KERNEL_DS.
    let mut m = Mem::new(PtrWidth::W8);
    let inner = 0xffff_c900_0001_3fa0u64;
    m.frame(kstack, regs | 1, 0xffff_ffff_8100_0100);
    m.put(regs + 32, inner);
    m.put(regs + 128, 0xffff_ffff_8100_4444);
    m.put(regs + 136, 0x10);
    m.put(regs + 144, 0x282);
    m.put(regs + 152, inner - 0x10);
    m.put(regs + 160, 0x18);
    m.frame(inner, 0, 0xffff_ffff_8100_5000);
    let (frames, _) = m.walk(kstack - 8, kstack, for_os(KernelOs::Unknown));
    assert_eq!(
        frames,
        [
            0xffff_ffff_8100_0100,
            KE,
            0xffff_ffff_8100_4444,
            0xffff_ffff_8100_5000
        ]
    );
}

/// i386 Linux with an unknown kernel (the e2e Linux guests, profiled without `elf=`): an
/// int 0x80 system call's encoded pointer and the SYSENTER layout cross with Linux's
/// selectors and flags in them, the interrupt stack is left by its saved pointer; on a
/// kernel known to be another, none of them.
#[test]
fn i386_linux_layouts_follow_the_kernel_os() {
    // int 0x80: the pointer with its top bit cleared, user registers as the CPU pushed them.
    let mut m = Mem::new(PtrWidth::W4);
    let regs = 0xc1a0_1f00u64;
    let ubp = 0xbfff_f100u64;
    m.frame(0xc1a0_1e00, 0xc1a0_1e40, 0xc100_1000);
    m.frame(0xc1a0_1e40, regs & 0x7fff_ffff, 0xc100_2000);
    m.put(regs + 20, ubp);
    m.put(regs + 48, 0x0804_9999);
    m.put(regs + 52, 0x73);
    m.put(regs + 56, 0x246);
    m.put(regs + 60, ubp - 0x20);
    m.put(regs + 64, 0x7b);
    m.frame(ubp, 0, 0x0804_8888);
    let crossed = [0xc100_1000, 0xc100_2000, KE, 0x0804_9999, 0x0804_8888];
    for os in [KernelOs::Linux, KernelOs::Unknown] {
        let (frames, _) = m.walk(0xc1a0_1df0, 0xc1a0_1e00, for_os(os));
        assert_eq!(frames, crossed, "{os:?}");
    }
    let (frames, _) = m.walk(0xc1a0_1df0, 0xc1a0_1e00, for_os(KernelOs::Other));
    assert!(!frames.contains(&KE), "{frames:x?}");
    // Another user ss: Linux's registers only on Linux.
    m.put(regs + 64, 0x23);
    let (frames, _) = m.walk(0xc1a0_1df0, 0xc1a0_1e00, for_os(KernelOs::Unknown));
    assert!(!frames.contains(&KE), "{frames:x?}");

    // SYSENTER: the registers right above do_SYSENTER_32's record.
    let mut m = Mem::new(PtrWidth::W4);
    let kstack = 0xc2a0_1f00u64;
    let rec = kstack + 0x20;
    let regs = rec + 8;
    let (user_sp, user_bp) = (0xbfff_f000u64, 0xbfff_f100u64);
    m.frame(kstack, rec, 0xc10d_0100);
    m.frame(rec, user_sp, 0xc191_a0a8);
    m.put(regs + 20, user_bp);
    m.put(regs + 48, 0xb7ff_0429);
    m.put(regs + 52, 0x73);
    m.put(regs + 56, 0x246);
    m.put(regs + 60, user_sp);
    m.put(regs + 64, 0x7b);
    m.put(user_sp, user_bp);
    m.put(user_sp + 4, 0x1_0000);
    m.put(user_sp + 8, 3);
    m.put(user_sp + 12, 0x0805_1234);
    m.frame(user_bp, 0, 0x0804_9000);
    let crossed = [
        0xc10d_0100,
        0xc191_a0a8,
        KE,
        0xb7ff_0429,
        0x0805_1234,
        0x0804_9000,
    ];
    for os in [KernelOs::Linux, KernelOs::Unknown] {
        let (frames, _) = m.walk(kstack - 8, kstack, for_os(os));
        assert_eq!(frames, crossed, "{os:?}");
    }
    let (frames, _) = m.walk(kstack - 8, kstack, for_os(KernelOs::Other));
    assert_eq!(frames[..3], [0xc10d_0100, 0xc191_a0a8, SW]);
    // No flags where the CPU's would be: not proven.
    m.words.remove(&(regs + 56));
    let (frames, _) = m.walk(kstack - 8, kstack, for_os(KernelOs::Unknown));
    assert_eq!(frames[..3], [0xc10d_0100, 0xc191_a0a8, SW]);
    let (frames, _) = m.walk(kstack - 8, kstack, for_os(KernelOs::Linux));
    assert_eq!(frames, crossed);

    // The interrupt stack's saved pointer.
    let mut m = Mem::new(PtrWidth::W4);
    let irq_stack = 0xc200_4000u64;
    let task = 0xc340_1e00u64;
    m.put(irq_stack, task - 0x10);
    m.frame(irq_stack + 0x1f00, task, 0xc100_1000);
    m.frame(task, 0, 0xc100_3000);
    for os in [KernelOs::Linux, KernelOs::Unknown] {
        let (frames, _) = m.walk(irq_stack + 0x1ef0, irq_stack + 0x1f00, for_os(os));
        assert_eq!(frames, [0xc100_1000, SW, 0xc100_3000], "{os:?}");
    }
    let (frames, stop) = m.walk(
        irq_stack + 0x1ef0,
        irq_stack + 0x1f00,
        for_os(KernelOs::Other),
    );
    assert_eq!((frames, stop), (vec![0xc100_1000], StopReason::OffStack));
}

/// Odd frame pointers into garbage (words at every alignment): never a panic, always a stop
/// within the depth, whatever the kernel; at most [`MAX_ENTRIES`] entries.
#[test]
fn odd_frame_pointers_into_garbage_stay_bounded() {
    for seed in 0..300u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        for width in [PtrWidth::W4, PtrWidth::W8] {
            let mut m = Mem::new(width);
            let base = if rng.bool() {
                0
            } else {
                width.max_addr() & !0xf_ffff
            };
            for _ in 0..256 {
                let addr = base + rng.u64(0..0x2000);
                let v = match rng.u8(0..4) {
                    0 => base + rng.u64(0..0x2000),
                    1 => rng.u64(0..0x100),
                    _ => rng.u64(..),
                };
                m.put(addr, v & width.max_addr());
            }
            let fp = (base + rng.u64(0..0x1000)) | 1;
            for os in OSES {
                let (frames, _) = m.walk(base + rng.u64(0..0x800), fp, for_os(os));
                assert!(frames.len() <= 32, "{seed} {width:?} {os:?}");
                let entries = frames.iter().filter(|&&f| f == KE).count();
                assert!(entries <= MAX_ENTRIES as usize, "{seed} {width:?} {os:?}");
            }
        }
    }
}
