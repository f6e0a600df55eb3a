use std::collections::HashMap;

use super::*;
use crate::alloc_hooks::dwarf::Param;
use crate::alloc_hooks::matcher::NOTHING;
use crate::alloc_hooks::resolve::resolve;
use crate::alloc_hooks::spec::Spec;
use crate::alloc_hooks::symbols::{Symbol, SymbolIndex};
use kern_profile_format::{frame_marker, Record, SamplingMode, VERSION_3};
use kern_profile_test_support::raw_file::{marked_header, read_back};

/// A fake vCPU: named registers and a stack mapped at `BASE`.
struct Guest {
    regs: HashMap<&'static str, u64>,
    stack: Vec<u8>,
    width: usize,
}

const BASE: u64 = 0x8_0000;

impl Guest {
    fn new(arch: Arch) -> Self {
        Guest {
            regs: HashMap::new(),
            // Room for two tasks' stacks further apart than `STACK_WINDOW`.
            stack: vec![0; 0x8000],
            width: arch.ptr_width() as usize,
        }
    }

    fn put(&mut self, addr: u64, v: u64) {
        let at = (addr - BASE) as usize;
        self.stack[at..at + self.width].copy_from_slice(&v.to_le_bytes()[..self.width]);
    }

    fn set(&mut self, r: &'static str, v: u64) -> &mut Self {
        self.regs.insert(r, v);
        self
    }

    /// SP at a call: the return address at [SP], FP pointing at the caller's frame record
    /// (whose own caller's return address is `outer`, and whose saved FP ends the chain).
    fn call(&mut self, sp: u64, ret: u64, outer: u64) {
        let (sp_name, fp_name) = if self.width == 4 {
            ("esp", "ebp")
        } else {
            ("rsp", "rbp")
        };
        let fp = sp + 0x40;
        self.put(sp, ret);
        self.put(fp, 0);
        self.put(fp + self.width as u64, outer);
        self.set(sp_name, sp).set(fp_name, fp);
    }

    /// The vCPU as it is after `ret` with `result` returned: SP one word up.
    fn returned(&mut self, sp_at_entry: u64, result: u64) {
        let (sp, ret) = if self.width == 4 {
            ("esp", "eax")
        } else {
            ("rsp", "rax")
        };
        self.set(sp, sp_at_entry + self.width as u64)
            .set(ret, result);
    }

    fn mem(stack: &[u8]) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        move |addr, out| {
            let Some(off) = addr.checked_sub(BASE) else {
                return false;
            };
            match stack.get(off as usize..off as usize + out.len()) {
                Some(b) => {
                    out.copy_from_slice(b);
                    true
                }
                None => false,
            }
        }
    }
}

/// The guest's registers, apart from its memory (the capture borrows both at once).
struct Regs<'a>(&'a HashMap<&'static str, u64>);

impl RegisterReader for Regs<'_> {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        let names: &[&str] = match reg {
            Reg::StackPointer => &["esp", "rsp"],
            Reg::FramePointer => &["ebp", "rbp"],
            Reg::Privilege => &["cs"],
            _ => &[],
        };
        names.iter().find_map(|n| self.0.get(n).copied())
    }
}

impl RegisterFile for Regs<'_> {
    fn register(&mut self, name: &'static str) -> Option<u64> {
        self.0.get(name).copied()
    }
}

const KMALLOC: u64 = 0xc010_2650;
const KREALLOC: u64 = 0xc010_2810;
const KFREE: u64 = 0xc010_2aa0;
const PAGES: u64 = 0xc010_2cb0;
const ALLOC_BULK: u64 = 0xc010_2d00;
const FREE_BULK: u64 = 0xc010_2e00;

/// The example kernel's allocators as rustc lays out their arguments (DWARF: ecx, edx), and
/// a page allocator whose count is on the stack (cdecl).
fn hooks(arch: Arch) -> HookSet {
    let (a, b) = if arch == Arch::I386 {
        ("ecx", "edx")
    } else {
        ("rdi", "rsi")
    };
    let index = SymbolIndex::new(
        [
            ("kernel::kalloc::kmalloc", KMALLOC),
            ("kernel::kalloc::krealloc", KREALLOC),
            ("kernel::kalloc::kfree", KFREE),
            ("pages_alloc", PAGES),
            ("cache_alloc_bulk", ALLOC_BULK),
            ("cache_free_bulk", FREE_BULK),
        ]
        .into_iter()
        .map(|(n, addr)| Symbol {
            name: n.into(),
            addr,
        })
        .collect(),
    );
    let params = move |addr: u64| {
        let p = |n: &str, r: &'static str| Param {
            name: n.into(),
            location: Ok(Location::Register(r)),
        };
        match addr {
            KMALLOC => Some(vec![p("size", a)]),
            KREALLOC => Some(vec![p("ptr", a), p("size", b)]),
            KFREE => Some(vec![p("ptr", a)]),
            _ => None,
        }
    };
    let spec = Spec::parse(
        "t",
        "kmalloc alloc kmalloc size=size\n\
         kmalloc realloc krealloc ptr=ptr size=size\n\
         kmalloc free kfree ptr=ptr\n\
         pages alloc pages_alloc count=arg0 size=arg1\n\
         kmalloc alloc cache_alloc_bulk count=arg1 array=arg2\n\
         kmalloc free cache_free_bulk count=arg0 array=arg1\n",
    )
    .unwrap();
    resolve(&spec, &index, &params, arch, "elf=t").unwrap()
}

#[derive(Debug, PartialEq, Eq)]
struct Ev {
    op: Op,
    flags: u8,
    function: u16,
    size: u64,
    ptr: u64,
    new_ptr: u64,
    frames: Vec<u64>,
    time_ns: u64,
}

fn decode(arch: Arch, bytes: &[u8]) -> Vec<Ev> {
    let h = marked_header(arch, SamplingMode::Off, 1);
    let mut r = read_back(VERSION_3, &h, bytes);
    let mut v = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        let Record::AllocEvent(e) = rec else {
            panic!("not an event: {rec:?}")
        };
        v.push(Ev {
            op: e.op,
            flags: e.flags,
            function: e.function,
            size: e.size,
            ptr: e.ptr,
            new_ptr: e.new_ptr,
            frames: e.frames().collect(),
            time_ns: e.time_ns,
        });
    }
    assert!(r.truncation().is_none());
    v
}

fn at(t: u64) -> Moment {
    Moment {
        vcpu: 0,
        time_ns: t,
        icount: 0,
    }
}

/// Runs one vCPU's hooks over the guest: entry at `hook`'s address, or the return address.
struct Run {
    arch: Arch,
    set: HookSet,
    guest: Guest,
    hooks: VcpuHooks,
    out: Vec<u8>,
}

impl Run {
    fn new(arch: Arch) -> Self {
        Run {
            arch,
            set: hooks(arch),
            guest: Guest::new(arch),
            hooks: VcpuHooks::new(arch, 64),
            out: Vec::new(),
        }
    }

    fn enter(&mut self, entry: u64, t: u64) -> u64 {
        let hook = self.set.at(entry).unwrap().clone();
        let Guest { regs, stack, .. } = &self.guest;
        self.hooks.enter(
            &self.set,
            &hook,
            at(t),
            &mut Regs(regs),
            Guest::mem(stack),
            &mut self.out,
        )
    }

    /// The vCPU enters a block at `pc`: as in the plugin, the hooks see it only when `pc` is
    /// in one of the watch slots (QEMU's `COND_EQ` against each slot).
    fn reach(&mut self, pc: u64, t: u64) -> u64 {
        if !self.hooks.watch().contains(&pc) {
            return 0;
        }
        let Guest { regs, stack, .. } = &self.guest;
        self.hooks.reached(
            &self.set,
            pc,
            at(t),
            &mut Regs(regs),
            Guest::mem(stack),
            &mut self.out,
        )
    }

    fn events(&self) -> Vec<Ev> {
        decode(self.arch, &self.out)
    }
}

const SP: u64 = BASE + 0x800;

#[test]
fn an_allocation_is_recorded_when_it_returns_with_its_pointer_and_stack() {
    for arch in [Arch::I386, Arch::X86_64] {
        let mut r = Run::new(arch);
        let a = if arch == Arch::I386 { "ecx" } else { "rdi" };
        r.guest.call(SP, 0xc010_1400, 0xc010_1240);
        r.guest.set(a, 200);
        assert_eq!(r.enter(KMALLOC, 10), 0);
        assert_eq!(r.hooks.watch()[0], 0xc010_1400);
        r.guest.returned(SP, 0x40_1010);
        // Another block with the same address, deeper in the stack: not this return.
        r.guest
            .set(if arch == Arch::I386 { "esp" } else { "rsp" }, SP - 0x100);
        assert_eq!(r.reach(0xc010_1400, 15), 0);
        r.guest.returned(SP, 0x40_1010);
        assert_eq!(r.reach(0xc010_1400, 20), 1);
        assert_eq!(r.hooks.watch(), [NOTHING; WATCH_SLOTS]);
        assert_eq!(
            r.events(),
            [Ev {
                op: Op::Alloc,
                flags: 0,
                function: 0,
                size: 200,
                ptr: 0x40_1010,
                new_ptr: 0,
                frames: vec![0xc010_1400, 0xc010_1240],
                time_ns: 20,
            }],
            "{arch:?}"
        );
    }
}

#[test]
fn a_free_is_recorded_at_entry_and_a_realloc_knows_its_new_pointer() {
    let mut r = Run::new(Arch::I386);
    r.guest.call(SP, 0xc010_1500, 0xc010_1240);
    r.guest.set("ecx", 0x40_2000);
    assert_eq!(r.enter(KFREE, 5), 1);
    r.guest.set("ecx", 0x40_1010).set("edx", 1500);
    assert_eq!(r.enter(KREALLOC, 6), 0);
    r.guest.returned(SP, 0x40_3000);
    assert_eq!(r.reach(0xc010_1500, 7), 1);
    let ev = r.events();
    assert_eq!(
        (ev[0].op, ev[0].ptr, ev[0].size, ev[0].time_ns),
        (Op::Free, 0x40_2000, 0, 5)
    );
    assert_eq!(
        (
            ev[1].op,
            ev[1].ptr,
            ev[1].new_ptr,
            ev[1].size,
            ev[1].function
        ),
        (Op::Realloc, 0x40_1010, 0x40_3000, 1500, 1)
    );
}

#[test]
fn stack_arguments_and_count_times_size() {
    let mut r = Run::new(Arch::I386);
    r.guest.call(SP, 0xc010_1600, 0xc010_1240);
    // cdecl: arg0 at [esp+4], arg1 at [esp+8].
    r.guest.put(SP + 4, 3);
    r.guest.put(SP + 8, 4096);
    r.enter(PAGES, 1);
    r.guest.returned(SP, 0x80_0000);
    r.reach(0xc010_1600, 2);
    assert_eq!(r.events()[0].size, 3 * 4096);
}

/// Linux's `kmem_cache_alloc_bulk(s, flags, count, array)` and
/// `kmem_cache_free_bulk(s, count, array)`, here with the cache argument left out: one event
/// per pointer of the array, the allocation's when it returns, as many as it filled.
#[test]
fn bulk_calls_are_an_event_per_pointer() {
    const ARRAY: u64 = BASE + 0x2000;
    for arch in [Arch::I386, Arch::X86_64] {
        let w = arch.ptr_width() as u64;
        let mut r = Run::new(arch);
        let args = |r: &mut Run, a0: u64, a1: u64, a2: u64| match arch {
            // cdecl: arg0 at [esp+4].
            Arch::I386 => [a0, a1, a2]
                .iter()
                .enumerate()
                .for_each(|(i, &v)| r.guest.put(SP + 4 + 4 * i as u64, v)),
            _ => {
                r.guest.set("rdi", a0).set("rsi", a1).set("rdx", a2);
            }
        };
        // Four asked for, three filled (the fourth slot holds an old pointer).
        r.guest.call(SP, 0xc010_1700, 0xc010_1240);
        args(&mut r, 0xd0, 4, ARRAY);
        for (i, p) in [0x40_1000u64, 0x40_1100, 0x40_1200, 0x40_9999]
            .iter()
            .enumerate()
        {
            r.guest.put(ARRAY + w * i as u64, *p);
        }
        assert_eq!(r.enter(ALLOC_BULK, 1), 0);
        r.guest.returned(SP, 3);
        assert_eq!(r.reach(0xc010_1700, 2), 3);
        // Freed again, one slot of the array null.
        r.guest.call(SP, 0xc010_1800, 0xc010_1240);
        args(&mut r, 3, ARRAY, 0);
        r.guest.put(ARRAY + w, 0);
        assert_eq!(r.enter(FREE_BULK, 3), 2);
        let ev: Vec<(Op, u64, u64, u64)> = r
            .events()
            .iter()
            .map(|e| (e.op, e.ptr, e.time_ns, e.frames[0]))
            .collect();
        assert_eq!(
            ev,
            [
                (Op::Alloc, 0x40_1000, 2, 0xc010_1700),
                (Op::Alloc, 0x40_1100, 2, 0xc010_1700),
                (Op::Alloc, 0x40_1200, 2, 0xc010_1700),
                (Op::Free, 0x40_1000, 3, 0xc010_1800),
                (Op::Free, 0x40_1200, 3, 0xc010_1800),
            ],
            "{arch:?}"
        );
        // A failed bulk allocation (0 filled) and an unreadable array give no event.
        r.guest.call(SP, 0xc010_1900, 0xc010_1240);
        args(&mut r, 0xd0, 4, ARRAY);
        r.enter(ALLOC_BULK, 4);
        r.guest.returned(SP, 0);
        assert_eq!(r.reach(0xc010_1900, 5), 0);
        r.guest.call(SP, 0xc010_1a00, 0xc010_1240);
        args(&mut r, 2, 0x10, 0);
        assert_eq!(r.enter(FREE_BULK, 6), 0);
    }
}

#[test]
fn an_interrupt_handlers_allocation_nests_inside_the_tasks() {
    let mut r = Run::new(Arch::I386);
    r.guest.call(SP, 0xc010_1400, 0xc010_1240);
    r.guest.set("ecx", 64);
    r.enter(KMALLOC, 1);
    // An interrupt inside kmalloc: the handler allocates below on the stack.
    let irq_sp = SP - 0x200;
    r.guest.call(irq_sp, 0xc010_9000, 0xc010_8000);
    r.guest.set("ecx", 32);
    r.enter(KMALLOC, 2);
    assert_eq!(r.hooks.watch()[..2], [0xc010_9000, 0xc010_1400]);
    r.guest.returned(irq_sp, 0x40_0100);
    assert_eq!(r.reach(0xc010_9000, 3), 1);
    assert_eq!(r.hooks.watch()[0], 0xc010_1400);
    r.guest.returned(SP, 0x40_0200);
    assert_eq!(r.reach(0xc010_1400, 4), 1);
    let ev = r.events();
    assert_eq!((ev[0].size, ev[0].ptr), (32, 0x40_0100));
    assert_eq!((ev[1].size, ev[1].ptr), (64, 0x40_0200));
    assert_eq!(ev[0].frames[0], 0xc010_9000);
}

#[test]
fn calls_that_never_return_are_counted_and_flagged() {
    let mut r = Run::new(Arch::I386);
    r.guest.call(SP, 0xc010_1400, 0xc010_1240);
    r.guest.set("ecx", 64);
    r.enter(KMALLOC, 1);
    r.guest.call(SP - 0x100, 0xc010_1700, 0xc010_1240);
    r.guest.set("ecx", 0x40_1010).set("edx", 99);
    r.enter(KREALLOC, 2);
    // The outer call returns: the inner one was left by a longjmp.
    r.guest.returned(SP, 0x40_0200);
    assert_eq!(r.reach(0xc010_1400, 3), 2);
    r.guest.call(SP, 0xc010_1400, 0xc010_1240);
    r.enter(KMALLOC, 4);
    let mut out = Vec::new();
    assert_eq!(r.hooks.finish(&r.set, at(5), &mut out), 1);
    r.out.extend_from_slice(&out);
    let ev = r.events();
    assert_eq!(ev.len(), 3);
    assert_eq!(
        (ev[0].op, ev[0].flags, ev[0].ptr, ev[0].new_ptr),
        (Op::Realloc, alloc_flags::UNRETURNED, 0x40_1010, 0)
    );
    assert_eq!(
        (ev[1].op, ev[1].flags, ev[1].ptr),
        (Op::Alloc, 0, 0x40_0200)
    );
    assert_eq!(
        (ev[2].op, ev[2].flags, ev[2].ptr, ev[2].time_ns),
        (Op::Alloc, alloc_flags::UNRETURNED, 0, 5)
    );
    assert_eq!(
        r.hooks.counts(),
        CallCounts {
            events: 3,
            unreturned: 2,
            nested: 0
        }
    );
}

#[test]
fn a_sleeping_tasks_call_and_a_left_call_do_not_hide_returns_and_a_reset_drops_the_rest() {
    let mut r = Run::new(Arch::I386);
    // Task A allocates and sleeps inside kmalloc.
    let sp_a = BASE + 0x7000;
    r.guest.call(sp_a, 0xc010_1400, 0xc010_1240);
    r.guest.set("ecx", 64);
    r.enter(KMALLOC, 1);
    // Task B, on its own stack far below, allocates; inside, a page allocation is left by a
    // longjmp.
    let sp_b = SP;
    r.guest.call(sp_b, 0xc010_1480, 0xc010_1240);
    r.guest.set("ecx", 32);
    r.enter(KMALLOC, 2);
    r.guest.call(sp_b - 0x100, 0xc010_1700, 0xc010_1480);
    r.enter(PAGES, 3);
    assert_eq!(
        r.hooks.watch()[..3],
        [0xc010_1700, 0xc010_1480, 0xc010_1400]
    );
    // A wakes up and returns, below two pending calls: caught; B's stay pending.
    r.guest.returned(sp_a, 0x40_0100);
    assert_eq!(r.reach(0xc010_1400, 4), 1);
    // B's kmalloc returns: the page allocation inside it never returned.
    r.guest.returned(sp_b, 0x40_0200);
    assert_eq!(r.reach(0xc010_1480, 5), 2);
    // A call pending when the vCPU is reset never returns.
    r.guest.call(sp_b, 0xc010_1480, 0xc010_1240);
    r.enter(KMALLOC, 6);
    let mut out = Vec::new();
    assert_eq!(r.hooks.finish(&r.set, at(7), &mut out), 1);
    r.out.extend_from_slice(&out);
    assert_eq!(r.hooks.watch(), [NOTHING; WATCH_SLOTS]);
    let ev: Vec<_> = r
        .events()
        .iter()
        .map(|e| (e.op, e.flags, e.ptr, e.time_ns))
        .collect();
    assert_eq!(
        ev,
        [
            (Op::Alloc, 0, 0x40_0100, 4),
            (Op::Alloc, alloc_flags::UNRETURNED, 0, 5),
            (Op::Alloc, 0, 0x40_0200, 5),
            (Op::Alloc, alloc_flags::UNRETURNED, 0, 7),
        ]
    );
    assert_eq!(r.hooks.counts().unreturned, 2);
}

#[test]
fn unreadable_arguments_are_flagged() {
    let mut r = Run::new(Arch::I386);
    // SP outside the stack: neither [SP] nor the stack arguments can be read, so the
    // allocation's return cannot be watched and is given up at once.
    r.guest.set("esp", 0x10).set("ebp", 0);
    assert_eq!(r.enter(PAGES, 1), 1);
    let ev = r.events();
    assert_eq!(
        ev[0].flags,
        alloc_flags::UNRETURNED | alloc_flags::ARG_UNREADABLE
    );
}

#[test]
fn a_calls_own_implementation_is_not_recorded_twice() {
    let mut r = Run::new(Arch::I386);
    // krealloc(0x40_1010, 1500), called from 0xc010_1400...
    r.guest.call(SP, 0xc010_1400, 0xc010_1240);
    r.guest.set("ecx", 0x40_1010).set("edx", 1500);
    r.enter(KREALLOC, 1);
    // ...moves the block: it calls kmalloc and kfree itself (their stacks pass through the
    // krealloc's caller, at 0xc010_1400).
    r.guest.call(SP - 0x100, 0xc010_2830, 0xc010_1400);
    r.guest.set("ecx", 1500);
    assert_eq!(r.enter(KMALLOC, 2), 0);
    r.guest.call(SP - 0x100, 0xc010_2840, 0xc010_1400);
    r.guest.set("ecx", 0x40_1010);
    assert_eq!(r.enter(KFREE, 3), 0);
    // Another allocator's call from inside is recorded (the page allocator feeding a heap).
    r.guest.call(SP - 0x100, 0xc010_2850, 0xc010_1400);
    r.guest.put(SP - 0x100 + 4, 1);
    r.guest.put(SP - 0x100 + 8, 4096);
    r.enter(PAGES, 4);
    r.guest.returned(SP - 0x100, 0x80_0000);
    assert_eq!(r.reach(0xc010_2850, 5), 1);
    r.guest.returned(SP, 0x40_3000);
    assert_eq!(r.reach(0xc010_1400, 6), 1);
    let ev = r.events();
    assert_eq!(ev.len(), 2);
    assert_eq!((ev[0].op, ev[0].size), (Op::Alloc, 4096));
    assert_eq!(
        (ev[1].op, ev[1].ptr, ev[1].new_ptr),
        (Op::Realloc, 0x40_1010, 0x40_3000)
    );
    assert_eq!(r.hooks.counts().nested, 2);
}

#[test]
fn a_reallocations_implementation_is_found_with_or_without_frame_pointers() {
    let mut r = Run::new(Arch::I386);
    r.guest.call(SP, 0xc010_1400, 0xc010_1240);
    r.guest.set("ecx", 0x40_1010).set("edx", 1500);
    r.enter(KREALLOC, 1);
    let set = r.set.clone();
    let kmalloc = set.at(KMALLOC).unwrap();
    let far = SP - 0x2000;
    assert!(r
        .hooks
        .is_nested(&set, kmalloc, far, &[0xc010_2830, 0xc010_1400]));
    // No frame pointers: one frame, but SP just below the realloc's.
    assert!(r.hooks.is_nested(&set, kmalloc, SP - 0x40, &[0xc010_2830]));
    assert!(!r.hooks.is_nested(&set, kmalloc, far, &[0xc010_2830]));
    // An interrupt handler's walk reaches the realloc's caller only past the kernel entry.
    let past_entry = [
        0xc010_9000,
        frame_marker::KERNEL_ENTRY,
        0xc010_2700,
        0xc010_1400,
    ];
    assert!(!r.hooks.is_nested(&set, kmalloc, far, &past_entry));
    // A page allocation is not kmalloc's implementation, whatever its stack.
    let pages = set.at(PAGES).unwrap();
    assert!(!r
        .hooks
        .is_nested(&set, pages, SP - 0x40, &[0xc010_2830, 0xc010_1400]));
}

#[test]
fn calls_made_inside_an_allocation_are_recorded() {
    let mut r = Run::new(Arch::I386);
    r.guest.call(SP, 0xc010_1400, 0xc010_1240);
    r.guest.set("ecx", 64);
    r.enter(KMALLOC, 1);
    // Memory reclaim inside kmalloc frees another object for real.
    r.guest.call(SP - 0x40, 0xc010_2830, 0xc010_1400);
    r.guest.set("ecx", 0x40_2000);
    assert_eq!(r.enter(KFREE, 2), 1);
    assert_eq!(r.hooks.counts().nested, 0);
}
