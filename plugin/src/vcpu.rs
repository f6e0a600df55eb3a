//! Per-vCPU state and callbacks: initialisation, idle hand-over, and the sampling callback,
//! which runs the trigger and hands the capture QEMU's register and memory readers.

use std::ffi::{c_uint, c_void};
use std::sync::atomic::Ordering;
use std::time::Duration;

use kern_profile_format::SamplingMode;
use kern_profile_recorder::batch::SampleBuffer;
use kern_profile_recorder::blocks::BlockInfo;
use kern_profile_recorder::capture::{Capture, Reg, RegisterReader, SampleSite};
use kern_profile_recorder::trigger::{fire, Counter, Trigger};
use kern_profile_unwind::PtrWidth;
use qemu_plugin_sys as sys;

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
    /// Picks the sampled instruction of a block with `delay=`.
    rng: fastrand::Rng,
}

impl Vcpu {
    /// A vCPU not yet initialised by QEMU.
    pub fn new(sampling: SamplingMode, width: PtrWidth, depth: u32, index: u64) -> Self {
        Vcpu {
            rng: fastrand::Rng::with_seed(
                crate::unix_now_ns() ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            ready: false,
            machine: None,
            counter: Counter::new(),
            trigger: Trigger::new(sampling, 0),
            buffer: SampleBuffer::new(Vec::new()),
            capture: Capture::new(width, depth),
        }
    }
}

/// QEMU's handles on the registers a sample reads, and the buffers QEMU reads into.
pub struct Machine {
    regs: Registers,
    membuf: ByteArray,
}

struct Registers {
    sp: Register,
    fp: Register,
    cs: Register,
    buf: ByteArray,
}

impl Machine {
    /// Finds the registers by name; only in a vCPU callback.
    fn find() -> Option<Machine> {
        let regs = qemu::registers();
        let find = |reg: Reg| {
            regs.iter()
                .find(|(n, _)| reg.names().contains(&n.as_str()))
                .map(|&(_, r)| r)
        };
        Some(Machine {
            regs: Registers {
                sp: find(Reg::StackPointer)?,
                fp: find(Reg::FramePointer)?,
                cs: find(Reg::CodeSegment)?,
                buf: ByteArray::new()?,
            },
            membuf: ByteArray::new()?,
        })
    }
}

impl RegisterReader for Registers {
    fn read(&mut self, reg: Reg) -> Option<u64> {
        let r = match reg {
            Reg::StackPointer => self.sp,
            Reg::FramePointer => self.fp,
            Reg::CodeSegment => self.cs,
        };
        self.buf.read_register(r)
    }
}

pub unsafe extern "C" fn on_vcpu_init(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| vcpu_init(vcpu));
}

fn vcpu_init(idx: u32) {
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
        // Called again (a vCPU reset): keep the counts.
        return;
    }
    warn_shared_thread(p, idx);
    v.machine = Machine::find();
    if v.machine.is_none() && idx == 0 {
        stderr_line(
            "kern-profile: QEMU does not expose the stack, frame and cs registers: samples will have no stacks",
        );
    }
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

pub unsafe extern "C" fn on_vcpu_idle(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| {
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
    });
}

/// Hands the vCPU's batch to the writer (never blocks; drops when it is behind).
fn send(p: &Plugin, buffer: &mut SampleBuffer) {
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
    if !v.ready {
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
            entry: block.entry,
            icount,
            time_ns: if now == 0 { p.now_ns() } else { now },
        };
        take_sample(p, v, &site);
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
        entry: block.entry,
        icount: 0,
        time_ns: now,
    };
    take_sample(p, v, &site);
    t.slots.charge(idx as usize, p.now_ns().saturating_sub(now));
}

/// Captures the sample through QEMU's register and memory reads and queues it.
fn take_sample(p: &Plugin, v: &mut Vcpu, site: &SampleSite) {
    let Vcpu {
        machine,
        capture,
        buffer,
        ..
    } = v;
    let rec = match machine {
        Some(m) => {
            let mem = &mut m.membuf;
            capture.take(site, &mut m.regs, |addr, out| mem.read_memory(addr, out))
        }
        None => capture.take_without_registers(site),
    };
    if buffer.push(p.width.bytes(), &rec) {
        send(p, buffer);
    }
}
