//! `record --attach ADDR`: a QEMU that is already running, sampled through its gdbstub
//! (`-gdb unix:PATH,server=on,wait=off`, or `-s`) at a steady rate into `DIR/cpu.raw`, the same
//! recording the plugin writes (its header says it came from the gdbstub), for the same
//! outputs. Any QEMU from 7.2, any accelerator; the guest runs on afterwards.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kern_profile_format::{
    encode_sample_v2, encode_stats, Header, SampleExtras, SampleRecord, SamplingMode, StopCounts,
    TaskRecord, VERSION_2,
};
use kern_profile_gdb::{sample, Limits, SampleOptions, Sampled, StackOptions, VcpuStack};
use kern_profile_sampler::task::TaskSpec;
use kern_profile_unwind::tables::kernel_tables_of_elf;

use crate::symbolize::KernelFile;
use kern_profile_unwind::{KernelOs, UnwindTables};

use super::kernel::symbol_sources;
use super::outdir::OutputDir;
use super::RecordError;
use crate::job::SymbolSources;

/// What `record --attach` was asked.
#[derive(Debug, Clone)]
pub struct AttachSpec {
    /// `unix:PATH` or `HOST:PORT`.
    pub addr: String,
    pub rate_hz: u32,
    pub duration: Option<Duration>,
    pub depth: usize,
    pub out_dir: PathBuf,
    pub kernel: Option<PathBuf>,
    pub symbols: Vec<PathBuf>,
    /// Name each sample's task where the kernel allows (`--no-tasks`: false).
    pub tasks: bool,
}

/// A finished attachment: the recording in place as `DIR/cpu.raw`.
pub struct Attached {
    pub sources: SymbolSources,
    pub out: OutputDir,
    pub raw: PathBuf,
    pub run: Sampled,
    /// Samples written (a look samples every vCPU).
    pub samples: u64,
}

/// Samples the guest behind `spec.addr` until `spec.duration`, `stop` (Ctrl-C) or the end of
/// QEMU, and keeps the recording. `say` gets the line about tasks before sampling starts.
pub fn record_attach(
    spec: &AttachSpec,
    stop: &AtomicBool,
    say: impl Fn(&str),
) -> Result<(Attached, Option<KernelFile>), RecordError> {
    let (target, kernel) = AttachTarget::prepare(
        spec.kernel.as_deref(),
        &spec.symbols,
        None,
        &spec.out_dir,
        spec.tasks,
    )?;
    if let Some(line) = &target.tasks_line {
        say(line);
    }
    let done = target.sample(&spec.addr, spec.rate_hz, spec.duration, spec.depth, stop)?;
    Ok((done, kernel))
}

/// What sampling through a gdbstub needs before it connects: the kernel's names and unwind
/// tables, and the output directory.
pub struct AttachTarget {
    pub sources: SymbolSources,
    /// The kernel is Linux (`record --gdb` then boots it with nokaslr).
    pub linux: bool,
    tables: Option<Arc<UnwindTables>>,
    /// Which kernel it is, for Linux's layouts in the walks.
    kernel_os: KernelOs,
    /// Where the kernel's tasks are, when samples name them.
    tasks: Option<TaskSpec>,
    /// What to print about tasks before sampling: on, or why not.
    pub tasks_line: Option<String>,
    out: OutputDir,
}

impl AttachTarget {
    /// The kernel: `kernel` (`--kernel`), else `qemu_kernel` (QEMU's `-kernel`, when `record`
    /// starts QEMU itself); `symbols` besides. Prepares `out_dir`. Returns the kernel as read
    /// too, for the drawing. With `tasks`, samples name their task where the kernel allows.
    pub fn prepare(
        kernel: Option<&Path>,
        symbols: &[PathBuf],
        qemu_kernel: Option<&Path>,
        out_dir: &Path,
        tasks: bool,
    ) -> Result<(Self, Option<KernelFile>), RecordError> {
        if kernel.is_none() && qemu_kernel.is_none() && symbols.is_empty() {
            return Err(RecordError::AttachNoKernel);
        }
        let choice = symbol_sources(kernel, symbols, qemu_kernel)?;
        let linux = choice.is_linux();
        let kernel_os = choice
            .loaded
            .as_ref()
            .map_or(KernelOs::Unknown, KernelFile::kernel_os);
        // The tables from the kernel already read, not from the file again.
        let loaded = choice.loaded.as_ref();
        let arch = loaded.and_then(|k| k.elf.as_ref()).and_then(|e| e.arch);
        let vmlinux = loaded.and_then(|k| k.vmlinux.as_deref());
        let tables = match (&choice.sources.elf, vmlinux, arch) {
            (Some(path), Some(elf), Some(arch)) => kernel_tables_of_elf(path, elf, arch)
                .map_err(|e| RecordError::KernelArg {
                    path: path.clone(),
                    why: e.to_string(),
                })?
                .tables
                .map(Arc::new),
            _ => None,
        };
        let (tasks, tasks_line) = super::attach_tasks::find(
            tasks,
            choice.sources.elf.as_deref(),
            vmlinux,
            kernel_os,
            arch,
        );
        // Kept for the drawing (not `Send`: the sampling thread goes without it), its
        // unpacked vmlinux dropped now that the tables are built.
        let kernel = choice.loaded.map(KernelFile::without_vmlinux);
        let target = AttachTarget {
            sources: choice.sources,
            linux,
            tables,
            kernel_os,
            tasks,
            tasks_line,
            out: OutputDir::prepare(out_dir)?,
        };
        Ok((target, kernel))
    }

    /// The recording [`Self::sample`] writes while it samples.
    pub fn raw_partial(&self) -> PathBuf {
        self.out.raw_partial()
    }

    /// Samples the stub at `addr`, `rate_hz` looks a second, until `duration`, `stop` or the
    /// end of QEMU, into `DIR/cpu.raw`.
    pub fn sample(
        self,
        addr: &str,
        rate_hz: u32,
        duration: Option<Duration>,
        depth: usize,
        stop: &AtomicBool,
    ) -> Result<Attached, RecordError> {
        let out = self.out;
        let partial = out.raw_partial();
        let file = std::fs::File::create(&partial).map_err(io(&partial))?;
        let raw_out = RefCell::new(RawOut {
            w: std::io::BufWriter::new(file),
            buf: Vec::new(),
            ptr_width: 8,
            stops: StopCounts::default(),
            samples: 0,
        });
        let opts = SampleOptions {
            rate_hz,
            duration,
            stack: StackOptions {
                depth,
                tables: self.tables,
                kernel_os: self.kernel_os,
                tasks: self.tasks,
                ..StackOptions::default()
            },
            ..SampleOptions::default()
        };
        let started = unix_now_ns();
        let run = sample(
            addr,
            Limits::default(),
            &opts,
            stop,
            |arch, vcpus| {
                let header = Header {
                    arch,
                    sampling: SamplingMode::DelayMicros(1_000_000 / u64::from(rate_hz.max(1))),
                    exact: false,
                    markers: true,
                    at_interrupts: false,
                    gdbstub: true,
                    vcpus,
                    max_depth: depth as u32,
                    start_unix_ns: started,
                    qemu_version: String::new(),
                };
                raw_out.borrow_mut().header(&header)
            },
            |time_ns, vcpus| raw_out.borrow_mut().look(time_ns, vcpus),
        )
        .map_err(RecordError::Gdb);
        let mut raw_out = raw_out.into_inner();
        let samples = raw_out.samples;
        let run = match run.and_then(|r| raw_out.finish().map(|()| r).map_err(io(&partial))) {
            Ok(r) => r,
            Err(e) => {
                out.discard();
                return Err(e);
            }
        };
        if samples == 0 {
            out.discard();
            return Err(RecordError::AttachNoSamples {
                addr: addr.to_string(),
                end: format!("{:?}", run.end),
            });
        }
        let raw = out.raw();
        std::fs::rename(&partial, &raw).map_err(io(&raw))?;
        Ok(Attached {
            sources: self.sources,
            out,
            raw,
            run,
            samples,
        })
    }
}

/// An I/O error about `what`.
fn io(what: &Path) -> impl Fn(std::io::Error) -> RecordError {
    let what = what.display().to_string();
    move |source| RecordError::Io {
        what: what.clone(),
        source,
    }
}

/// The recording being written.
struct RawOut {
    w: std::io::BufWriter<std::fs::File>,
    buf: Vec<u8>,
    ptr_width: usize,
    stops: StopCounts,
    samples: u64,
}

impl RawOut {
    fn header(&mut self, h: &Header) -> std::io::Result<()> {
        self.ptr_width = h.ptr_width();
        self.buf.clear();
        h.encode_version(VERSION_2, &mut self.buf);
        self.w.write_all(&self.buf)
    }

    /// One look: a sample per vCPU.
    fn look(&mut self, time_ns: u64, vcpus: &[VcpuStack]) -> std::io::Result<()> {
        self.buf.clear();
        for (i, v) in vcpus.iter().enumerate() {
            // The vCPU's task, when it changed, before its sample.
            if let Some(task) = v.task {
                let rec = TaskRecord {
                    vcpu: i as u32,
                    time_ns,
                    task,
                };
                rec.encode(&mut self.buf);
            }
            encode(&mut self.buf, self.ptr_width, i as u32, time_ns, v);
            self.stops.add_end(v.stop);
            self.samples += 1;
        }
        self.w.write_all(&self.buf)?;
        // Out at once: `top --gdb` reads the file as it grows (a write a look, 100 a second).
        self.w.flush()
    }

    /// The statistics record, then everything to the file.
    fn finish(&mut self) -> std::io::Result<()> {
        self.buf.clear();
        encode_stats(&mut self.buf, self.samples, 0, &self.stops, &[]);
        self.w.write_all(&self.buf)?;
        self.w.flush()
    }
}

/// One vCPU's look as a sample record.
fn encode(buf: &mut Vec<u8>, ptr_width: usize, vcpu: u32, time_ns: u64, v: &VcpuStack) {
    let rec = SampleRecord {
        vcpu,
        user: v.privilege == kern_profile_format::Privilege::User,
        stop: v.stop,
        time_ns,
        icount: 0,
        pc: v.regs.pc,
        sp: v.regs.sp,
        sp_word: v.sp_word,
        frames: &v.frames,
        entry_resolved: v.by_tables,
    };
    let extras = SampleExtras {
        mode: v.mode,
        privilege: v.privilege,
        return_register: v.return_register,
        page_table_base: v.page_table_base,
    };
    encode_sample_v2(buf, ptr_width, &rec, &extras);
}

fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
