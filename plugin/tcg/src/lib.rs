//! kern-profile's QEMU TCG plugin: samples the guest's call stacks (frame-pointer walk) per
//! vCPU, by host time (`delay=`) or guest instructions (`period=`), and optionally counts
//! every translated block's executions exactly (`exact=on`). See README.md beside this crate.
//!
//! The `.so` files QEMU loads are the cdylibs of `plugin/api4` (QEMU 9.2 to 11.0) and
//! `plugin/api7` (11.1 and later), each [`export_plugin!`] of one ABI ([`abi`]). This crate
//! holds the TCG sampling source: its logic, which touches no QEMU symbol and is unit-tested,
//! and the QEMU glue over it. What a sample does once due (capture, batches, writer, read
//! cache, allocator hooks) is kern-profile-sampler's; the stack walk is kern-profile-unwind's.
//!
//! The logic:
//! - [`config`]: the `-plugin` arguments (`out=`, `delay=`, `period=`, `depth=`, `exact=`);
//! - [`trigger`]: when a vCPU takes its next sample, as an instruction budget for QEMU's
//!   conditional callback;
//! - [`blocks`]: what a sample needs of each translated block, made once per block;
//! - [`window_fn`]: `window=`, sampling only while a function is on the vCPU's stack;
//! - [`exact_slots`]: counter slots for exact per-block instruction counts;
//! - [`qemu_args`]: QEMU command-line settings the plugin cannot work under;
//! - [`target`]: the QEMUs the plugin refuses (user mode, other guests, one thread for
//!   several vCPUs);
//! - [`summary`]: the lines printed at exit;
//! - [`arm_slots`], [`host_timer`]: host-timer sampling for `delay=` (one timer thread arms
//!   per-vCPU slots that a conditional callback tests at block entry, or that the next
//!   interrupt takes with `trigger=interrupt`);
//! - [`interrupted`]: `trigger=interrupt`'s view of the interrupted context from inside QEMU's
//!   discontinuity callback.
//!
//! Mechanism, per translated block (no callback per instruction, none per block execution):
//! - `delay=` (host time): a conditional callback, `slot >= ARMED`, on the vCPU's arm slot,
//!   which one timer thread sets every `delay` µs (see [`host_timer`]); nothing else
//!   runs per block, so the guest runs at nearly full speed;
//! - `period=` (guest instructions): an inline add of the block's instruction count into the
//!   vCPU's scoreboard counter, and a conditional callback, `counter >= THRESHOLD`, which
//!   fires when the vCPU's instruction budget is spent (see [`trigger`]);
//! - with `exact=on`, an inline add of 1 into the block's own counter slot; `exact=only`
//!   registers nothing else.

pub mod arm_slots;
pub mod blocks;
pub mod config;
pub mod exact_slots;
pub mod host_timer;
pub mod interrupted;
pub mod kernel_tables;
pub mod qemu_args;
pub mod sample_costs;
pub mod summary;
pub mod switches;
pub mod target;
pub mod tasks;
pub mod trigger;
pub mod window_fn;

pub mod abi;
mod alloc;
mod exact;
mod exit;
mod flight;
mod output;
mod qemu;
mod qemu_version;
mod timer;
mod translate;
mod vcpu;
mod window;

use crate::output::Output;
use std::ffi::{c_char, c_int, CStr};
use std::fs::File;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::blocks::BlockTable;
use crate::config::Config;
use crate::target::{check_threading, guest_arch};
use kern_profile_format::qemu::check_api;
use kern_profile_format::{AllocTable, Arch, Header, VERSION_2, VERSION_3, VERSION_4};
use kern_profile_sampler::flight::{FlightConfig, DEFAULT_MAX_BYTES};
use kern_profile_sampler::writer::{Writer, WriterConfig};
use kern_profile_unwind::{KernelOs, PtrWidth, UnwindTables};
pub use qemu_plugin_sys as sys;

use abi::Api;

use alloc::AllocHooks;
use exact::ExactState;
use qemu::U64Entry;
use timer::Timed;
use vcpu::Vcpu;

/// What each build's `kern_profile_plugin_version` holds (see [`export_plugin!`]).
#[doc(hidden)]
pub const PLUGIN_ID: &str = concat!("kern-profile-plugin ", env!("CARGO_PKG_VERSION"), "\0");

#[doc(hidden)]
pub const fn bytes_of<const N: usize>(s: &str) -> [u8; N] {
    let (b, mut a, mut i) = (s.as_bytes(), [0u8; N], 0);
    while i < N {
        a[i] = b[i];
        i += 1;
    }
    a
}

/// How long the exit path waits for a vCPU that is inside a callback.
const EXIT_LOCK_WAIT: Duration = Duration::from_millis(200);

/// Each vCPU's state, alone on its cache lines.
#[repr(align(128))]
struct Slot(Mutex<Vcpu>);

struct Plugin {
    cfg: Config,
    arch: Arch,
    width: PtrWidth,
    /// `alloc=`: the hooked allocator functions.
    alloc: Option<AllocHooks>,
    vcpus: Box<[Slot]>,
    /// Number of vCPUs QEMU was started with.
    smp_vcpus: usize,
    /// Per-vCPU scoreboard entry the conditional callback tests: the instruction counter
    /// (against THRESHOLD) with `period=`, the arm slot (against ARMED) with `delay=`.
    acc: U64Entry,
    /// `delay=`: the arm slots and the timer thread that sets them.
    timed: Option<Timed>,
    writer: Writer<Output>,
    exact: Option<Mutex<ExactState>>,
    blocks: Mutex<BlockTable>,
    start: Instant,
    exiting: AtomicBool,
    /// The host thread each vCPU was initialised on, to detect single-threaded TCG.
    vcpu_threads: Mutex<Vec<(u32, std::thread::ThreadId)>>,
    /// `window=`: sampling only inside a function.
    window: Option<window::Window>,
    /// `elf=`: the kernel's unwind tables, for its stacks without frame pointers.
    tables: Option<Arc<UnwindTables>>,
    /// What the checks refused of them, for the exit line (`TableStats::refusals`).
    table_refusals: Option<String>,
    /// `elf=`: which kernel it is, for Linux's layouts in the walks (unknown without it).
    kernel_os: KernelOs,
    /// `tasks=`: where the guest's tasks are, when samples name theirs.
    tasks: Option<kern_profile_sampler::task::TaskSpec>,
    /// `switches=`: where the kernel switches tasks, when switches are recorded.
    switches: Option<kern_profile_sampler::switch::SwitchSpec>,
    /// `switches=`: the switches recorded (into the vCPUs' batches), for the exit line.
    switches_seen: AtomicU64,
    /// `flight_trigger=`: the functions that write the flight ring.
    flight_triggers: Vec<kern_profile_sampler::flight_trigger::Trigger>,
    /// `flight_trigger=`: a trigger was reached and the ring written (once).
    flight_dumped: AtomicBool,
    /// QEMU runs with `-icount`: `trigger=interrupt` samples the interrupted instruction as
    /// it is (see [`vcpu::at_interrupt`]).
    icount: bool,
}

impl Plugin {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

static PLUGIN: OnceLock<Plugin> = OnceLock::new();

/// Runs `f`, containing any panic: nothing may unwind into QEMU. The first panic is
/// reported (a panic inside a callback is a bug; silence would hide lost data).
#[doc(hidden)]
pub fn guard<F: FnOnce()>(f: F) {
    static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        if !REPORTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            stderr_line(&format!(
                "kern-profile: internal error in a callback (please report): {what}"
            ));
        }
    }
}

pub(crate) fn stderr_line(msg: &str) {
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

/// `qemu_plugin_install` of the build for `api`.
///
/// # Safety
/// Called by QEMU once, with a valid `info` and `argc` C strings in `argv`.
#[doc(hidden)]
pub unsafe fn install_entry(
    api: Api,
    id: sys::qemu_plugin_id_t,
    info: *const sys::qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: as promised by QEMU.
        unsafe { install(api, id, info, argc, argv) }
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
    api: Api,
    id: sys::qemu_plugin_id_t,
    info: *const sys::qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> Result<(), String> {
    let info = info.as_ref().ok_or("QEMU passed no plugin info")?;
    let qemu = abi::running_qemu_version();
    check_api(api.build(), info.version.min, info.version.cur, qemu).map_err(|e| e.to_string())?;
    let args = plugin_args(argc, argv);
    let cfg = Config::parse(args.iter().map(String::as_str)).map_err(|e| e.to_string())?;
    if cfg.at_interrupts && !abi::has_discon() {
        return Err(format!(
            "trigger=interrupt needs QEMU {} or newer (its discontinuity callback), and this is QEMU {}: use trigger=block (the default)",
            kern_profile_format::qemu::discon_qemu_version(),
            qemu.unwrap_or("older than that")
        ));
    }
    let arch = guest_arch(info.system_emulation, &target_name(info)).map_err(|e| e.to_string())?;
    let smp = info.__bindgen_anon_1.system.smp_vcpus.max(1) as usize;
    let max = (info.__bindgen_anon_1.system.max_vcpus.max(0) as usize).clamp(smp, 4096);
    let cmdline =
        qemu_args::split_cmdline(&std::fs::read("/proc/self/cmdline").unwrap_or_default());
    let cmdline: Vec<&str> = cmdline.iter().map(String::as_str).collect();
    check_threading(smp, &cmdline).map_err(|e| e.to_string())?;
    let header = Header {
        arch,
        sampling: cfg.sampling,
        exact: cfg.exact,
        markers: true,
        at_interrupts: cfg.at_interrupts,
        gdbstub: false,
        vcpus: smp as u32,
        max_depth: cfg.depth,
        start_unix_ns: unix_now_ns(),
        qemu_version: qemu.map_or_else(
            || format!("unknown (plugin API {})", info.version.cur),
            String::from,
        ),
    };
    // 64-byte elements: each vCPU's counter on its own cache line, its `alloc=` watch slots
    // beside it.
    const _: () = assert!(8 * (1 + kern_profile_sampler::alloc_hooks::matcher::WATCH_SLOTS) <= 64);
    let acc = U64Entry::new_scoreboard(64).ok_or("cannot allocate a scoreboard")?;
    let alloc = match &cfg.alloc {
        Some(a) => Some(AllocHooks::load(a, arch, |i| acc.at_offset(8 * (1 + i)))?),
        None => None,
    };
    let version = match (cfg.stack_table, alloc.is_some()) {
        (true, _) => VERSION_4,
        (false, true) => VERSION_3,
        (false, false) => VERSION_2,
    };
    let loaded = match &cfg.kernel {
        Some(path) => kernel_tables::load(path, arch, cfg.task_args(), &cfg.flight_triggers)?,
        None => kernel_tables::Loaded::default(),
    };
    let loaded = kernel_tables::add_user(loaded, &cfg.user, arch)?;
    let table = alloc.as_ref().map(|a| &a.set.table);
    let writer = open_output(&cfg, &header, version, table)?;
    let mut plugin = Plugin::new(cfg, arch, smp, max, writer, acc, alloc)?;
    (plugin.tables, plugin.table_refusals) = (loaded.tables, loaded.refusals);
    plugin.kernel_os = loaded.os;
    plugin.tasks = loaded.tasks;
    plugin.switches = loaded.switches;
    plugin.flight_triggers = loaded.flight_triggers;
    plugin.icount = qemu_args::counts_instructions(&cmdline);
    if PLUGIN.set(plugin).is_err() {
        return Err("the plugin is loaded twice".into());
    }
    let p = PLUGIN.get().ok_or("the plugin state is gone")?;
    // `trigger=interrupt` alone needs no block: QEMU's own bookkeeping of a translation
    // callback cost Debian's i386 Linux 3 to 6% of its CPU time, the callback as much again.
    // The interrupted block is decoded from guest memory instead (`vcpu::at_interrupt`).
    let translate = !p.cfg.at_interrupts
        || p.exact.is_some()
        || p.window.is_some()
        || p.alloc.is_some()
        || p.switches.is_some()
        || !p.flight_triggers.is_empty();
    api.register_callbacks(id, translate);
    if p.cfg.at_interrupts {
        if translate && !p.icount {
            if let Ok(mut b) = p.blocks.lock() {
                b.track_starts();
            }
        }
        api.register_discon(id);
    }
    let p = PLUGIN.get().ok_or("the plugin state is gone")?;
    window::park_all(p);
    timer::start(p)
}

/// QEMU's `argc`/`argv` of the plugin: its `key=value` arguments.
///
/// # Safety
/// `argv` holds `argc` pointers, each null or a C string.
unsafe fn plugin_args(argc: c_int, argv: *mut *mut c_char) -> Vec<String> {
    (0..argc.max(0) as usize)
        .map(|i| *argv.add(i))
        .filter(|p| !p.is_null())
        .map(|p| CStr::from_ptr(p).to_string_lossy().into_owned())
        .collect()
}

fn target_name(info: &sys::qemu_info_t) -> String {
    if info.target_name.is_null() {
        return String::new();
    }
    // SAFETY: QEMU's target name is a C string that lives as long as QEMU.
    unsafe { CStr::from_ptr(info.target_name) }
        .to_string_lossy()
        .into_owned()
}

fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Creates the output file, writes the header (and the allocator table of `alloc=`) and
/// starts the writer thread over it (with `flight=`'s ring and `max_size=`'s bound).
fn open_output(
    cfg: &Config,
    header: &Header,
    version: u16,
    table: Option<&AllocTable>,
) -> Result<Writer<Output>, String> {
    let out = cfg.out.as_path();
    let file = File::create(out)
        .map_err(|e| format!("out={}: cannot create the output file: {e}", out.display()))?;
    let mut file = Output::new(file, cfg.compress)
        .map_err(|e| format!("out={}: cannot start compressing: {e}", out.display()))?;
    let mut bytes = Vec::new();
    header.encode_version(version, &mut bytes);
    if let Some(t) = table {
        t.encode(header.ptr_width(), &mut bytes);
    }
    file.write_all(&bytes)
        .and_then(|()| file.flush())
        .map_err(|e| format!("out={}: cannot write: {e}", out.display()))?;
    let path = out.display().to_string();
    let on_error = Box::new(move |e: &std::io::Error| {
        stderr_line(&format!(
            "kern-profile: writing {path} failed: {e}; the samples from here on are lost (counted as dropped)"
        ))
    });
    let flight = cfg.flight_secs.map(|secs| FlightConfig {
        window_ns: secs * 1_000_000_000,
        max_bytes: cfg.max_size.unwrap_or(DEFAULT_MAX_BYTES),
    });
    let writer_cfg = WriterConfig {
        flight,
        dump_file: cfg.flight_dump.clone(),
        max_size: cfg.max_size,
        stack_table: cfg.stack_table.then_some(header.ptr_width()),
        ..WriterConfig::default()
    };
    Writer::spawn(file, writer_cfg, on_error)
        .map_err(|e| format!("cannot start the writer thread: {e}"))
}

impl Plugin {
    /// The plugin's state for up to `max` vCPUs, `smp` of them at start.
    fn new(
        cfg: Config,
        arch: Arch,
        smp: usize,
        max: usize,
        writer: Writer<Output>,
        acc: U64Entry,
        alloc: Option<AllocHooks>,
    ) -> Result<Plugin, String> {
        let width = PtrWidth::from_bytes(arch.ptr_width() as usize).map_err(|e| e.to_string())?;
        let vcpus = (0..max as u64)
            .map(|i| Slot(Mutex::new(Vcpu::new(cfg.sampling, arch, cfg.depth, i))))
            .collect();
        let exact = cfg.exact.then(|| Mutex::new(ExactState::default()));
        let sampling = cfg.sampling;
        let window = cfg
            .window
            .clone()
            .map(|r| window::Window::new(r, arch, max));
        Ok(Plugin {
            timed: Timed::new(sampling, max),
            cfg,
            arch,
            width,
            alloc,
            vcpus,
            smp_vcpus: smp,
            acc,
            writer,
            exact,
            blocks: Mutex::new(BlockTable::default()),
            start: Instant::now(),
            exiting: AtomicBool::new(false),
            vcpu_threads: Mutex::new(Vec::new()),
            window,
            tables: None,
            table_refusals: None,
            kernel_os: KernelOs::Unknown,
            tasks: None,
            switches: None,
            switches_seen: AtomicU64::new(0),
            flight_triggers: Vec::new(),
            flight_dumped: AtomicBool::new(false),
            icount: false,
        })
    }
}
