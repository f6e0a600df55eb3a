//! The options `record` and `top` share: how the plugin samples, and where things are.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;
use kern_profile::record::{ConsoleSpec, Sampling, SessionSpec};
use kern_profile_format::limits::{MAX_DELAY_US, MAX_DEPTH, MAX_PERIOD};

/// The plugin's sampling arguments.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Sampling")]
pub struct SamplingArgs {
    /// Sample each vCPU every US microseconds of host time on average (the plugin's
    /// `delay=`; default 10). Weighs code by the host time QEMU takes to emulate it: port,
    /// MMIO and page-table code weigh more than their instructions, several points on real
    /// kernels; --period gives instruction shares. The timer keeps under a tenth of a host
    /// core, so where its wake-ups are costly (a virtual machine: about every 200 µs) it
    /// ticks less often than asked, and says so. Data: about 75 bytes a sample at 10
    /// frames, so up to 7.5 MB/s per busy vCPU at 10; a larger US or a smaller --depth
    /// writes less
    #[arg(long, value_name = "US", conflicts_with = "period",
          value_parser = clap::value_parser!(u64).range(1..=MAX_DELAY_US))]
    pub delay: Option<u64>,

    /// Sample each vCPU every N guest instructions instead (`period=`): instruction shares;
    /// two runs give the same samples only if the guest is deterministic (no disk, network
    /// or timer-driven scheduling)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_PERIOD))]
    pub period: Option<u64>,

    /// Where a --delay tick's sample is taken (`trigger=`): `block`, the vCPU's next block
    /// entry (default: every translated block tests an arm flag); or `interrupt`, its next
    /// interrupt, at the interrupted instruction, with no instrumentation in any
    /// block (QEMU 10.2 or newer). Like timer-interrupt sampling on hardware without NMIs, it
    /// cannot land where interrupts are masked: such code is sampled where it unmasks, and
    /// the report says how long samples waited. The guest must take interrupts (a timer);
    /// --delay then defaults to 1000 (ticks faster than the guest's timer only cost host
    /// CPU); not with --period. Samples weigh code by host time, as --delay does; under
    /// QEMU's -icount (one vCPU) the guest's timer follows instructions and each sample is
    /// the interrupted instruction, so shares are the exact counts' (QEMU itself runs
    /// slower under -icount: --period is the cheaper way to instruction shares)
    #[arg(long, value_name = "WHERE", value_parser = ["block", "interrupt"], conflicts_with = "period")]
    pub trigger: Option<String>,

    /// At most N frames per stack (`depth=`; default 64)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_DEPTH as i64))]
    pub depth: Option<u32>,

    /// Sample only while FUNCTION is on the vCPU's stack (`window=`), e.g. a benchmark loop
    /// inside a long boot; no cost outside it. FUNCTION is named as --focus takes it and
    /// looked up in the kernel ELF, or given as 0xSTART-0xEND. Tracked by the function's
    /// entry and its returns: a task switched away inside it keeps the window open
    #[arg(long, value_name = "FUNCTION")]
    pub window: Option<String>,
}

impl SamplingArgs {
    pub fn sampling(&self, exact: bool) -> Sampling {
        Sampling {
            delay_us: self.delay,
            period: self.period,
            at_interrupts: self.trigger.as_deref() == Some("interrupt"),
            depth: self.depth,
            exact,
            window: self.window.clone(),
            ..Sampling::default()
        }
    }
}

/// Where the session's inputs and outputs are.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Session")]
pub struct LaunchArgs {
    /// Directory of the recording (cpu.raw) and its outputs; created if needed
    #[arg(short, long, value_name = "DIR", default_value = "kern-profile-out")]
    pub output: PathBuf,

    /// The kernel to name samples with, when QEMU's -kernel cannot: an ELF with symbols (a
    /// vmlinux with DWARF names inlined frames too), or a Linux image (vmlinuz, Image.gz),
    /// named from its kallsyms. Rust (legacy, v0), C++ (Itanium) and FreePascal names are
    /// demangled; a name in no such scheme is shown by its DWARF name. Default: QEMU's -kernel
    #[arg(long, value_name = "ELF")]
    pub kernel: Option<PathBuf>,

    /// Further symbol sources, looked up in order after the ELF, or alone: text maps
    /// (System.map, nm output, /proc/kallsyms) or ELFs (their symbol tables, e.g. Linux's
    /// arch/x86/boot/compressed/vmlinux); comma-separated, or --symbols repeated
    #[arg(long, value_name = "FILE[,FILE...]", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub symbols: Vec<PathBuf>,

    /// User programs (ELFs) the guest runs: their samples are named from them, and the
    /// plugin walks their stacks by their `.eh_frame` where they have no frame pointers
    /// (`user=`); comma-separated, or --user repeated
    #[arg(long, value_name = "ELF[,ELF...]", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub user: Vec<PathBuf>,

    /// The plugin to load. Default: kern-profile.so beside this binary, then
    /// ../lib/kern-profile/kern-profile.so, then the copy built into this binary
    #[arg(long, value_name = "SO")]
    pub plugin: Option<PathBuf>,

    /// The QEMU command, after `--`: qemu-system-ARCH and its arguments
    #[arg(last = true, value_name = "QEMU COMMAND")]
    pub qemu: Vec<OsString>,
}

impl LaunchArgs {
    pub fn spec(
        &self,
        command: &'static str,
        sampling: Sampling,
        console: ConsoleSpec,
    ) -> SessionSpec {
        SessionSpec {
            command,
            qemu: self.qemu.clone(),
            sampling,
            out_dir: self.output.clone(),
            kernel: self.kernel.clone(),
            symbols: self.symbols.clone(),
            user: self.user.clone(),
            plugin: self.plugin.clone(),
            console,
            // `top` reads its recording as it grows, a block at a time: plain.
            compress: command == "record",
        }
    }
}
