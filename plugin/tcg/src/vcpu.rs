//! Per-vCPU state and callbacks: initialisation, idle hand-over, and the sampling callback,
//! which runs the trigger and hands the capture QEMU's register and memory readers.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::blocks::BlockInfo;
use crate::interrupted::Interrupted;
use crate::trigger::{fire, Counter, Trigger};
use kern_profile_format::{Arch, InterruptWaits, SampleExtras, SamplingMode};
use kern_profile_sampler::alloc_hooks::args::RegisterFile;
use kern_profile_sampler::alloc_hooks::{Hook, HookSet, Moment, VcpuHooks};
use kern_profile_sampler::batch::SampleBuffer;
use kern_profile_sampler::capture::{record_extras, Capture, Reg, RegisterReader, SampleSite};
use kern_profile_sampler::code_sampler::CodeSampler;
use kern_profile_sampler::switch::SwitchReader;
use kern_profile_sampler::task::TaskReader;

use kern_profile_unwind::EntryState;

use crate::qemu::{self, ByteArray, Register};
use crate::timer;
use crate::{guard, lock_now, lock_within, stderr_line, Plugin, PLUGIN};

/// One vCPU's sampling state, behind its own lock.
pub struct Vcpu {
    pub ready: bool,
    /// `None` when QEMU does not expose the registers a sample reads.
    pub machine: Option<Machine>,
    pub counter: Counter,
    pub trigger: Trigger,
    pub buffer: SampleBuffer,
    pub capture: Capture,
    /// Code bytes at the first user-mode sample of each page of each address space.
    pub code: CodeSampler,
    /// `alloc=`: the vCPU's hooked calls.
    pub hooks: Option<VcpuHooks>,
    /// `alloc=`: what the vCPU's watch slots hold.
    pub watch: crate::alloc::WatchCache,
    /// Picks the sampled instruction of a block with `delay=`.
    pub rng: fastrand::Rng,
    /// `trigger=interrupt`: how long the vCPU's samples waited for their interrupt.
    pub waits: InterruptWaits,
    /// `trigger=interrupt` without translation: the interrupted block's instructions.
    pub block: Vec<u64>,
    /// `delay=`: what each sample cost in the plugin, by mode.
    pub costs: crate::sample_costs::SampleCosts,
    /// `tasks=`: the task each sample ran in.
    pub tasks: Option<TaskReader>,
    /// `switches=`: the vCPU's task switches.
    pub switch: Option<SwitchReader>,
}

impl Vcpu {
    /// A vCPU not yet initialised by QEMU.
    pub fn new(sampling: SamplingMode, arch: Arch, depth: u32, index: u64) -> Self {
        Vcpu {
            rng: fastrand::Rng::with_seed(
                crate::unix_now_ns() ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            ready: false,
            machine: None,
            counter: Counter::new(),
            trigger: Trigger::new(sampling, 0),
            buffer: SampleBuffer::new(Vec::new()),
            capture: Capture::new(arch, depth),
            code: CodeSampler::new(arch),
            hooks: None,
            watch: Default::default(),
            waits: InterruptWaits::default(),
            block: Vec::new(),
            costs: Default::default(),
            tasks: None,
            switch: None,
        }
    }

    /// At the switch function's entry: the switch record and the next task's into the
    /// batch; returns whether the batch is due.
    pub fn take_switch(
        &mut self,
        vcpu: u32,
        time_ns: u64,
        icount: Option<u64>,
        width: usize,
    ) -> bool {
        let (Some(m), Some(s), Some(t)) = (
            self.machine.as_mut(),
            self.switch.as_mut(),
            self.tasks.as_mut(),
        ) else {
            return false;
        };
        let mem = &mut m.membuf;
        let read = |addr, b: &mut [u8]| mem.read_memory(addr, b);
        let (switch, next) = s.at_switch(vcpu, time_ns, icount, &mut m.regs, read, t);
        let due = self.buffer.push_switch(width, &switch, &next);
        s.recycle(switch);
        due
    }

    /// At a hooked function's entry: see [`VcpuHooks::enter`].
    pub fn enter_hook(&mut self, set: &HookSet, hook: &Hook, at: Moment, out: &mut Vec<u8>) -> u64 {
        let (Some(m), Some(h)) = (self.machine.as_mut(), self.hooks.as_mut()) else {
            return 0;
        };
        let mem = &mut m.membuf;
        h.enter(
            set,
            hook,
            at,
            &mut m.regs,
            |addr, b| mem.read_memory(addr, b),
            out,
        )
    }

    /// At the watched return address: see [`VcpuHooks::reached`].
    pub fn reach_hook(&mut self, set: &HookSet, pc: u64, at: Moment, out: &mut Vec<u8>) -> u64 {
        let (Some(m), Some(h)) = (self.machine.as_mut(), self.hooks.as_mut()) else {
            return 0;
        };
        let mem = &mut m.membuf;
        h.reached(
            set,
            pc,
            at,
            &mut m.regs,
            |addr, b| mem.read_memory(addr, b),
            out,
        )
    }
}

/// QEMU's handles on the registers a sample reads, and the buffers QEMU reads into.
pub struct Machine {
    regs: Registers,
    membuf: ByteArray,
}

/// The handle of each [`Reg`] QEMU exposes on this target (indexed like [`Reg::ALL`]): a
/// sample reads only these, and a register QEMU lacks costs nothing.
struct Registers {
    handles: [Option<Register>; Reg::ALL.len()],
    /// `alloc=`: the registers arguments and results are read from, by name.
    named: Vec<(&'static str, Register)>,
    buf: ByteArray,
}

impl Machine {
    /// Finds the registers of `arch` by name, and those of `named` QEMU has; only in a vCPU
    /// callback. `Err` lists the names QEMU has when a required one is missing.
    fn find(arch: Arch, named: &[&'static str]) -> Result<Machine, String> {
        let regs = qemu::registers();
        let named = named
            .iter()
            .filter_map(|&n| regs.iter().find(|(r, _)| r == n).map(|&(_, h)| (n, h)))
            .collect();
        let handles = Reg::ALL.map(|reg| {
            let names = reg.names(arch);
            // In the order of `names`: the first is the preferred one.
            names.iter().find_map(|want| {
                regs.iter()
                    .find(|(n, _)| n.as_str() == *want)
                    .map(|&(_, r)| r)
            })
        });
        let missing: Vec<&str> = Reg::ALL
            .iter()
            .zip(&handles)
            .filter(|(r, h)| r.required() && h.is_none())
            .filter_map(|(r, _)| r.names(arch).first().copied())
            .collect();
        if !missing.is_empty() {
            let have: Vec<&str> = regs.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!(
                "QEMU does not expose {} on {} (it has: {})",
                missing.join(", "),
                arch.name(),
                have.join(" ")
            ));
        }
        let (Some(buf), Some(membuf)) = (ByteArray::new(), ByteArray::new()) else {
            return Err("cannot allocate GLib byte arrays".into());
        };
        Ok(Machine {
            regs: Registers {
                handles,
                named,
                buf,
            },
            membuf,
        })
    }
}

impl RegisterReader for Registers {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        let i = Reg::ALL.iter().position(|&r| r == reg)?;
        self.buf.read_register(self.handles[i]?)
    }
}

impl RegisterFile for Registers {
    fn register(&mut self, name: &'static str) -> Option<u64> {
        let &(_, r) = self.named.iter().find(|(n, _)| *n == name)?;
        self.buf.read_register(r)
    }
}

/// vCPU `idx`'s instruction count, when the plugin counts them (`period=`).
pub fn counted_instructions(p: &Plugin, idx: u32, v: &Vcpu) -> Option<u64> {
    match p.cfg.sampling {
        SamplingMode::PeriodInstructions(_) => Some(v.counter.instructions(p.acc.get(idx))),
        _ => None,
    }
}

/// QEMU's vCPU-init callback.
pub fn vcpu_init(idx: u32) {
    let Some(p) = PLUGIN.get() else { return };
    let Some(slot) = p.vcpus.get(idx as usize) else {
        stderr_line(&format!(
            "kern-profile: vCPU {idx} is beyond the {} vCPUs planned for; it is not sampled",
            p.vcpus.len()
        ));
        return;
    };
    let Some(mut v) = lock_within(&slot.0, Duration::from_secs(1)) else {
        return;
    };
    if v.ready {
        // Called again (QEMU 10 calls it once, when it creates the vCPU, and tells plugins
        // of no reset; a re-initialised vCPU starts over): keep the counts; the calls
        // pending then never return.
        crate::alloc::vcpu_reset(p, idx, &mut v);
        return;
    }
    warn_shared_thread(p, idx);
    let mut named = p.alloc.as_ref().map_or(Vec::new(), |a| a.set.registers());
    if let Some(s) = &p.switches {
        named.extend(crate::switches::registers(s));
    }
    v.machine = match Machine::find(p.arch, &named) {
        Ok(m) => Some(m),
        Err(e) => {
            if idx == 0 {
                stderr_line(&format!("kern-profile: {e}: samples will have no stacks"));
            }
            None
        }
    };
    v.capture = Capture::new(p.arch, p.cfg.depth)
        .with_tables(p.tables.clone())
        .with_kernel_os(p.kernel_os);
    if let Some(a) = &p.alloc {
        let hooks = VcpuHooks::new(p.arch, p.cfg.depth).with_tables(p.tables.clone());
        v.hooks = Some(hooks.with_kernel_os(p.kernel_os));
        crate::alloc::vcpu_init(a, idx, &mut v);
        warn_missing_registers(&v.machine, &named, idx);
    }
    v.tasks = p.tasks.map(|spec| {
        let reader = TaskReader::new(spec, p.arch);
        match p.switches {
            Some(_) => reader.seeing_switches(),
            None => reader,
        }
    });
    v.switch = p.switches.map(|spec| {
        SwitchReader::new(spec, p.arch, p.cfg.depth).with_tables(p.tables.clone(), p.kernel_os)
    });
    v.buffer = SampleBuffer::new(p.writer.fresh_buffer());
    v.trigger = Trigger::new(p.cfg.sampling, p.now_ns());
    if let Some(t) = &p.timed {
        timer::register_arm_slot(p, t, idx);
    } else if p.cfg.sampling != SamplingMode::Off {
        let icount = v.counter.instructions(p.acc.get(idx));
        let budget = v.trigger.first_budget();
        let armed = v.counter.arm(icount, budget);
        p.acc.set(idx, armed);
    }
    v.ready = true;
}

/// Warns (once, for vCPU 0) about argument registers QEMU does not expose.
fn warn_missing_registers(m: &Option<Machine>, named: &[&'static str], idx: u32) {
    let have: Vec<&str> = m.as_ref().map_or(Vec::new(), |m| {
        m.regs.named.iter().map(|(n, _)| *n).collect()
    });
    let missing: Vec<&str> = named
        .iter()
        .copied()
        .filter(|n| !have.contains(n))
        .collect();
    if idx == 0 && !missing.is_empty() {
        stderr_line(&format!(
            "kern-profile: QEMU exposes no register {}: allocation arguments there read as 0",
            missing.join(", ")
        ));
    }
}

/// Warns when vCPU `idx` runs on a host thread another vCPU was initialised on.
fn warn_shared_thread(p: &Plugin, idx: u32) {
    let Ok(mut threads) = p.vcpu_threads.lock() else {
        return;
    };
    let me = std::thread::current().id();
    if let Some(&(other, _)) = threads.iter().find(|(_, t)| *t == me) {
        stderr_line(&format!(
            "kern-profile: warning: vCPUs {other} and {idx} run on one host thread (single-threaded TCG): QEMU credits their counters and samples to the wrong vCPU; use -accel tcg,thread=multi"
        ));
    }
    threads.push((idx, me));
}

/// QEMU's vCPU-idle callback: the vCPU halted; its batch goes to the writer.
pub fn vcpu_idle(vcpu: u32) {
    let Some(p) = PLUGIN.get() else { return };
    timer::went_idle(p, vcpu);
    if p.exiting.load(Ordering::Relaxed) {
        return;
    }
    let Some(mut v) = p.vcpus.get(vcpu as usize).and_then(lock_now) else {
        return;
    };
    if !v.buffer.is_empty() {
        send(p, &mut v.buffer);
    }
}

/// Hands the vCPU's batch to the writer (waits at most `SUBMIT_WAIT` for room; drops when
/// the writer is stuck).
pub fn send(p: &Plugin, buffer: &mut SampleBuffer) {
    let batch = buffer.take(p.writer.fresh_buffer());
    let _ = p.writer.submit(batch);
}

pub unsafe extern "C" fn on_sample(vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: userdata is the `&'static BlockInfo` registered with this callback.
    let info = unsafe { &*(userdata as *const BlockInfo) };
    guard(|| sample(vcpu, info));
}

/// The conditional callback: the vCPU's instruction budget ran out inside this block.
fn sample(idx: u32, block: &BlockInfo) {
    let Some(p) = PLUGIN.get() else { return };
    if p.exiting.load(Ordering::Relaxed) {
        return;
    }
    let Some(mut v) = p.vcpus.get(idx as usize).and_then(lock_now) else {
        return;
    };
    if !v.ready || !crate::window::admits(p, idx, &mut v) {
        return;
    }
    if let Some(t) = &p.timed {
        sample_armed(p, t, idx, &mut v, block);
        return;
    }
    let now = if v.trigger.needs_clock() {
        p.now_ns()
    } else {
        0
    };
    let v = &mut *v;
    let fired = fire(
        &mut v.counter,
        &mut v.trigger,
        p.acc.get(idx),
        block.insns.len(),
        now,
    );
    if let Some((index, icount)) = fired.sample {
        let site = SampleSite {
            vcpu: idx,
            pc: block.pc(index),
            regs_pc: block.pc(0),
            entry: block.entry,
            icount,
            time_ns: if now == 0 { p.now_ns() } else { now },
        };
        take_sample(p, v, &site, None);
    }
    p.acc.set(idx, fired.rearm);
}

/// `delay=`: a tick armed this vCPU, so sample the block being entered, at a random one of
/// its instructions, so that code in the middle of blocks (inlined functions) gets its share;
/// registers are the block entry's, and a block never spans a call or a return. The
/// sample's cost is charged to the vCPU, which skips ticks when sampling grows too costly.
fn sample_armed(p: &Plugin, t: &timer::Timed, idx: u32, v: &mut Vcpu, block: &BlockInfo) {
    if !t.slots.disarm(idx as usize) {
        return;
    }
    let index = v.rng.usize(..block.insns.len().max(1));
    let now = p.now_ns();
    let site = SampleSite {
        vcpu: idx,
        pc: block.pc(index),
        regs_pc: block.pc(0),
        entry: block.entry,
        icount: 0,
        time_ns: now,
    };
    let taken = take_sample(p, v, &site, None);
    account(p, t, v, &site, taken);
}

/// `trigger=interrupt`: QEMU's discontinuity callback (an interrupt is being
/// delivered). A vCPU that a tick armed samples the code it interrupted, at `from_pc`; every
/// other vCPU returns at once.
pub fn at_interrupt(idx: u32, from_pc: u64) {
    let Some(p) = PLUGIN.get() else { return };
    let Some(t) = &p.timed else { return };
    if p.exiting.load(Ordering::Relaxed) {
        return;
    }
    let Some(waited) = t.slots.disarm_waited(idx as usize) else {
        return;
    };
    let Some(mut v) = p.vcpus.get(idx as usize).and_then(lock_now) else {
        return;
    };
    if !v.ready || !crate::window::admits(p, idx, &mut v) {
        return;
    }
    let now = p.now_ns();
    v.waits.add(waited);
    let from_pc = from_pc & p.width.max_addr();
    // TCG takes interrupts between blocks: `from_pc` starts the block that was about to run.
    // As `delay=` does, a random one of its instructions is sampled, so that code in the
    // middle of blocks gets its share: from the block seen at translation (with its entry's
    // frame state) where the plugin translates and one block starts there, else from the
    // block decoded from guest memory (`trigger=interrupt` alone registers no translation
    // callback). Not under `-icount`: the guest's timer follows instructions, and QEMU ends a
    // block where the instruction budget runs out to take the interrupt right there, so
    // `from_pc` is the interrupted instruction and the samples fall by instructions, as exact
    // counts do (a random pick would move them forward in the block).
    let seen = || p.blocks.lock().ok().and_then(|b| b.starting_at(from_pc));
    let (pc, entry) = match p.icount {
        true => (from_pc, None),
        false => match seen() {
            Some(b) => (b.pc(v.rng.usize(..b.insns.len().max(1))), Some(b.entry)),
            None => (decoded_pick(p, &mut v, from_pc), None),
        },
    };
    let site = SampleSite {
        vcpu: idx,
        pc,
        regs_pc: from_pc,
        entry: entry.unwrap_or(EntryState::Framed),
        icount: 0,
        time_ns: now,
    };
    let taken = take_sample(p, &mut v, &site, Some((from_pc, entry.is_none())));
    account(p, t, &mut v, &site, taken);
}

/// A timed sample's cost, from `site.time_ns` to now: kept by mode in the vCPU's costs, and
/// charged to it, which skips ticks when sampling grows too costly. `taken`: what
/// [`take_sample`] returned.
fn account(p: &Plugin, t: &timer::Timed, v: &mut Vcpu, site: &SampleSite, taken: (bool, usize)) {
    let cost = p.now_ns().saturating_sub(site.time_ns);
    let (user, frames) = taken;
    v.costs.add(user, cost, frames);
    t.slots.charge(site.vcpu as usize, cost);
}

/// Code bytes read at an interrupted block's start: TCG's blocks average a few
/// instructions, x86's longest is 15 bytes.
const BLOCK_BYTES: usize = 64;

/// A random instruction of the block at `from_pc`, decoded from the guest's code (its bytes
/// up to [`BLOCK_BYTES`], not past `from_pc`'s page); `from_pc` where they cannot be read.
fn decoded_pick(p: &Plugin, v: &mut Vcpu, from_pc: u64) -> u64 {
    let Some(m) = v.machine.as_mut() else {
        return from_pc;
    };
    let in_page = (4096 - (from_pc & 0xfff)) as usize;
    let mut code = [0u8; BLOCK_BYTES];
    let code = &mut code[..BLOCK_BYTES.min(in_page)];
    if !m.membuf.read_memory(from_pc, code) {
        return from_pc;
    }
    kern_profile_arch::guest(p.arch).block_at(from_pc, code, &mut v.block);
    match v.block.len() {
        0 => from_pc,
        n => v.block[v.rng.usize(..n)],
    }
}

/// Captures the sample through QEMU's register and memory reads and queues it, after the
/// code bytes at its PC when it is the first user-mode sample of its page, or at the user
/// addresses past its kernel entry (see [`CodeSampler`]). `interrupted`:
/// `Some((from_pc, classify))` when the registers are an interrupt handler's at its first
/// instruction and the sample is of the code interrupted at `from_pc` ([`Interrupted`]);
/// `classify`: its frame state is read from the interrupted instruction's bytes (no block of
/// its told it).
/// Returns whether the sample was of user mode, and its return addresses (markers included).
fn take_sample(
    p: &Plugin,
    v: &mut Vcpu,
    site: &SampleSite,
    interrupted: Option<(u64, bool)>,
) -> (bool, usize) {
    let Vcpu {
        machine,
        capture,
        buffer,
        code,
        tasks,
        ..
    } = v;
    let (rec, extras) = match machine {
        Some(m) => {
            let mem = &mut m.membuf;
            let (rec, extras) = if let Some((from_pc, classify)) = interrupted {
                let mut first = [0u8; 4];
                let entry = match classify && mem.read_memory(from_pc, &mut first) {
                    true => EntryState::classify_on(p.arch, &first),
                    false => site.entry,
                };
                let site = SampleSite { entry, ..*site };
                let mut regs = Interrupted::new(p.arch, from_pc, &mut m.regs, |a, out| {
                    mem.read_memory(a, out)
                });
                capture.take(&site, &mut regs, |addr, out| mem.read_memory(addr, out))
            } else {
                capture.take(site, &mut m.regs, |addr, out| mem.read_memory(addr, out))
            };
            let extras = record_extras(&rec, extras);
            let width = p.width.bytes();
            code.sample(
                &rec,
                &extras,
                |addr, out| mem.read_memory(addr, out),
                |c| buffer.push_code(width, c),
            );
            if let Some(t) = tasks {
                let start = buffer.is_empty();
                let read = |addr, out: &mut [u8]| mem.read_memory(addr, out);
                if let Some(task) = t.read(
                    rec.pc,
                    rec.user,
                    extras.page_table_base,
                    site.time_ns,
                    site.vcpu,
                    start,
                    &mut m.regs,
                    read,
                ) {
                    buffer.push_task(&task);
                }
            }
            (rec, extras)
        }
        None => (
            capture.take_without_registers(site),
            SampleExtras::default(),
        ),
    };
    let taken = (rec.user, rec.frames.len());
    if buffer.push(p.width.bytes(), &rec, &extras) {
        send(p, buffer);
    }
    taken
}
