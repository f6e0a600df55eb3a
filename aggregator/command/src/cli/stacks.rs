//! `kern-profile stacks --attach ADDR [ELF]`: every vCPU's named stack, once, through
//! QEMU's gdbstub (any QEMU, any accelerator); the guest runs on.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use kern_profile::boundary;
use kern_profile::filter::SampleFilter;
use kern_profile::input::Sample;
use kern_profile::say;
use kern_profile::stacks::{short_path, KeyBuilder, USER_FRAME};
use kern_profile::symbolize::{KernelFile, SymbolWarning, Symbolizer};
use kern_profile::unnamed::CpuState;
use kern_profile::Options;
use kern_profile_format::{Arch, Privilege};
use kern_profile_gdb::{Limits, Snapshot, StackOptions, VcpuStack};
use kern_profile_unwind::tables::kernel_tables_of_elf;
use kern_profile_unwind::KernelOs;

const STACKS_EXAMPLES: &str = "\
Examples:
  qemu-system-i386 -kernel kernel.elf -gdb unix:/tmp/gdb.sock,server=on,wait=off ...
  kern-profile stacks --attach unix:/tmp/gdb.sock kernel.elf
      where is every vCPU now? A gdb-style backtrace per vCPU; the guest runs on
  kern-profile stacks --attach localhost:1234 --symbols System.map
      QEMU started with -s (tcp::1234), names from a symbol map";

/// Print every vCPU's stack, once, through QEMU's gdbstub
///
/// Connects to the gdbstub of a running QEMU (`-gdb unix:PATH,server=on,wait=off` or `-s`),
/// which stops the guest, reads each vCPU's registers and walks its stack as the plugin does
/// (the kernel's ORC or DWARF CFI tables where it has them, else frame pointers), detaches
/// (the guest runs on) and prints a named stack per vCPU, innermost frame first. Works with any accelerator and QEMU 7.2 or later; no plugin, no gdb.
#[derive(Debug, Args)]
#[command(after_help = STACKS_EXAMPLES)]
pub struct StacksArgs {
    /// The gdbstub: unix:PATH or HOST:PORT
    #[arg(long, value_name = "ADDR", required = true)]
    attach: String,

    /// The kernel that runs: an ELF with symbols (DWARF for inlined frames and lines), or a
    /// Linux image (vmlinuz), named from its kallsyms. Rust (legacy, v0), C++ (Itanium) and
    /// FreePascal names are demangled; a name in no such scheme is shown by its DWARF name
    #[arg(value_name = "ELF", conflicts_with = "kernel")]
    elf: Option<PathBuf>,

    /// The kernel ELF (the same as the positional ELF)
    #[arg(long, value_name = "ELF")]
    kernel: Option<PathBuf>,

    /// Symbol maps or ELFs naming what the ELF does not (nm output, System.map, kallsyms)
    #[arg(long, value_name = "FILE", value_delimiter = ',')]
    symbols: Vec<PathBuf>,

    /// Return addresses per vCPU at most
    #[arg(long, value_name = "N", default_value_t = 64)]
    depth: usize,

    /// Seconds to wait for each reply of the stub
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    timeout: f64,
}

pub fn run(a: StacksArgs) -> Result<ExitCode> {
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.timeout <= 3600.0) {
        bail!("--timeout {}: give 0 to 3600 seconds", a.timeout);
    }
    if !(1..=4096).contains(&a.depth) {
        bail!("--depth {}: give 1 to 4096", a.depth);
    }
    let elf = a.elf.or(a.kernel);
    // Symbols first: the guest stops only once they are ready.
    let kernel = elf.as_deref().map(KernelFile::load).transpose()?;
    // The kernel's unwind tables (ORC, DWARF CFI), from the kernel read once: whole stacks
    // without frame pointers.
    let arch = kernel
        .as_ref()
        .and_then(|k| k.elf.as_ref())
        .and_then(|e| e.arch);
    let tables = match (
        &elf,
        kernel.as_ref().and_then(|k| k.vmlinux.as_deref()),
        arch,
    ) {
        (Some(path), Some(bytes), Some(arch)) => {
            let k = kernel_tables_of_elf(path, bytes, arch)?;
            if k.remarked {
                let w = SymbolWarning::RemarkedElf { path: path.clone() };
                say!("kern-profile: note: {w}");
            }
            k.tables.map(Arc::new)
        }
        _ => None,
    };
    // Linux's layouts in the walks only on Linux (its symbols say so).
    let kernel_os = kernel
        .as_ref()
        .map_or(KernelOs::Unknown, KernelFile::kernel_os);
    let mut sym = match (kernel, a.symbols.is_empty()) {
        (None, true) => None,
        (kernel, _) => Some(Symbolizer::with_kernel(
            kernel.zip(elf.as_deref()),
            &a.symbols,
        )?),
    };
    let timeout = Duration::from_secs_f64(a.timeout);
    let limits = Limits {
        reply_timeout: timeout,
        hello_timeout: timeout.min(Duration::from_secs(3)),
        ..Limits::default()
    };
    let opts = StackOptions {
        depth: a.depth,
        tables,
        kernel_os,
        ..StackOptions::default()
    };
    // The library's errors name the address.
    let snap = kern_profile_gdb::stacks(&a.attach, limits, opts)?;
    if let Some(s) = &sym {
        s.check_arch(snap.arch)?;
    }
    let mut out = String::new();
    for (i, v) in snap.vcpus.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_vcpu(&mut out, i as u32, v, snap.arch, sym.as_mut());
    }
    print!("{out}");
    say!("{}", summary(&snap));
    Ok(ExitCode::SUCCESS)
}

fn summary(s: &Snapshot) -> String {
    format!(
        "kern-profile: {} vCPU(s), {} guest stopped for {:.1} ms ({} requests{}); running again",
        s.vcpus.len(),
        s.arch.name(),
        s.stopped.as_secs_f64() * 1e3,
        s.requests,
        if s.no_ack {
            ""
        } else {
            ", with acknowledgements"
        },
    )
}

fn privilege_name(p: Privilege) -> &'static str {
    match p {
        Privilege::Kernel => "kernel",
        Privilege::User => "user",
        Privilege::Firmware => "firmware",
        Privilege::Unknown => "privilege unknown",
    }
}

/// One vCPU: a header line, then its frames like gdb's `bt`.
fn print_vcpu(out: &mut String, i: u32, v: &VcpuStack, arch: Arch, sym: Option<&mut Symbolizer>) {
    let w = arch.ptr_width() as usize * 2;
    let _ = write!(
        out,
        "vCPU {i} (thread {}): {}, pc {:#x}, sp {:#x}, fp {:#x}",
        v.thread.raw,
        privilege_name(v.privilege),
        v.regs.pc,
        v.regs.sp,
        v.regs.fp
    );
    if let Some(b) = v.page_table_base {
        let _ = write!(out, ", page table {b:#x}");
    }
    out.push('\n');
    let mut addrs: Vec<u64> = Vec::with_capacity(v.frames.len() + 3);
    match sym {
        Some(sym) => {
            // The aggregator's key: the [SP] and return-register fixes, the cut at a
            // return address that is no code.
            let filter = SampleFilter::from_options(&Options::default());
            let mut all = vec![v.regs.pc];
            all.extend_from_slice(&v.frames);
            let sample = Sample {
                vcpu: i,
                user: v.privilege == Privilege::User,
                time_ns: None,
                sp_word: v.sp_word,
                return_register: v.return_register,
                stop: None,
                addrs: &all,
                cpu: CpuState {
                    firmware: v.privilege == Privilege::Firmware,
                    ..CpuState::default()
                },
                page_table: None,
                task: None,
                stack: None,
                weight: 1,
            };
            KeyBuilder::new(&filter)
                .with_markers(true)
                .build(&sample, sym, &mut addrs);
            addrs.remove(0);
            print_frames(out, &addrs, w, Some(sym));
        }
        None => {
            addrs.push(v.regs.pc);
            addrs.extend_from_slice(&v.frames);
            print_frames(out, &addrs, w, None);
        }
    }
    let _ = write!(out, "    (walk stopped: {}", v.stop.name());
    if let Some((at, reply)) = &v.refused {
        let _ = write!(out, "; the stub could not read {at:#x}: {reply}");
    }
    out.push_str(")\n");
}

fn print_frames(out: &mut String, addrs: &[u64], w: usize, mut sym: Option<&mut Symbolizer>) {
    let mut n = 0;
    // Past a kernel entry, a frame outside the kernel is the interrupted program's.
    let mut entered = false;
    for (i, &a) in addrs.iter().enumerate() {
        let Some(probe) = boundary::probe(addrs, i, true) else {
            entered |= a == kern_profile_format::frame_marker::KERNEL_ENTRY;
            let inner: Vec<String> = match (i, sym.as_deref_mut()) {
                (1.., Some(s)) => match boundary::probe(addrs, i - 1, true) {
                    Some(p) => s.frames(p).iter().map(|f| f.function.to_string()).collect(),
                    None => Vec::new(),
                },
                _ => Vec::new(),
            };
            let _ = writeln!(out, "    -- {} --", boundary::name(a, &inner));
            continue;
        };
        let frames = sym.as_deref_mut().map(|s| s.frames(probe));
        match frames.as_deref() {
            Some(fs) if !fs.is_empty() => {
                for f in fs.iter() {
                    let _ = write!(out, "#{n:<3} 0x{a:0w$x} in {}", f.function);
                    if let (Some(file), Some(line)) = (&f.file, f.line) {
                        let _ = write!(out, " ({}:{line})", short_path(file));
                    }
                    if f.inlined {
                        out.push_str(" [inlined]");
                    }
                    out.push('\n');
                    n += 1;
                }
            }
            _ => {
                // As the reports name it: below the kernel, a user program's frame.
                let user = sym
                    .as_deref()
                    .is_some_and(|s| s.below_kernel(probe) || (entered && !s.kernel_holds(probe)));
                let name = if user { USER_FRAME } else { "??" };
                let _ = writeln!(out, "#{n:<3} 0x{a:0w$x} in {name}");
                n += 1;
            }
        }
    }
}
