//! Walks that go on where a plain frame-pointer walk stops: across a kernel entry (Linux's
//! encoded `pt_regs` frame pointers) and onto another stack (an IRQ stack, or from a kernel
//! stack into the user stack that a system-call stub left in the frame pointer).
//!
//! Linux's x86 entry code, with `CONFIG_FRAME_POINTER`, stores an *encoded* pointer to the
//! saved registers in the frame pointer before it calls C code (arch/x86/include/asm/frame.h,
//! `ENCODE_FRAME_POINTER`): on x86_64 the pointer with its low bit set, on i386 with its top
//! bit cleared. The walk decodes it, checks the saved `cs`, and goes on at the interrupted
//! `ip` and `bp`, kernel or user, after a [`frame_marker::KERNEL_ENTRY`] marker.
//!
//! Linux's layouts (that encoding, i386's SYSENTER registers and vDSO frame, i386's interrupt
//! stacks) are Linux's alone: they are taken when the kernel is known to be Linux (its
//! symbols say so, [`KernelOs::Linux`]), never when it is known to be another
//! ([`KernelOs::Other`]), and, when nothing says which ([`KernelOs::Unknown`]: no kernel file
//! given), only where what they read is Linux's beyond chance: Linux's own selector values,
//! flags as the CPU pushes them, an `ip` in the half its mode runs in ([`Crossings::maybe_linux`]).
//! An odd frame pointer is no evidence: a FreePascal kernel starts its threads' stacks at
//! `top - 1`, and every frame pointer of its chains is odd.
//!
//! Kernels that are not Linux get the same from the hardware's interrupt frame: an entry stub
//! that starts with `push bp; mov bp, sp` right after the CPU pushed `ip, cs, flags, sp, ss`
//! makes a frame record whose "return address" is the interrupted `ip`, with the rest of the
//! interrupt frame just above it. When such a record leads down to another stack (or ends
//! the chain) and a ring-3 interrupt frame follows it, or when the kernel's own code selector
//! and flags with interrupts enabled follow it (an interrupt of kernel code, on the same
//! stack), the walk marks a kernel entry there.
//!
//! A frame record is followed on its own evidence: readable, above the last within its stack
//! (and within the stack's span), with a nonzero return address; its alignment is no part of
//! that on x86, which requires none (the FreePascal chains above are at 8n+7).
//!
//! Elsewhere a frame pointer must move strictly upwards, which guards against loops; a jump
//! downwards is taken as a switch to another stack at most `stack_switches` times, after a
//! [`frame_marker::STACK_SWITCH`] marker, and each stack gets its own upward guard. The
//! reader (with symbols) decides whether what follows a switch is code.
//!
//! A user program's stack is walked up to its first frame and no further: once the walk is in
//! user context (a user-mode sample, or past an entry from ring 3), it takes no stack switch,
//! no kernel entry and no jump off its span, and a fake return address (all ones: the one a
//! classic exec, V6 Unix's or xv6's, pushes at the top of a new program's stack, below a
//! frame pointer left as the trap frame had it) ends it. Classic kernels start programs
//! that way, so the first frame's saved frame pointer is garbage: often a kernel stack
//! address, which the walk would otherwise take for a stack switch back into the kernel.
//!
//! A jump upwards beyond the stack's span is one more switch only where the stack says so:
//! i386 Linux runs hard and soft interrupts on 8 KiB stacks of their own
//! (arch/x86/kernel/irq_32.c) and saves the interrupted stack pointer in the lowest word of
//! the interrupt stack; a frame pointer just above that saved pointer is the interrupted
//! stack's, wherever it lies (not on a kernel known to be another than Linux).

use kern_profile_format::{frame_marker, StopReason};

use crate::{PtrWidth, Walk};

/// What the walk knows of the kernel's OS, for the layouts that are one OS's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelOs {
    /// Nothing says (no kernel file): Linux's layouts only where their contents prove them.
    #[default]
    Unknown,
    /// Linux: its symbols say so (`linux_banner`, its x86 entries, or kallsyms tables).
    Linux,
    /// Another kernel: its symbols name none of Linux's.
    Other,
}

/// What a walk may cross besides plain frame records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Crossings {
    /// The kernel is Linux ([`KernelOs::Linux`]): decode its encoded `pt_regs` frame pointers,
    /// take i386's SYSENTER registers and vDSO frame, and leave i386's interrupt stacks by the
    /// stack pointer their lowest word saved.
    pub linux_pt_regs: bool,
    /// Nothing says which kernel it is ([`KernelOs::Unknown`]): the same Linux layouts, but
    /// only where the registers they read hold Linux's own selectors (x86_64 `cs` 0x10, 0x33
    /// or 0x23, `ss` 0x2b from user mode, 0 or 0x18 from kernel mode; i386 `cs` 0x60 or
    /// 0x73, `ss` 0x7b from user mode), flags as the CPU pushes them, and an `ip` in the
    /// half of the address space its mode runs in. A chain of odd frame pointers that is not
    /// Linux's (FreePascal's) has no such words where an encoded pointer would lead; Linux's
    /// do, so a Linux guest profiled without `elf=` keeps its crossings. Ignored with
    /// `linux_pt_regs`.
    pub maybe_linux: bool,
    /// Recognise the hardware interrupt frame above an entry stub's frame record (x86); on
    /// riscv64 and aarch64, take a record whose saved frame pointer leads down off the stack
    /// as a trap entry's record of the interrupted context (the crate's `records` module).
    pub interrupt_frames: bool,
    /// The sample is of user mode: below it lies no kernel entry (riscv64 and aarch64 then
    /// cross nothing; x86 walks the user stack alone, as it does past an entry from ring 3).
    pub user_mode: bool,
    /// The kernel's code selector (the sampled `cs` when in ring 0; 0 when unknown): an
    /// interrupt of kernel code is recognised by it, on the same stack.
    pub kernel_cs: u16,
    /// Downward jumps to another stack allowed per walk.
    pub stack_switches: u8,
    /// How far above where a stack's walk began (the stack pointer, or the first frame after
    /// a switch) a frame record may lie; 0: no limit. Nothing beyond it is read: a frame
    /// pointer that left its stack may point at device memory, whose reads have effects.
    pub stack_span: u64,
}

impl Crossings {
    /// Everything, Linux's layouts as on Linux: what the plugin uses on x86 guests, with
    /// [`Crossings::for_kernel`].
    pub const ALL: Crossings = Crossings {
        linux_pt_regs: true,
        maybe_linux: false,
        interrupt_frames: true,
        user_mode: false,
        kernel_cs: 0,
        stack_switches: 2,
        stack_span: STACK_SPAN,
    };

    /// These crossings with Linux's layouts as `os` allows them: all of them on Linux, none
    /// on another kernel, only the proven ones when nothing says.
    pub const fn for_kernel(self, os: KernelOs) -> Crossings {
        Crossings {
            linux_pt_regs: matches!(os, KernelOs::Linux),
            maybe_linux: matches!(os, KernelOs::Unknown),
            ..self
        }
    }

    /// How Linux's layouts are taken: `None` not at all, else whether only with proof.
    fn linux(&self) -> Option<Proof> {
        match (self.linux_pt_regs, self.maybe_linux) {
            (true, _) => Some(Proof::AsFound),
            (false, true) => Some(Proof::LinuxSelectors),
            (false, false) => None,
        }
    }
}

/// How much a Linux layout must show before the walk takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proof {
    /// The kernel is Linux: a code selector and a nonzero ip, as always.
    AsFound,
    /// Nothing says the kernel is Linux: Linux's own selectors, plausible flags, an ip in
    /// its mode's half ([`Crossings::maybe_linux`]).
    LinuxSelectors,
}

/// Linux's selectors (arch/x86/include/asm/segment.h): x86_64 `__KERNEL_CS`, `__KERNEL_DS`,
/// `__USER32_CS`, `__USER_DS`, `__USER_CS`.
const X86_64_KERNEL_CS: u64 = 0x10;
const X86_64_KERNEL_DS: u64 = 0x18;
const X86_64_USER32_CS: u64 = 0x23;
const X86_64_USER_DS: u64 = 0x2b;
const X86_64_USER_CS: u64 = 0x33;
/// i386 `__KERNEL_CS`, `__USER_CS`, `__USER_DS`.
const I386_KERNEL_CS: u64 = 0x60;
const I386_USER_CS: u64 = 0x73;
const I386_USER_DS: u64 = 0x7b;

/// The lowest x86_64 kernel address, and the end of the user half.
const X86_64_KERNEL_HALF: u64 = 0xffff_8000_0000_0000;
const X86_64_USER_END: u64 = 0x0000_8000_0000_0000;

/// The most a frame chain may climb above its stack's start: twice the largest kernel stack
/// of the kernels we know (Linux 16 KiB, the example kernels 64 KiB), with room for deep user
/// stacks.
pub const STACK_SPAN: u64 = 128 << 10;

/// Whether `ret` is the fake return address at the top of a program's stack (all ones at the
/// pointer width): no code lives there, on any architecture.
pub(crate) fn fake_return(ret: u64, width: PtrWidth) -> bool {
    ret == width.max_addr()
}

/// At most this many kernel entries per walk (an exception inside an interrupt inside a
/// system call is three).
const MAX_ENTRIES: u8 = 4;

/// The bit i386 Linux clears to encode a pt_regs pointer.
const I386_TOP: u64 = 0x8000_0000;

/// i386 Linux's interrupt stacks: THREAD_SIZE, and aligned to it (a buddy allocation).
const I386_IRQ_STACK: u64 = 8 << 10;

/// How far below the saved stack pointer the interrupted stack's frame may lie: the soft
/// interrupt stack is entered through a call (`call_on_stack`), whose return address and
/// frame record come after the pointer was saved.
const I386_IRQ_CALL_SLACK: u64 = 256;

/// Where the interrupted stack goes on when `fp`, beyond the span of the stack whose walk
/// began at `seg_start`, is i386 Linux's jump off an interrupt stack: the stack pointer saved
/// in the interrupt stack's lowest word, with `fp` less than a stack's size above it (or a
/// call's frame below it).
fn i386_irq_stack_exit<R>(seg_start: u64, fp: u64, width: PtrWidth, read: &mut R) -> Option<u64>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    if width != PtrWidth::W4 || seg_start <= I386_TOP {
        return None;
    }
    let base = seg_start & !(I386_IRQ_STACK - 1);
    let mut b = [0u8; 4];
    if !read(base, &mut b) {
        return None;
    }
    let prev_sp = u64::from(u32::from_le_bytes(b));
    let fits =
        prev_sp > I386_TOP && fp + I386_IRQ_CALL_SLACK >= prev_sp && fp < prev_sp + I386_IRQ_STACK;
    fits.then_some(prev_sp.min(fp))
}

/// Where Linux's `struct pt_regs` keeps the interrupted context.
struct PtRegs {
    bp: u64,
    ip: u64,
    cs: u64,
    /// The interrupted stack pointer: where the interrupted context's stack begins.
    sp: u64,
}

/// Where each width's `struct pt_regs` keeps the registers the walk reads (byte offsets).
struct PtRegsLayout {
    bp: u64,
    ip: u64,
    cs: u64,
    flags: u64,
    sp: u64,
    ss: u64,
}

impl PtRegsLayout {
    fn of(width: PtrWidth) -> Self {
        match width {
            PtrWidth::W4 => PtRegsLayout {
                bp: 20,
                ip: 48,
                cs: 52,
                flags: 56,
                sp: 60,
                ss: 64,
            },
            PtrWidth::W8 => PtRegsLayout {
                bp: 32,
                ip: 128,
                cs: 136,
                flags: 144,
                sp: 152,
                ss: 160,
            },
        }
    }
}

/// The word `at` bytes into the `pt_regs` at `regs`.
fn regs_word<R>(regs: u64, at: u64, width: PtrWidth, read: &mut R) -> Option<u64>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let mut b = [0u8; 8];
    read(regs.checked_add(at)?, &mut b[..width.bytes()]).then(|| width.word(&b))
}

/// The registers an encoded frame pointer `fp` points to, if it is one and they look right:
/// they lie on the stack being walked (at or above `lowest`) and hold a code selector (and,
/// with `proof` [`Proof::LinuxSelectors`], are Linux's beyond chance: [`linux_selectors`]).
fn decode_pt_regs<R>(
    fp: u64,
    lowest: u64,
    seg_end: u64,
    width: PtrWidth,
    proof: Proof,
    read: &mut R,
) -> Option<PtRegs>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    // The pt_regs address. i386 Linux runs in the upper half (PAGE_OFFSET 0xC0000000, or
    // 0x80000000): a walk of a lower-half stack is not Linux's, and its every frame pointer
    // has the top bit clear.
    let regs = match width {
        PtrWidth::W8 if fp & 1 == 1 => fp & !1,
        PtrWidth::W4 if fp & I386_TOP == 0 && lowest > I386_TOP => fp | I386_TOP,
        _ => return None,
    };
    if regs < lowest || regs >= seg_end {
        return None;
    }
    let at = PtRegsLayout::of(width);
    let mut word = |off: u64| regs_word(regs, off, width, read);
    let cs = word(at.cs)? & 0xffff;
    // x86_64 always saves sp; i386 only on entry from ring 3: an interrupted i386 kernel
    // context's stack goes on right above the saved registers.
    let sp = match width {
        PtrWidth::W8 => word(at.sp)?,
        PtrWidth::W4 if cs & 3 == 3 => word(at.sp)?,
        PtrWidth::W4 => regs + at.sp,
    };
    let r = PtRegs {
        bp: word(at.bp)?,
        ip: word(at.ip)?,
        cs,
        sp,
    };
    // A code selector: not null, ring 0 or 3.
    let plausible = r.cs & !3 != 0 && matches!(r.cs & 3, 0 | 3) && r.ip != 0;
    let proven = match proof {
        Proof::AsFound => true,
        Proof::LinuxSelectors => linux_selectors(regs, &r, width, read),
    };
    (plausible && proven).then_some(r)
}

/// Whether the registers `r` read from the `pt_regs` at `regs` are Linux's beyond chance:
/// `cs` one of Linux's code selectors, the saved flags as the CPU pushes them, `ip` in the
/// half of the address space that mode runs in, and the saved `ss` Linux's for that mode
/// (x86_64 always, i386 from user mode: from kernel mode i386 saves none). What an unknown
/// kernel is held to before its frame pointer is taken for an encoded `pt_regs` pointer
/// ([`Crossings::maybe_linux`]).
fn linux_selectors<R>(regs: u64, r: &PtRegs, width: PtrWidth, read: &mut R) -> bool
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let at = PtRegsLayout::of(width);
    if !regs_word(regs, at.flags, width, read).is_some_and(plausible_flags) {
        return false;
    }
    let mut ss = || regs_word(regs, at.ss, width, read).map(|v| v & 0xffff);
    match (width, r.cs) {
        (PtrWidth::W8, X86_64_KERNEL_CS) => {
            r.ip >= X86_64_KERNEL_HALF && matches!(ss(), Some(0 | X86_64_KERNEL_DS))
        }
        (PtrWidth::W8, X86_64_USER_CS) => r.ip < X86_64_USER_END && ss() == Some(X86_64_USER_DS),
        (PtrWidth::W8, X86_64_USER32_CS) => {
            r.ip <= u64::from(u32::MAX) && ss() == Some(X86_64_USER_DS)
        }
        (PtrWidth::W4, I386_KERNEL_CS) => r.ip > I386_TOP,
        (PtrWidth::W4, I386_USER_CS) => ss() == Some(I386_USER_DS),
        _ => false,
    }
}

/// The user context saved right above the frame record at `fp`, where Linux's entry code
/// saved it without encoding a pointer to it: i386's `entry_SYSENTER_32` pushes `pt_regs`
/// and calls `do_SYSENTER_32(regs = esp)`, whose record (saved frame pointer, return
/// address) lies just below them, its saved frame pointer the user's `ebp` at `sysenter`.
/// The vDSO had set that to its stack pointer, which the kernel copies into `pt_regs->sp`
/// (and then reloads `pt_regs->bp` from the user stack), so the registers are taken when
/// they say so: a user code selector, a nonzero ip, and `bp` or `sp` equal to the record's
/// saved frame pointer (and, with `proof` [`Proof::LinuxSelectors`], [`linux_selectors`]).
fn pt_regs_above_record<R>(
    fp: u64,
    saved_fp: u64,
    width: PtrWidth,
    proof: Proof,
    read: &mut R,
) -> Option<PtRegs>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let regs = fp.checked_add(2 * width.bytes() as u64)?;
    let at = PtRegsLayout::of(width);
    let mut word = |off: u64| regs_word(regs, off, width, read);
    let cs = word(at.cs)?;
    let user_cs = cs <= 0xffff && cs & 3 == 3 && cs & !3 != 0;
    if !user_cs {
        return None;
    }
    let r = PtRegs {
        bp: word(at.bp)?,
        ip: word(at.ip)?,
        cs,
        sp: word(at.sp)?,
    };
    let linked = r.bp == saved_fp || r.sp == saved_fp;
    if !(linked && r.ip != 0 && r.sp != 0) {
        return None;
    }
    match proof {
        Proof::AsFound => Some(r),
        Proof::LinuxSelectors => linux_selectors(regs, &r, width, read).then_some(r),
    }
}

/// i386 Linux's vDSO entry, `__kernel_vsyscall`: `push ecx; push edx; push ebp; mov ebp,
/// esp; sysenter`, so the kernel's record kept the user stack pointer as its saved frame
/// pointer, and the words `[ebp, edx, ecx, return address]` lie there. The first user frame
/// is then the vDSO's caller, 3 words up, and the chain goes on at the saved `ebp`: a plain
/// walk would take `edx` (a system call's argument) for a return address.
fn vsyscall_frame<R>(r: &PtRegs, saved_fp: u64, width: PtrWidth, read: &mut R) -> Option<(u64, u64)>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    if width != PtrWidth::W4 || r.sp != saved_fp {
        return None;
    }
    let mut b = [0u8; 16];
    read(r.sp, &mut b).then(|| (width.word(&b[..4]), width.word(&b[12..])))
}

/// Where a stack's span ends when its walk began at `start` (`span` 0: no bound): nothing
/// is read at or beyond it. Shared by the x86 and the frame-record walks.
pub(crate) fn span_end(span: u64, start: u64) -> u64 {
    match span {
        0 => u64::MAX,
        span => start.saturating_add(span),
    }
}

/// Where a walk stands, as both walkers (x86's here, riscv64's and aarch64's in `records`)
/// keep it.
pub(crate) struct Cursor {
    /// The frame pointer to follow next.
    pub fp: u64,
    /// The lowest acceptable next frame pointer (x86) or record address (`records`): on one
    /// stack, every step moves upwards, which guards against loops.
    pub lowest: u64,
    /// Where the current stack's walk began, which its span counts from.
    pub seg_start: u64,
    /// Walking a user program's stack: it ends at the program's first frame, and nothing
    /// below it is the kernel's (only a real entry leads from user to kernel, and none lies
    /// in a user stack).
    pub in_user: bool,
}

impl Cursor {
    /// A walk from `fp` on the stack above `floor`, the stack pointer.
    pub fn new(floor: u64, fp: u64, in_user: bool) -> Self {
        Cursor {
            fp,
            lowest: floor,
            seg_start: floor,
            in_user,
        }
    }

    /// Goes on in an interrupted context (of user mode: `in_user`): its frames from `fp`, on
    /// its stack from `sp`, with a guard and a span of its own.
    pub fn enter(&mut self, fp: u64, sp: u64, in_user: bool) {
        *self = Cursor::new(sp, fp, in_user);
    }
}

/// The frames a walk stores into the caller's buffer, up to its depth cap.
pub(crate) struct Frames<'a> {
    out: &'a mut [u64],
    cap: usize,
    /// How many are stored.
    pub n: usize,
}

impl<'a> Frames<'a> {
    pub fn new(out: &'a mut [u64], max_depth: usize) -> Self {
        let cap = max_depth.min(out.len());
        Frames { out, cap, n: 0 }
    }

    pub fn full(&self) -> bool {
        self.n >= self.cap
    }

    /// The slots left below the cap, for a walk that goes on in another walker; record
    /// what it stored with [`Frames::advance`].
    pub fn rest(&mut self) -> &mut [u64] {
        &mut self.out[self.n..self.cap]
    }

    /// Counts `k` frames stored through [`Frames::rest`].
    /// Takes back the last frame pushed.
    pub fn pop(&mut self) {
        self.n = self.n.saturating_sub(1);
    }

    pub fn advance(&mut self, k: usize) {
        self.n = (self.n + k).min(self.cap);
    }

    /// A kernel entry: its [`frame_marker::KERNEL_ENTRY`] marker, then `pc`, where the
    /// interrupted context was (not a return address); false when they do not fit.
    pub fn push_entry(&mut self, pc: u64) -> bool {
        self.push(frame_marker::KERNEL_ENTRY) && self.push(pc)
    }

    /// Stores `v`; false when the cap is reached.
    pub fn push(&mut self, v: u64) -> bool {
        if self.full() {
            return false;
        }
        self.out[self.n] = v;
        self.n += 1;
        true
    }
}

/// The `n` (at most 4) words right above the frame record at `fp`: where the CPU's interrupt
/// frame lies when an entry stub made that record.
fn words_above_record<R>(fp: u64, width: PtrWidth, n: usize, read: &mut R) -> Option<[u64; 4]>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let w = width.bytes();
    let at = fp.checked_add(2 * w as u64)?;
    let last = at.checked_add((n * w) as u64 - 1)?;
    let mut b = [0u8; 32];
    if last > width.max_addr() || !read(at, &mut b[..n * w]) {
        return None;
    }
    let mut out = [0u64; 4];
    for (i, v) in out.iter_mut().take(n).enumerate() {
        *v = width.word(&b[i * w..]);
    }
    Some(out)
}

/// Flags as the CPU pushes them: bit 1 set; 3, 5, 15 and 22 up clear.
fn plausible_flags(flags: u64) -> bool {
    flags & 0x2 != 0 && flags & !0x003f_7fd7 == 0
}

/// The interrupted user stack pointer, if the record at `fp` is an entry stub's made just
/// below a hardware interrupt frame pushed on entry from ring 3: `[fp, ip, cs, flags, sp,
/// ss]`, with user selectors in `cs` and `ss` and plausible flags.
fn user_interrupt_frame<R>(fp: u64, width: PtrWidth, read: &mut R) -> Option<u64>
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let [cs, flags, sp, ss] = words_above_record(fp, width, 4, read)?;
    let user_selector = |s: u64| s <= 0xffff && s & 3 == 3 && s & !3 != 0;
    (user_selector(cs) && user_selector(ss) && plausible_flags(flags) && sp != 0).then_some(sp)
}

/// Whether the record at `fp` is an entry stub's right below the frame the CPU pushed when
/// it interrupted kernel code running with interrupts on: `[fp, ip, cs, flags]` (and, on
/// x86_64, `sp` at or above the record and `ss`), `cs` the kernel's own selector, plausible
/// flags with IF set.
fn kernel_interrupt_frame<R>(fp: u64, width: PtrWidth, kernel_cs: u16, read: &mut R) -> bool
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let words = if width == PtrWidth::W8 { 4 } else { 2 };
    let Some([cs, flags, sp, ss]) = words_above_record(fp, width, words, read) else {
        return false;
    };
    let stack_ok = width == PtrWidth::W4 || (sp > fp && ss <= 0xffff);
    cs == kernel_cs as u64 && plausible_flags(flags) && flags & 0x200 != 0 && stack_ok
}

/// Like [`crate::walk_above`], crossing kernel entries and stack switches as `crossings`
/// allows. Markers ([`frame_marker`]) take a frame slot each; after
/// [`frame_marker::KERNEL_ENTRY`] comes the interrupted instruction's own address (not a
/// return address), then the interrupted context's return addresses. A fake return address
/// (all ones) ends the walk as a null one does ([`StopReason::NullReturnAddress`]).
pub fn walk_across<R>(
    floor: u64,
    fp: u64,
    width: PtrWidth,
    max_depth: usize,
    crossings: Crossings,
    mut read: R,
    out: &mut [u64],
) -> Walk
where
    R: FnMut(u64, &mut [u8]) -> bool,
{
    let w = width.bytes();
    let mut frames = Frames::new(out, max_depth);
    // No record is read at or beyond the span's end, `seg_end(cur.seg_start)`.
    let mut cur = Cursor::new(floor, fp, crossings.user_mode);
    let seg_end = |start: u64| span_end(crossings.stack_span, start);
    let mut switches = 0u8;
    let mut entries = 0u8;
    // Linux's layouts, as the kernel allows them.
    let linux = crossings.linux();
    let stop = loop {
        if cur.fp == 0 {
            break StopReason::NullFramePointer;
        }
        // Even the first: a sample in entry code, after the encoding, before the call.
        if let Some(proof) = linux.filter(|_| entries < MAX_ENTRIES && !cur.in_user) {
            let end = seg_end(cur.seg_start);
            if let Some(r) = decode_pt_regs(cur.fp, cur.lowest, end, width, proof, &mut read) {
                entries += 1;
                if !frames.push_entry(r.ip) {
                    break StopReason::DepthLimit;
                }
                // The interrupted context's stack, from its stack pointer.
                cur.enter(r.bp, r.sp, r.cs & 3 == 3);
                continue;
            }
        }
        // No alignment asked: x86 requires none (a FreePascal chain is at 8n+7).
        if cur.fp < cur.lowest {
            if frames.n == 0 || switches >= crossings.stack_switches || cur.in_user {
                break StopReason::NotIncreasing;
            }
            switches += 1;
            // The other stack's guard (set below) and span start at this frame.
            if !frames.push(frame_marker::STACK_SWITCH) {
                break StopReason::DepthLimit;
            }
            cur.seg_start = cur.fp;
        } else if cur.fp >= seg_end(cur.seg_start)
            && switches < crossings.stack_switches
            && frames.n > 0
            && !cur.in_user
            && linux.is_some()
        {
            // Up off i386 Linux's interrupt stack, to the interrupted stack it names: no
            // more proof asked of an unknown kernel, as the jump alone would stop the walk and
            // the saved pointer must name the frame's stack.
            if let Some(prev_sp) = i386_irq_stack_exit(cur.seg_start, cur.fp, width, &mut read) {
                switches += 1;
                if !frames.push(frame_marker::STACK_SWITCH) {
                    break StopReason::DepthLimit;
                }
                cur.seg_start = prev_sp;
            }
        }
        if frames.full() {
            break StopReason::DepthLimit;
        }
        if !width.record_fits(cur.fp) {
            break StopReason::Unreadable;
        }
        let end = seg_end(cur.seg_start);
        if cur.fp >= end || end - cur.fp < 2 * w as u64 {
            break StopReason::OffStack;
        }
        let Some((saved_fp, ret)) = width.read_record(cur.fp, &mut read) else {
            break StopReason::Unreadable;
        };
        if ret == 0 || fake_return(ret, width) {
            break StopReason::NullReturnAddress;
        }
        // From user space: only where the chain leaves this stack (a switch or its end).
        let user_sp = (crossings.interrupt_frames
            && entries < MAX_ENTRIES
            && saved_fp <= cur.fp
            && !cur.in_user)
            .then(|| user_interrupt_frame(cur.fp, width, &mut read))
            .flatten();
        let from_user = user_sp.is_some();
        // From kernel code: on the same stack, so the chain goes on up.
        let from_kernel = !from_user
            && !cur.in_user
            && crossings.interrupt_frames
            && crossings.kernel_cs != 0
            && entries < MAX_ENTRIES
            && saved_fp > cur.fp
            && kernel_interrupt_frame(cur.fp, width, crossings.kernel_cs, &mut read);
        // i386 Linux's SYSENTER path: the user's registers right above this record.
        let sysenter = linux
            .filter(|_| {
                !cur.in_user && entries < MAX_ENTRIES && saved_fp != 0 && saved_fp < cur.lowest
            })
            .and_then(|proof| pt_regs_above_record(cur.fp, saved_fp, width, proof, &mut read));
        if let Some(r) = sysenter {
            entries += 1;
            if !frames.push(ret) || !frames.push_entry(r.ip) {
                break StopReason::DepthLimit;
            }
            cur.enter(r.bp, r.sp, true);
            match vsyscall_frame(&r, saved_fp, width, &mut read) {
                Some((saved, caller)) if caller != 0 => {
                    if !frames.push(caller) {
                        break StopReason::DepthLimit;
                    }
                    cur.lowest = r.sp.saturating_add(16);
                    cur.fp = saved;
                }
                _ => {}
            }
            continue;
        }
        if from_user || from_kernel {
            entries += 1;
            // The interrupted ip as is; user space gets a guard of its own.
            if !frames.push_entry(ret) {
                break StopReason::DepthLimit;
            }
            match user_sp {
                // The user stack, from the interrupted stack pointer.
                Some(sp) => cur.enter(saved_fp, sp, true),
                None => cur.lowest = cur.fp + 1,
            }
        } else {
            frames.push(ret);
            cur.lowest = cur.fp + 1;
        }
        cur.fp = saved_fp;
    };
    // Past an entry from ring 3: the kernel's part of the stack is whole.
    Walk::by_frame_pointers(frames.n, stop, cur.in_user && !crossings.user_mode)
}

#[cfg(test)]
mod tests;
