//! kern-profile's QEMU TCG plugin: samples the guest's call stacks (frame-pointer walk) per
//! vCPU, by host time (`delay=`) or guest instructions (`period=`), and optionally counts
//! every translated block's executions exactly (`exact=on`). See README.md beside this crate.
//!
//! This crate is only the QEMU glue; the logic lives in `kern-profile-recorder` and
//! `kern-profile-unwind`, which are unit-tested.
//!
//! Mechanism, per translated block (no callback per instruction, none per block execution):
//! - `delay=` (host time): a conditional callback, `slot >= ARMED`, on the vCPU's arm slot,
//!   which one timer thread sets every `delay` µs (see `recorder::host_timer`); nothing else
//!   runs per block, so the guest runs at nearly full speed;
//! - `period=` (guest instructions): an inline add of the block's instruction count into the
//!   vCPU's scoreboard counter, and a conditional callback, `counter >= THRESHOLD`, which
//!   fires when the vCPU's instruction budget is spent (see `recorder::trigger`);
//! - with `exact=on`, an inline add of 1 into the block's own counter slot.

mod qemu;

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kern_profile_format::{
    encode_exact_blocks, encode_stats, Arch, Header, HostTimerStats, SampleRecord, StopReason,
    VcpuTime,
};
use kern_profile_recorder::arm_slots::{ArmSlots, ARMED};
use kern_profile_recorder::batch::SampleBuffer;
use kern_profile_recorder::config::{Config, Sampling};
use kern_profile_recorder::exact::{slot_location, ExactTable, CHUNK_SLOTS};
use kern_profile_recorder::host_timer::{HostTimer, TimerStats};
use kern_profile_recorder::qemu_args::{single_threaded_tcg, split_cmdline};
use kern_profile_recorder::summary::{summary_line, timer_line, StopCounts};
use kern_profile_recorder::trigger::{fire, Counter, Trigger, THRESHOLD};
use kern_profile_recorder::version::{check_api, parse_qemu_version};
use kern_profile_recorder::window::WindowReader;
use kern_profile_recorder::writer::{Writer, WriterConfig};
use kern_profile_unwind::{walk_across, Crossings, EntryState, PtrWidth};
use qemu_plugin_sys as sys;

use qemu::{ByteArray, Register, U64Entry};

/// The plugin API version this plugin is built for (QEMU reads this symbol).
#[no_mangle]
pub static qemu_plugin_version: c_int = sys::QEMU_PLUGIN_VERSION as c_int;

/// How long the exit path waits for a vCPU that is inside a callback.
const EXIT_LOCK_WAIT: Duration = Duration::from_millis(200);

/// Each vCPU's state, alone on its cache lines.
#[repr(align(128))]
struct Slot(Mutex<Vcpu>);

struct Regs {
    sp: Register,
    fp: Register,
    cs: Register,
}

struct Vcpu {
    ready: bool,
    regs: Option<Regs>,
    regbuf: Option<ByteArray>,
    membuf: Option<ByteArray>,
    counter: Counter,
    trigger: Trigger,
    buffer: SampleBuffer,
    window: WindowReader,
    frames: Box<[u64]>,
    stops: StopCounts,
    /// Picks the sampled instruction of a block with `delay=`.
    rng: fastrand::Rng,
}

/// What the sampler needs to know of a translated block: its instructions' addresses (a
/// sample lands on the one its budget ran out at) and its frame state at entry.
struct BlockInfo {
    insns: Box<[u64]>,
    entry: EntryState,
}

/// Blocks are retranslated (after a flush, or in another vCPU's TB cache): one `BlockInfo`
/// per distinct block, kept for the plugin's lifetime, so memory is bounded by the code run.
type BlockTable = HashMap<(Box<[u64]>, EntryState), &'static BlockInfo>;

struct ExactState {
    table: ExactTable,
    chunks: Vec<U64Entry>,
}

struct Plugin {
    cfg: Config,
    width: PtrWidth,
    vcpus: Box<[Slot]>,
    /// Number of vCPUs QEMU was started with.
    smp_vcpus: usize,
    /// Per-vCPU scoreboard entry the conditional callback tests: the instruction counter
    /// (compared against THRESHOLD) with `period=`, the arm slot (against ARMED) with `delay=`.
    acc: U64Entry,
    /// `delay=`: the arm slots and the timer thread that sets them.
    timed: Option<Timed>,
    writer: Writer<File>,
    exact: Option<Mutex<ExactState>>,
    blocks: Mutex<BlockTable>,
    start: Instant,
    exiting: AtomicBool,
    /// The host thread each vCPU was initialised on, to detect single-threaded TCG.
    vcpu_threads: Mutex<Vec<(u32, std::thread::ThreadId)>>,
}

impl Plugin {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// Host-timer sampling (`delay=`).
struct Timed {
    slots: Arc<ArmSlots>,
    timer: Mutex<Option<HostTimer>>,
    interval_ns: u64,
    /// vCPUs initialised so far; with more than [`SCOREBOARD_STABLE`] possible vCPUs the
    /// slots are registered only once all `-smp` vCPUs are (see `register_arm_slots`).
    inited: AtomicU64,
}

/// QEMU allocates scoreboards for 16 vCPUs and reallocates them (moving every entry) when a
/// vCPU with a higher index starts; the timer thread must not write into a moved entry.
const SCOREBOARD_STABLE: usize = 16;

static PLUGIN: OnceLock<Plugin> = OnceLock::new();

/// Runs `f`, containing any panic: nothing may unwind into QEMU.
fn guard<F: FnOnce()>(f: F) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

fn stderr_line(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

fn lock_now(slot: &Slot) -> Option<MutexGuard<'_, Vcpu>> {
    match slot.0.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

fn lock_within<T>(m: &Mutex<T>, wait: Duration) -> Option<MutexGuard<'_, T>> {
    let t = Instant::now();
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if t.elapsed() < wait => {
                std::thread::sleep(Duration::from_micros(100))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// # Safety
/// Called by QEMU once, with a valid `info` and `argc` C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: sys::qemu_plugin_id_t,
    info: *const sys::qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: as promised by QEMU.
        unsafe { install(id, info, argc, argv) }
    }));
    match r {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            stderr_line(&format!("kern-profile: {msg}"));
            -1
        }
        Err(_) => {
            stderr_line("kern-profile: internal error while loading the plugin");
            -1
        }
    }
}

unsafe fn install(
    id: sys::qemu_plugin_id_t,
    info: *const sys::qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> Result<(), String> {
    let info = info.as_ref().ok_or("QEMU passed no plugin info")?;
    check_api(info.version.min, info.version.cur).map_err(|e| e.to_string())?;
    let mut args = Vec::new();
    for i in 0..argc.max(0) as usize {
        let p = *argv.add(i);
        if !p.is_null() {
            args.push(CStr::from_ptr(p).to_string_lossy().into_owned());
        }
    }
    let cfg = Config::parse(args.iter().map(String::as_str)).map_err(|e| e.to_string())?;
    if !info.system_emulation {
        return Err(
            "kern-profile profiles guest kernels: load it into qemu-system-i386 or qemu-system-x86_64, not user-mode QEMU"
                .into(),
        );
    }
    let target = if info.target_name.is_null() {
        String::new()
    } else {
        CStr::from_ptr(info.target_name)
            .to_string_lossy()
            .into_owned()
    };
    let arch = match target.as_str() {
        "i386" => Arch::I386,
        "x86_64" => Arch::X86_64,
        other => {
            return Err(format!(
                "guest architecture '{other}' is not supported (i386 and x86_64 are)"
            ))
        }
    };
    let width = PtrWidth::from_bytes(arch.ptr_width() as usize).map_err(|e| e.to_string())?;
    let smp = info.__bindgen_anon_1.system.smp_vcpus.max(1) as usize;
    let max = (info.__bindgen_anon_1.system.max_vcpus.max(0) as usize).clamp(smp, 4096);
    if smp > 1 {
        let raw = std::fs::read("/proc/self/cmdline").unwrap_or_default();
        let args = split_cmdline(&raw);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Some(opt) = single_threaded_tcg(&args) {
            return Err(format!(
                "-smp {smp} with '{opt}' runs all vCPUs on one host thread, where QEMU credits each translated block's counters to the vCPU that translated it (wrong counts and stacks per vCPU; guests were seen to crash): use -accel tcg,thread=multi (QEMU's default) and no -icount"
            ));
        }
    }

    let mut file = File::create(&cfg.out).map_err(|e| {
        format!(
            "out={}: cannot create the output file: {e}",
            cfg.out.display()
        )
    })?;
    let start_unix_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let header = Header {
        arch,
        sampling: cfg.sampling.mode(),
        exact: cfg.exact,
        markers: true,
        vcpus: smp as u32,
        max_depth: cfg.depth,
        start_unix_ns,
        qemu_version: running_qemu_version(info.version.cur),
    };
    let mut bytes = Vec::new();
    header.encode(&mut bytes);
    file.write_all(&bytes)
        .and_then(|()| file.flush())
        .map_err(|e| format!("out={}: cannot write: {e}", cfg.out.display()))?;
    let writer = Writer::spawn(file, WriterConfig::default())
        .map_err(|e| format!("cannot start the writer thread: {e}"))?;
    // 64-byte elements: each vCPU's counter on its own cache line.
    let acc = U64Entry::new_scoreboard(64).ok_or("cannot allocate a scoreboard")?;

    let start = Instant::now();
    let vcpus = (0..max as u64)
        .map(|i| {
            Slot(Mutex::new(Vcpu {
                ready: false,
                regs: None,
                regbuf: None,
                membuf: None,
                counter: Counter::new(),
                trigger: Trigger::new(cfg.sampling, 0),
                buffer: SampleBuffer::new(Vec::new()),
                window: WindowReader::new(width.max_addr()),
                // One more than the depth: room for a caller read from the stack.
                frames: vec![0; cfg.depth as usize + 1].into_boxed_slice(),
                stops: StopCounts::default(),
                rng: fastrand::Rng::with_seed(
                    start_unix_ns ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                ),
            }))
        })
        .collect();
    let exact = cfg.exact.then(|| {
        Mutex::new(ExactState {
            table: ExactTable::new(),
            chunks: Vec::new(),
        })
    });
    let cfg_sampling = cfg.sampling;
    let plugin = Plugin {
        cfg,
        width,
        vcpus,
        smp_vcpus: smp,
        acc,
        timed: timed(&cfg_sampling, max),
        writer,
        exact,
        blocks: Mutex::new(HashMap::new()),
        start,
        exiting: AtomicBool::new(false),
        vcpu_threads: Mutex::new(Vec::new()),
    };
    if PLUGIN.set(plugin).is_err() {
        return Err("the plugin is loaded twice".into());
    }
    sys::qemu_plugin_register_vcpu_init_cb(id, Some(on_vcpu_init));
    sys::qemu_plugin_register_vcpu_idle_cb(id, Some(on_vcpu_idle));
    sys::qemu_plugin_register_vcpu_resume_cb(id, Some(on_vcpu_resume));
    start_timer()?;
    sys::qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_tb_trans));
    sys::qemu_plugin_register_atexit_cb(id, Some(on_exit), std::ptr::null_mut());
    Ok(())
}

/// The timer state for `delay=`, or None with `period=`.
fn timed(sampling: &Sampling, max_vcpus: usize) -> Option<Timed> {
    let Sampling::DelayMicros(us) = *sampling else {
        return None;
    };
    Some(Timed {
        slots: Arc::new(ArmSlots::new(max_vcpus)),
        timer: Mutex::new(None),
        interval_ns: us.saturating_mul(1000).max(1),
        inited: AtomicU64::new(0),
    })
}

/// Starts the timer thread of `delay=` (it arms only slots registered by `vcpu_init`).
fn start_timer() -> Result<(), String> {
    let Some(p) = PLUGIN.get() else {
        return Ok(());
    };
    let Some(t) = &p.timed else { return Ok(()) };
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    let timer = HostTimer::spawn(t.interval_ns, Arc::clone(&t.slots), seed)
        .map_err(|e| format!("cannot start the timer thread: {e}"))?;
    if let Ok(mut slot) = t.timer.lock() {
        *slot = Some(timer);
    }
    Ok(())
}

/// Hands the timer the arm slots of initialised vCPUs. While QEMU may still move the
/// scoreboard (more than 16 vCPUs possible), that waits until all `-smp` vCPUs exist.
fn register_arm_slots(p: &Plugin, t: &Timed, idx: u32) {
    let inited = t.inited.fetch_add(1, Ordering::SeqCst) as usize + 1;
    let register = |i: u32| {
        // SAFETY: the scoreboard is never freed, and no longer moves (see above).
        unsafe { t.slots.register(i as usize, p.acc.element(i) as *mut u64) }
    };
    if p.vcpus.len() <= SCOREBOARD_STABLE {
        register(idx);
    } else if inited == p.smp_vcpus {
        (0..p.smp_vcpus as u32).for_each(register);
    }
}

/// The running QEMU's version (`qemu-system-* --version` of this very binary).
fn running_qemu_version(api: c_int) -> String {
    std::process::Command::new("/proc/self/exe")
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|o| parse_qemu_version(&String::from_utf8_lossy(&o.stdout)).map(String::from))
        .unwrap_or_else(|| format!("unknown (plugin API {api})"))
}

unsafe extern "C" fn on_vcpu_init(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
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
    if let Ok(mut threads) = p.vcpu_threads.lock() {
        let me = std::thread::current().id();
        if let Some(&(other, _)) = threads.iter().find(|(_, t)| *t == me) {
            stderr_line(&format!(
                "kern-profile: warning: vCPUs {other} and {idx} run on one host thread (single-threaded TCG): QEMU credits their counters and samples to the wrong vCPU; use -accel tcg,thread=multi"
            ));
        }
        threads.push((idx, me));
    }
    let regs = qemu::registers();
    let find = |names: &[&str]| {
        regs.iter()
            .find(|(n, _)| names.contains(&n.as_str()))
            .map(|&(_, r)| r)
    };
    v.regs = match (find(&["rsp", "esp"]), find(&["rbp", "ebp"]), find(&["cs"])) {
        (Some(sp), Some(fp), Some(cs)) => Some(Regs { sp, fp, cs }),
        _ => {
            if idx == 0 {
                stderr_line(
                    "kern-profile: QEMU does not expose the stack, frame and cs registers: samples will have no stacks",
                );
            }
            None
        }
    };
    v.regbuf = ByteArray::new();
    v.membuf = ByteArray::new();
    v.buffer = SampleBuffer::new(p.writer.fresh_buffer());
    v.trigger = Trigger::new(p.cfg.sampling, p.now_ns());
    if let Some(t) = &p.timed {
        register_arm_slots(p, t, idx);
    } else if p.cfg.sampling != Sampling::Off {
        let icount = v.counter.instructions(p.acc.get(idx));
        let budget = v.trigger.first_budget();
        let armed = v.counter.arm(icount, budget);
        p.acc.set(idx, armed);
    }
    v.ready = true;
}

unsafe extern "C" fn on_vcpu_idle(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| {
        let Some(p) = PLUGIN.get() else { return };
        if let Some(t) = &p.timed {
            t.slots.went_idle(vcpu as usize, p.now_ns());
        }
        if p.exiting.load(Ordering::Relaxed) {
            return;
        }
        let Some(mut v) = p.vcpus.get(vcpu as usize).and_then(lock_now) else {
            return;
        };
        if !v.buffer.is_empty() {
            send(p, &mut v);
        }
    });
}

unsafe extern "C" fn on_vcpu_resume(_id: sys::qemu_plugin_id_t, vcpu: c_uint) {
    guard(|| {
        let Some(p) = PLUGIN.get() else { return };
        if let Some(t) = &p.timed {
            t.slots.resumed(vcpu as usize, p.now_ns());
        }
    });
}

/// Hands the vCPU's batch to the writer (never blocks; drops when it is behind).
fn send(p: &Plugin, v: &mut Vcpu) {
    let batch = v.buffer.take(p.writer.fresh_buffer());
    let _ = p.writer.submit(batch);
}

unsafe extern "C" fn on_tb_trans(_id: sys::qemu_plugin_id_t, tb: *mut sys::qemu_plugin_tb) {
    guard(|| {
        // SAFETY: QEMU passes the block being translated.
        unsafe { tb_trans(tb) }
    });
}

unsafe fn tb_trans(tb: *mut sys::qemu_plugin_tb) {
    let Some(p) = PLUGIN.get() else { return };
    let n = sys::qemu_plugin_tb_n_insns(tb);
    let insns: Vec<u64> = (0..n)
        .map(|i| sys::qemu_plugin_insn_vaddr(sys::qemu_plugin_tb_get_insn(tb, i)))
        .collect();
    let mut first = [0u8; 4];
    let got = if n > 0 {
        let insn = sys::qemu_plugin_tb_get_insn(tb, 0);
        sys::qemu_plugin_insn_data(insn, first.as_mut_ptr() as *mut c_void, first.len())
    } else {
        0
    };
    let entry = EntryState::classify(&first[..got.min(first.len())], p.width);
    let Some(info) = intern_block(p, &insns, entry) else {
        return;
    };
    instrument_sampling(p, tb, n, info);
    if let Some(exact) = &p.exact {
        let Ok(mut e) = exact.lock() else { return };
        let Some((slot, _)) = e.table.slot(&insns) else {
            return;
        };
        let (chunk, offset) = slot_location(slot);
        while e.chunks.len() <= chunk {
            let Some(score) = U64Entry::new_scoreboard(CHUNK_SLOTS * 8) else {
                return;
            };
            e.chunks.push(score);
        }
        let entry = e.chunks[chunk].at_offset(offset);
        drop(e);
        sys::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb,
            sys::qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            entry.0,
            1,
        );
    }
}

/// The sampler's per-block instrumentation. With `period=`, the count first, then the
/// sampler: the callback sees the block's instructions counted and works out which of them
/// the budget ran out at. With `delay=`, only the test of the arm slot; with `exact=only`,
/// nothing.
///
/// # Safety
/// `tb` is the block being translated.
unsafe fn instrument_sampling(
    p: &Plugin,
    tb: *mut sys::qemu_plugin_tb,
    n: usize,
    info: &BlockInfo,
) {
    let threshold = match p.cfg.sampling {
        Sampling::Off => return,
        Sampling::DelayMicros(_) => ARMED,
        Sampling::Period(_) => {
            sys::qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
                tb,
                sys::qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
                p.acc.0,
                n as u64,
            );
            THRESHOLD
        }
    };
    sys::qemu_plugin_register_vcpu_tb_exec_cond_cb(
        tb,
        Some(on_sample),
        sys::qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
        sys::qemu_plugin_cond::QEMU_PLUGIN_COND_GE,
        p.acc.0,
        threshold,
        info as *const BlockInfo as *mut c_void,
    );
}

/// The block's interned description, made once per distinct block.
fn intern_block(p: &Plugin, insns: &[u64], entry: EntryState) -> Option<&'static BlockInfo> {
    let mut table = p.blocks.lock().ok()?;
    let key = (Box::from(insns), entry);
    if let Some(info) = table.get(&key) {
        return Some(info);
    }
    let info: &'static BlockInfo = Box::leak(Box::new(BlockInfo {
        insns: key.0.clone(),
        entry,
    }));
    table.insert(key, info);
    Some(info)
}

unsafe extern "C" fn on_sample(vcpu: c_uint, userdata: *mut c_void) {
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
        // A tick armed this vCPU: sample the block being entered, at a random one of its
        // instructions, so code in the middle of blocks (inlined functions) gets its share;
        // registers are the block entry's, and a block never spans a call or a return.
        if t.slots.disarm(idx as usize) {
            let at = v.rng.usize(..block.insns.len().max(1));
            let pc = block.insns.get(at).copied().unwrap_or(0);
            let now = p.now_ns();
            take_sample(p, &mut v, idx, pc, block.entry, 0, now);
            t.slots.charge(idx as usize, p.now_ns().saturating_sub(now));
        }
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
        let now = if now == 0 { p.now_ns() } else { now };
        let pc = block.insns.get(index).copied().unwrap_or(0);
        take_sample(p, v, idx, pc, block.entry, icount, now);
    }
    p.acc.set(idx, fired.rearm);
}

fn take_sample(
    p: &Plugin,
    v: &mut Vcpu,
    idx: u32,
    pc: u64,
    entry: EntryState,
    icount: u64,
    now: u64,
) {
    let width = p.width;
    let w = width.bytes();
    let Vcpu {
        regs,
        regbuf,
        membuf,
        window,
        frames,
        buffer,
        stops,
        ..
    } = v;
    let (mut sp, mut fp, mut user) = (0, 0, false);
    if let (Some(r), Some(buf)) = (regs.as_ref(), regbuf.as_mut()) {
        sp = buf.read_register(r.sp).unwrap_or(0) & width.max_addr();
        fp = buf.read_register(r.fp).unwrap_or(0) & width.max_addr();
        user = buf.read_register(r.cs).is_some_and(|cs| cs & 3 == 3);
    }
    window.invalidate();
    let mut resolved = false;
    let (sp_word, walk) = match membuf.as_mut() {
        Some(mem) if regs.is_some() => {
            let mut fetch = |addr: u64, out: &mut [u8]| mem.read_memory(addr, out);
            let mut word = [0u8; 8];
            let sp_word = window
                .read(sp, &mut word[..w], &mut fetch)
                .then(|| width.word(&word));
            // A block entered without its own frame record: the caller's return address is
            // on the stack, and the walk from FP starts at the caller's caller.
            let caller = entry.caller_offset(width).and_then(|off| match off {
                0 => sp_word,
                off => window
                    .read(sp.wrapping_add(off), &mut word[..w], &mut fetch)
                    .then(|| width.word(&word)),
            });
            resolved = caller.is_some();
            let skip = resolved as usize;
            if let Some(ret) = caller {
                frames[0] = ret;
            }
            let depth = frames.len() - 1;
            let mut walk = walk_across(
                sp,
                fp,
                width,
                depth - skip,
                Crossings::ALL,
                |addr, out| window.read(addr, out, &mut fetch),
                &mut frames[skip..],
            );
            walk.frames += skip;
            (sp_word, walk)
        }
        _ => (
            None,
            kern_profile_unwind::Walk {
                frames: 0,
                stop: StopReason::Unreadable,
            },
        ),
    };
    stops.add(walk.stop);
    let rec = SampleRecord {
        vcpu: idx,
        user,
        stop: walk.stop,
        time_ns: now,
        icount,
        pc,
        sp,
        sp_word,
        frames: &frames[..walk.frames],
        entry_resolved: resolved,
    };
    if buffer.push(w, &rec) {
        send(p, v);
    }
}

unsafe extern "C" fn on_exit(_id: sys::qemu_plugin_id_t, _userdata: *mut c_void) {
    guard(finish);
}

/// At exit: hand over every vCPU's last batch, stop the writer, append the exact block
/// counts and the statistics, print the summary.
fn finish() {
    let Some(p) = PLUGIN.get() else { return };
    if p.exiting.swap(true, Ordering::SeqCst) {
        return;
    }
    let timer = stop_timer(p);
    // vCPUs may still run (the guest wrote isa-debug-exit from one of them): each vCPU's
    // lock orders its last callback before what is read here.
    let mut stops = StopCounts::default();
    let mut icounts = vec![0u64; p.smp_vcpus];
    let mut busy = Vec::new();
    for (i, slot) in p.vcpus.iter().enumerate() {
        let Some(mut v) = lock_within(&slot.0, EXIT_LOCK_WAIT) else {
            busy.push(i);
            continue;
        };
        if !v.ready {
            continue;
        }
        if icounts.len() <= i {
            icounts.resize(i + 1, 0);
        }
        if matches!(p.cfg.sampling, Sampling::Period(_)) {
            icounts[i] = v.counter.instructions(p.acc.get(i as u32));
        }
        stops.merge(&v.stops);
        if !v.buffer.is_empty() {
            let batch = v.buffer.take(Vec::new());
            p.writer.submit_blocking(batch);
        }
    }
    if !busy.is_empty() {
        stderr_line(&format!(
            "kern-profile: vCPUs {busy:?} were busy at exit; their last samples are lost"
        ));
    }
    let Some(mut fin) = p.writer.finish() else {
        stderr_line("kern-profile: the writer thread is gone; the output may be incomplete");
        return;
    };
    let mut trailer = Vec::new();
    let mut exact_blocks = None;
    if let Some(exact) = &p.exact {
        if let Some(e) = lock_within(exact, EXIT_LOCK_WAIT) {
            exact_blocks = Some(encode_exact(p, &e, &mut trailer));
        }
    }
    if let Some(t) = &timer {
        t.encode(&mut trailer);
    }
    // Only `period=` counts instructions; otherwise an empty list says so.
    if !matches!(p.cfg.sampling, Sampling::Period(_)) {
        icounts.clear();
    }
    let dropped = p.writer.dropped() + fin.samples_failed;
    encode_stats(
        &mut trailer,
        fin.samples_written,
        dropped,
        &stops.0,
        &icounts,
    );
    if let Err(e) = fin.out.write_all(&trailer).and_then(|()| fin.out.flush()) {
        fin.error.get_or_insert(e);
    }
    if let Some(e) = &fin.error {
        stderr_line(&format!(
            "kern-profile: writing {} failed: {e}",
            p.cfg.out.display()
        ));
    }
    let out: PathBuf = p.cfg.out.clone();
    stderr_line(&summary_line(
        fin.samples_written,
        dropped,
        &stops,
        exact_blocks,
        &out,
    ));
    if let Some(t) = &timer {
        stderr_line(&timer_line(t));
    }
}

/// Stops the `delay=` timer thread and gathers its figures with each vCPU's idle time.
fn stop_timer(p: &Plugin) -> Option<HostTimerStats> {
    let t = p.timed.as_ref()?;
    let stats: TimerStats = t
        .timer
        .lock()
        .ok()
        .and_then(|mut g| g.take())
        .map(HostTimer::stop)
        .unwrap_or_default();
    let now = p.now_ns();
    let vcpus = (0..p.smp_vcpus)
        .map(|i| {
            let s = t.slots.idle_stats(i, now);
            VcpuTime {
                idle_ns: s.idle_ns,
                idle_ticks: s.idle_ticks,
                armed_ticks: s.armed_ticks,
                throttled_ticks: s.throttled_ticks,
            }
        })
        .collect();
    Some(HostTimerStats {
        interval_ns: t.interval_ns,
        ticks: stats.ticks,
        late: stats.late,
        vcpus,
    })
}

/// Sums every executed block's counter over the vCPUs and encodes the exact-count records;
/// returns the number of blocks written.
fn encode_exact(p: &Plugin, e: &ExactState, out: &mut Vec<u8>) -> usize {
    // SAFETY: plain API call.
    let nv = unsafe { sys::qemu_plugin_num_vcpus() }.max(0) as u32;
    // Each chunk's element base per vCPU.
    let bases: Vec<Vec<*mut u8>> = e
        .chunks
        .iter()
        .map(|c| (0..nv).map(|v| c.element(v)).collect())
        .collect();
    let counts: Vec<(u64, &[u64])> = e
        .table
        .blocks()
        .filter_map(|(slot, insns)| {
            let (chunk, offset) = slot_location(slot);
            let per_vcpu = bases.get(chunk)?;
            let execs: u64 = per_vcpu
                .iter()
                .map(|&base| {
                    // SAFETY: the slot lies inside the element (offset < CHUNK_SLOTS * 8);
                    // vCPUs may still be adding, so read atomically.
                    unsafe { (*(base.add(offset) as *const AtomicU64)).load(Ordering::Relaxed) }
                })
                .fold(0u64, u64::wrapping_add);
            (execs > 0).then_some((execs, insns))
        })
        .collect();
    let n = counts.len();
    encode_exact_blocks(out, p.width.bytes(), counts);
    n
}
