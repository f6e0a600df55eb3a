//! The plugin's arguments: `-plugin kern-profile.so,out=PATH[,delay=N|period=N][,depth=N][,exact=on|off]`
//! `[,trigger=block|interrupt][,window=0xSTART-0xEND][,elf=FILE][,user=FILE...][,alloc=SPEC,elf=FILE|symbols=FILE]`
//! `[,tasks=auto|on|off|example|POINTER->ID,NAME][,switches=auto|on|off|example|FUNCTION]`
//! `[,compress=on|off][,stacks=on|off][,flight=SECS][,flight_trigger=panic|FUNCTION...]`
//! `[,max_size=BYTES]`.
//!
//! `elf=` names the kernel (an ELF, or a Linux image holding one: a bzImage): its ORC and
//! DWARF CFI tables unwind the kernel's stacks where it has no frame pointers, and `alloc=`
//! finds its symbols there. `user=` (repeated, one per program) names user programs: their
//! `.eh_frame` unwinds their stacks where they have no frame pointers.

use std::ops::Range;
use std::path::PathBuf;

use kern_profile_format::SamplingMode;

use kern_profile_sampler::alloc_hooks::SymbolSource;
use kern_profile_sampler::task::description::{
    is_identifier, TaskDescription, EXAMPLE_SWITCH_FUNCTION,
};
use kern_profile_sampler::task::TaskDescriptionError;

/// Default `delay=` in host microseconds (the original C plugin's interface).
pub const DEFAULT_DELAY_US: u64 = 10;
/// Default `delay=` with `trigger=interrupt`: samples come no faster than the guest's timer
/// (1 ms at 1 kHz, 4 ms at Linux's HZ=250), so faster ticks only cost the host CPU (sid's
/// QEMU, i386 example kernel: 1.11x CPU at delay=10 against 1.01x at 1000, for 950 and 856
/// samples a second; scripts/bench.sh --only interrupt).
pub const DEFAULT_INTERRUPT_DELAY_US: u64 = 1000;
/// Default `depth=`.
pub const DEFAULT_DEPTH: u32 = 64;
pub use kern_profile_format::limits::{MAX_DELAY_US, MAX_DEPTH, MAX_PERIOD};

/// The parsed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub out: PathBuf,
    /// `delay=` or `period=`, as the raw file's header stores it.
    pub sampling: SamplingMode,
    /// Maximum return addresses per sample.
    pub depth: u32,
    /// Also count every translated block's executions exactly.
    pub exact: bool,
    /// Sample only while the function at this address range is on the vCPU's stack.
    pub window: Option<Range<u64>>,
    /// `alloc=`: hook allocator functions.
    pub alloc: Option<AllocConfig>,
    /// `elf=`: the kernel, whose unwind tables the stack walks use.
    pub kernel: Option<PathBuf>,
    /// `user=`, in the order given: user programs, whose CFI the walks use in their code.
    pub user: Vec<PathBuf>,
    /// `trigger=interrupt`: a `delay=` tick's sample is taken at the vCPU's next interrupt,
    /// at the interrupted PC (QEMU's discontinuity callback, QEMU 10.2 and later), and no
    /// translated block is instrumented for sampling.
    pub at_interrupts: bool,
    /// `tasks=`: name the guest task of each sample.
    pub tasks: AutoOnOff,
    /// `switches=`: record each task switch with the leaving task's stack (off-CPU time).
    pub switches: AutoOnOff,
    /// `tasks=POINTER->ID,NAME` (or `tasks=example`): another kernel's tasks, described by
    /// names its DWARF has; `tasks` is then `On`.
    pub task_description: Option<TaskDescription>,
    /// `switches=FUNCTION` (or `switches=example`): the switch function by name, its first
    /// two arguments the leaving and the next task (C convention); `switches` is then `On`.
    pub switch_function: Option<String>,
    /// `compress=on`: the output is one zstd stream, flushed after every batch
    /// (`kern_profile_format::compressed`). Off by default: `kern-profile record` turns it on.
    pub compress: bool,
    /// `flight=SECS`: keep only the last SECS of samples in memory, written at exit or when
    /// a `flight_trigger=` function runs (kern_profile_sampler::flight).
    pub flight_secs: Option<u64>,
    /// `flight_trigger=` (repeated): the functions that write the flight ring (`panic`: the
    /// preset of kern_profile_sampler::flight_trigger).
    pub flight_triggers: Vec<String>,
    /// `flight_dump=PATH`: with `flight=`, a file whose appearance writes the ring (looked
    /// for five times a second, removed once seen): `kern-profile record` makes it on SIGUSR1.
    pub flight_dump: Option<PathBuf>,
    /// `max_size=BYTES` (suffix K, M or G): no batch is written past this many bytes.
    pub max_size: Option<u64>,
    /// `stacks=on`: each distinct stack written once, samples as references to it (format
    /// version 4). Off by default: `kern-profile record` turns it on.
    pub stack_table: bool,
}

/// Longest `flight=` window: a day.
pub const MAX_FLIGHT_SECS: u64 = 86_400;

/// What `tasks=` and `switches=` ask of `elf=` (see [`Config`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskArgs<'a> {
    pub tasks: AutoOnOff,
    pub switches: AutoOnOff,
    pub description: Option<&'a TaskDescription>,
    pub switch_function: Option<&'a str>,
    /// `trigger=interrupt`: `switches=auto` places no hook then (see `switches::find`).
    pub at_interrupts: bool,
}

impl Config {
    pub fn task_args(&self) -> TaskArgs<'_> {
        TaskArgs {
            tasks: self.tasks,
            switches: self.switches,
            description: self.task_description.as_ref(),
            switch_function: self.switch_function.as_deref(),
            at_interrupts: self.at_interrupts,
        }
    }
}

/// `tasks=`: whether samples carry the guest task they ran in (format record kind 9);
/// `switches=`: whether task switches are recorded (kind 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AutoOnOff {
    /// When `elf=` is a Linux image whose BTF and kallsyms tell where its tasks are (and,
    /// for switches, its switch function); otherwise a line at start says why not. The
    /// default.
    #[default]
    Auto,
    /// Required: QEMU stops at start when the tasks (or the switch function) cannot be found.
    On,
    Off,
}

fn auto_on_off(value: &str) -> Option<AutoOnOff> {
    match value {
        "auto" => Some(AutoOnOff::Auto),
        "on" | "yes" | "true" => Some(AutoOnOff::On),
        "off" | "no" | "false" => Some(AutoOnOff::Off),
        _ => None,
    }
}

/// `tasks=`: auto, on, off, or a description (`example` is the example kernels').
fn tasks_value(value: &str) -> Result<(AutoOnOff, Option<TaskDescription>), ConfigError> {
    match auto_on_off(value) {
        Some(v) => Ok((v, None)),
        None => Ok((AutoOnOff::On, Some(TaskDescription::parse(value)?))),
    }
}

/// `switches=`: auto, on, off, or the switch function's name (`example` is the example
/// kernels').
fn switches_value(value: &str) -> Result<(AutoOnOff, Option<String>), ConfigError> {
    match (auto_on_off(value), value) {
        (Some(v), _) => Ok((v, None)),
        (None, "example") => Ok((AutoOnOff::On, Some(EXAMPLE_SWITCH_FUNCTION.into()))),
        (None, f) if is_identifier(f) => Ok((AutoOnOff::On, Some(f.into()))),
        _ => Err(bad(
            "switches",
            value,
            "must be 'auto', 'on', 'off', 'example' or the name of the kernel's switch function",
        )),
    }
}

/// `alloc=SPEC` with the kernel's symbols (`elf=` or `symbols=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocConfig {
    /// A preset name or a SPEC file (see [`kern_profile_sampler::alloc_hooks::spec`]).
    pub spec: String,
    pub symbols: SymbolSource,
}

/// What is wrong with the arguments. Each message names the argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown argument '{0}' (known: out=PATH, delay=MICROSECONDS, period=INSTRUCTIONS, depth=N, exact=on|off|only, trigger=block|interrupt, window=0xSTART-0xEND, alloc=SPEC, elf=FILE, user=FILE, symbols=FILE, tasks=auto|on|off|example|POINTER->ID,NAME, switches=auto|on|off|example|FUNCTION, compress=on|off, stacks=on|off, flight=SECS, flight_trigger=panic|FUNCTION, flight_dump=PATH, max_size=BYTES)")]
    Unknown(String),
    #[error(transparent)]
    Tasks(#[from] TaskDescriptionError),
    #[error("argument '{0}' needs a value: {0}=...")]
    NoValue(String),
    #[error("argument '{0}' is given twice")]
    Duplicate(&'static str),
    #[error("{arg}={value}: {why}")]
    BadValue {
        arg: &'static str,
        value: String,
        why: String,
    },
    #[error("'delay' and 'period' exclude each other: sample by host time (delay=) or by guest instructions (period=)")]
    DelayAndPeriod,
    #[error("exact=only counts blocks without sampling: drop 'delay'/'period', or use exact=on to sample too")]
    OnlyAndSampling,
    #[error("trigger=interrupt samples by host time (delay=) at each vCPU's next interrupt, and period= by guest instructions: drop 'period', or drop 'trigger'")]
    TriggerWithPeriod,
    #[error("trigger=interrupt samples, and exact=only samples nothing: use exact=on, or drop 'trigger'")]
    TriggerWithoutSampling,
    #[error(
        "window= limits sampling, and exact=only samples nothing: use exact=on, or drop 'window'"
    )]
    WindowWithoutSampling,
    #[error("argument 'out' is required: out=PATH names the output file")]
    NoOut,
    #[error("alloc= needs the kernel's symbols: add elf=KERNEL.ELF or symbols=FILE (System.map, nm output, /proc/kallsyms)")]
    AllocWithoutSymbols,
    #[error("'{0}' gives symbols for alloc=, which is missing: alloc=rust|linux|libc|SPEC-FILE")]
    SymbolsWithoutAlloc(&'static str),
    #[error("'elf' and 'symbols' exclude each other: give one place to find the kernel's symbols")]
    ElfAndSymbols,
    #[error("tasks=on and switches=on read the guest's tasks where elf= says they are: add elf=KERNEL (a Linux image or vmlinux with BTF)")]
    TasksWithoutElf,
    #[error("{0}= writes the flight recorder's ring, and there is none: add flight=SECS")]
    TriggerWithoutFlight(&'static str),
    #[error("flight_trigger= finds its functions in the kernel's symbols: add elf=KERNEL")]
    TriggerWithoutElf,
    #[error("exact=on counts every block of the whole run, and flight= keeps only its last seconds: drop one of them")]
    FlightWithExact,
    #[error("switches=on records which task leaves and which runs, and tasks=off names none: drop one of them")]
    SwitchesWithoutTasks,
}

fn bad(arg: &'static str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::BadValue {
        arg,
        value: value.to_string(),
        why: why.into(),
    }
}

fn number(arg: &'static str, value: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
    let n: u64 = value
        .parse()
        .map_err(|_| bad(arg, value, "not a whole number"))?;
    if n < min || n > max {
        return Err(bad(arg, value, format!("must be between {min} and {max}")));
    }
    Ok(n)
}

/// `exact=`: off, on (beside sampling), or only (no sampling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exact {
    Off,
    On,
    Only,
}

fn exact_value(value: &str) -> Result<Exact, ConfigError> {
    match value {
        "on" | "yes" | "true" => Ok(Exact::On),
        "off" | "no" | "false" => Ok(Exact::Off),
        "only" => Ok(Exact::Only),
        _ => Err(bad("exact", value, "must be 'on', 'off' or 'only'")),
    }
}

fn on_off(arg: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "on" | "yes" | "true" => Ok(true),
        "off" | "no" | "false" => Ok(false),
        _ => Err(bad(arg, value, "must be 'on' or 'off'")),
    }
}

fn set<T>(slot: &mut Option<T>, name: &'static str, v: T) -> Result<(), ConfigError> {
    if slot.replace(v).is_some() {
        return Err(ConfigError::Duplicate(name));
    }
    Ok(())
}

impl Config {
    /// Parses QEMU's `key=value` plugin arguments.
    pub fn parse<'a, I>(args: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = &'a str>,
    {
        let mut out = None;
        let mut delay = None;
        let mut period = None;
        let mut depth = None;
        let mut exact = None;
        let mut window = None;
        let mut alloc = None;
        let mut elf = None;
        let mut symbols = None;
        let mut trigger = None;
        let mut tasks = None;
        let mut switches = None;
        let mut compress = None;
        let mut stacks = None;
        let mut flight = None;
        let mut max_size = None;
        let mut flight_triggers = Vec::new();
        let mut flight_dump = None;
        let mut user = Vec::new();
        for arg in args {
            let Some((key, value)) = arg.split_once('=') else {
                return Err(match arg {
                    "out" | "delay" | "period" | "depth" | "exact" | "window" | "alloc" | "elf"
                    | "symbols" | "trigger" | "user" | "tasks" | "switches" | "compress"
                    | "flight" | "flight_trigger" | "max_size" | "stacks" | "flight_dump" => {
                        ConfigError::NoValue(arg.to_string())
                    }
                    _ => ConfigError::Unknown(arg.to_string()),
                });
            };
            match key {
                "out" => {
                    if value.is_empty() {
                        return Err(bad("out", value, "the path is empty"));
                    }
                    set(&mut out, "out", PathBuf::from(value))?
                }
                "delay" => set(
                    &mut delay,
                    "delay",
                    number("delay", value, 1, MAX_DELAY_US)?,
                )?,
                "period" => set(
                    &mut period,
                    "period",
                    number("period", value, 1, MAX_PERIOD)?,
                )?,
                "depth" => set(
                    &mut depth,
                    "depth",
                    number("depth", value, 1, MAX_DEPTH as u64)? as u32,
                )?,
                "exact" => set(&mut exact, "exact", exact_value(value)?)?,
                "trigger" => set(&mut trigger, "trigger", trigger_value(value)?)?,
                "tasks" => set(&mut tasks, "tasks", tasks_value(value)?)?,
                "switches" => set(&mut switches, "switches", switches_value(value)?)?,
                "compress" => set(&mut compress, "compress", on_off("compress", value)?)?,
                "stacks" => set(&mut stacks, "stacks", on_off("stacks", value)?)?,
                "flight" => set(
                    &mut flight,
                    "flight",
                    number("flight", value, 1, MAX_FLIGHT_SECS)?,
                )?,
                "flight_dump" => set(
                    &mut flight_dump,
                    "flight_dump",
                    PathBuf::from(non_empty("flight_dump", value)?),
                )?,
                "flight_trigger" => {
                    flight_triggers.push(non_empty("flight_trigger", value)?);
                }
                "max_size" => set(
                    &mut max_size,
                    "max_size",
                    kern_profile_format::limits::parse_size(value)
                        .map_err(|why| bad("max_size", value, why))?,
                )?,
                "window" => set(
                    &mut window,
                    "window",
                    crate::window_fn::parse_window(value)
                        .map_err(|why| bad("window", value, why))?,
                )?,
                "alloc" => set(&mut alloc, "alloc", non_empty("alloc", value)?)?,
                "elf" => set(&mut elf, "elf", PathBuf::from(non_empty("elf", value)?))?,
                "user" => user.push(PathBuf::from(non_empty("user", value)?)),
                "symbols" => set(
                    &mut symbols,
                    "symbols",
                    PathBuf::from(non_empty("symbols", value)?),
                )?,
                _ => return Err(ConfigError::Unknown(arg.to_string())),
            }
        }
        let exact = exact.unwrap_or(Exact::Off);
        let (tasks, task_description) = tasks.unwrap_or_default();
        let (switches, switch_function) = switches.unwrap_or_default();
        if (tasks == AutoOnOff::On || switches == AutoOnOff::On) && elf.is_none() {
            return Err(ConfigError::TasksWithoutElf);
        }
        if switches == AutoOnOff::On && tasks == AutoOnOff::Off {
            return Err(ConfigError::SwitchesWithoutTasks);
        }
        if !flight_triggers.is_empty() && flight.is_none() {
            return Err(ConfigError::TriggerWithoutFlight("flight_trigger"));
        }
        if flight_dump.is_some() && flight.is_none() {
            return Err(ConfigError::TriggerWithoutFlight("flight_dump"));
        }
        if !flight_triggers.is_empty() && elf.is_none() {
            return Err(ConfigError::TriggerWithoutElf);
        }
        if flight.is_some() && exact != Exact::Off {
            return Err(ConfigError::FlightWithExact);
        }
        let alloc = alloc_config(alloc, elf.clone(), symbols)?;
        let at_interrupts = trigger.unwrap_or(false);
        let sampling = match (delay, period, exact) {
            (Some(_), Some(_), _) => return Err(ConfigError::DelayAndPeriod),
            (_, Some(_), _) if at_interrupts => return Err(ConfigError::TriggerWithPeriod),
            (None, None, Exact::Only) if at_interrupts => {
                return Err(ConfigError::TriggerWithoutSampling)
            }
            (None, None, Exact::Only) => SamplingMode::Off,
            // alloc= alone records allocations only; delay=, period= or trigger= samples too.
            (None, None, _) if alloc.is_some() && trigger.is_none() => SamplingMode::Off,
            (_, _, Exact::Only) => return Err(ConfigError::OnlyAndSampling),
            (None, Some(n), _) => SamplingMode::PeriodInstructions(n),
            (d, None, _) => SamplingMode::DelayMicros(d.unwrap_or(match at_interrupts {
                true => DEFAULT_INTERRUPT_DELAY_US,
                false => DEFAULT_DELAY_US,
            })),
        };
        if window.is_some() && sampling == SamplingMode::Off {
            return Err(ConfigError::WindowWithoutSampling);
        }
        Ok(Config {
            out: out.ok_or(ConfigError::NoOut)?,
            sampling,
            depth: depth.unwrap_or(DEFAULT_DEPTH),
            exact: exact != Exact::Off,
            window,
            alloc,
            kernel: elf,
            user,
            at_interrupts,
            tasks,
            switches,
            task_description,
            switch_function,
            compress: compress.unwrap_or(false),
            flight_secs: flight,
            flight_triggers,
            flight_dump,
            max_size,
            stack_table: stacks.unwrap_or(false),
        })
    }
}

/// `trigger=`: true for `interrupt`.
fn trigger_value(value: &str) -> Result<bool, ConfigError> {
    match value {
        "interrupt" => Ok(true),
        "block" => Ok(false),
        _ => Err(bad("trigger", value, "must be 'block' or 'interrupt'")),
    }
}

fn non_empty(arg: &'static str, value: &str) -> Result<String, ConfigError> {
    if value.is_empty() {
        return Err(bad(arg, value, "the value is empty"));
    }
    Ok(value.to_string())
}

fn alloc_config(
    spec: Option<String>,
    elf: Option<PathBuf>,
    symbols: Option<PathBuf>,
) -> Result<Option<AllocConfig>, ConfigError> {
    let source = match (elf, symbols) {
        (Some(_), Some(_)) => return Err(ConfigError::ElfAndSymbols),
        (Some(p), None) => Some(SymbolSource::Elf(p)),
        (None, Some(p)) => Some(SymbolSource::Map(p)),
        (None, None) => None,
    };
    match (spec, source) {
        (Some(spec), Some(symbols)) => Ok(Some(AllocConfig { spec, symbols })),
        (Some(_), None) => Err(ConfigError::AllocWithoutSymbols),
        // The kernel's unwind tables alone.
        (None, Some(SymbolSource::Elf(_))) => Ok(None),
        (None, Some(SymbolSource::Map(_))) => Err(ConfigError::SymbolsWithoutAlloc("symbols")),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Config, ConfigError> {
        Config::parse(s.split(',').filter(|a| !a.is_empty()))
    }

    #[test]
    fn user_programs_in_the_order_given() {
        let c = parse("out=o,elf=k.elf,user=a.elf,user=b.elf").unwrap();
        assert_eq!(c.user, [PathBuf::from("a.elf"), PathBuf::from("b.elf")]);
        assert_eq!(
            parse("out=o,user").unwrap_err(),
            ConfigError::NoValue("user".into())
        );
        assert!(matches!(
            parse("out=o,user=").unwrap_err(),
            ConfigError::BadValue { arg: "user", .. }
        ));
    }

    #[test]
    fn original_interface_and_defaults() {
        let c = parse("out=raw-data,delay=10").unwrap();
        assert_eq!(
            c,
            Config {
                out: "raw-data".into(),
                sampling: SamplingMode::DelayMicros(10),
                depth: 64,
                exact: false,
                window: None,
                alloc: None,
                kernel: None,
                user: Vec::new(),
                at_interrupts: false,
                tasks: AutoOnOff::Auto,
                switches: AutoOnOff::Auto,
                task_description: None,
                switch_function: None,
                compress: false,
                flight_secs: None,
                flight_triggers: Vec::new(),
                flight_dump: None,
                max_size: None,
                stack_table: false,
            }
        );
        assert!(parse("out=o,compress=on").unwrap().compress);
        assert!(matches!(
            parse("out=o,compress=fast").unwrap_err(),
            ConfigError::BadValue {
                arg: "compress",
                ..
            }
        ));
        assert_eq!(
            parse("out=o,compress=on,compress=off").unwrap_err(),
            ConfigError::Duplicate("compress")
        );
        let c = parse("out=/tmp/x").unwrap();
        assert_eq!(c.sampling, SamplingMode::DelayMicros(DEFAULT_DELAY_US));
        assert_eq!(c.sampling, SamplingMode::DelayMicros(10));
    }

    #[test]
    fn all_arguments() {
        let c = parse("out=a=b,period=10000,depth=16,exact=on").unwrap();
        assert_eq!(c.out, PathBuf::from("a=b"));
        assert_eq!(c.sampling, SamplingMode::PeriodInstructions(10000));
        assert_eq!(c.depth, 16);
        assert!(c.exact);
        assert!(!parse("out=x,exact=off").unwrap().exact);
        assert!(parse("out=x,exact=yes").unwrap().exact);
        let only = parse("out=x,exact=only").unwrap();
        assert_eq!((only.sampling, only.exact), (SamplingMode::Off, true));
        assert_eq!(parse("out=x,depth=1").unwrap().depth, 1);
        assert_eq!(parse("out=x,depth=1024").unwrap().depth, 1024);
        assert_eq!(
            parse("out=x,window=0x1000-0x1080").unwrap().window,
            Some(0x1000..0x1080)
        );
    }

    fn err(s: &str) -> String {
        parse(s).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_argument() {
        assert!(err("out=x,bogus=1").contains("unknown argument 'bogus=1'"));
        assert!(err("out=x,verbose").contains("unknown argument 'verbose'"));
        assert!(err("out=x,delay").contains("argument 'delay' needs a value"));
        assert!(err("delay=5").contains("argument 'out' is required"));
        assert!(err("out=").starts_with("out=: "));
        assert!(err("out=x,delay=abc").starts_with("delay=abc: not a whole number"));
        assert!(err("out=x,delay=-1").starts_with("delay=-1:"));
        assert!(err("out=x,delay=0").starts_with("delay=0: must be between 1 and"));
        assert!(err("out=x,period=0").starts_with("period=0:"));
        assert!(err("out=x,period=1e6").starts_with("period=1e6:"));
        assert!(err("out=x,depth=0").starts_with("depth=0: must be between 1 and 1024"));
        assert!(err("out=x,depth=1025").starts_with("depth=1025:"));
        assert!(err("out=x,exact=maybe").starts_with("exact=maybe: must be 'on', 'off' or 'only'"));
        assert!(
            err("out=x,exact=only,period=5").contains("exact=only counts blocks without sampling")
        );
        assert!(err("out=x,delay=5,exact=only").contains("exact=only"));
        assert!(err("out=x,delay=10,period=100").contains("'delay' and 'period'"));
        assert!(err("out=x,period=100,delay=10").contains("'delay' and 'period'"));
        assert!(err("out=x,out=y").contains("argument 'out' is given twice"));
        assert!(err("out=x,depth=3,depth=4").contains("'depth' is given twice"));
        assert!(err("out=x,window=0x20-0x10").starts_with("window=0x20-0x10: the range is empty"));
        assert!(err("out=x,window=main").starts_with("window=main: expected 0xSTART-0xEND"));
        assert!(err("out=x,exact=only,window=0x1-0x2").contains("exact=only samples nothing"));
        assert!(err("out=x,trigger=nmi").starts_with("trigger=nmi: must be 'block' or 'interrupt'"));
        assert!(err("out=x,trigger").contains("argument 'trigger' needs a value"));
        assert!(err("out=x,trigger=interrupt,period=100").contains("drop 'period'"));
        assert!(err("out=x,period=100,trigger=interrupt")
            .contains("trigger=interrupt samples by host time"));
        assert!(err("out=x,trigger=interrupt,exact=only").contains("exact=only samples nothing"));
        assert!(err("out=x,tasks=maybe").starts_with(
            "tasks=maybe: no '->': expected 'auto', 'on', 'off', 'example' or POINTER->ID,NAME"
        ));
        assert!(err("out=x,tasks=on").contains("add elf=KERNEL"));
        assert!(err("out=x,tasks").contains("argument 'tasks' needs a value"));
    }

    #[test]
    fn tasks_are_named_by_default_where_elf_tells_where_they_are() {
        assert_eq!(parse("out=x").unwrap().tasks, AutoOnOff::Auto);
        assert_eq!(parse("out=x,elf=k,tasks=on").unwrap().tasks, AutoOnOff::On);
        assert_eq!(parse("out=x,tasks=off").unwrap().tasks, AutoOnOff::Off);
        assert_eq!(parse("out=x").unwrap().switches, AutoOnOff::Auto);
        assert_eq!(
            parse("out=x,elf=k,switches=on").unwrap().switches,
            AutoOnOff::On
        );
        assert!(err("out=x,elf=k,switches=on,tasks=off").contains("tasks=off names none"));
        assert!(err("out=x,switches=on").contains("add elf=KERNEL"));
        assert!(err("out=x,switches=1").starts_with("switches=1: must be"));
    }

    #[test]
    fn other_kernels_tasks_by_description() {
        let c = parse("out=x,elf=k,tasks=example,switches=example").unwrap();
        assert_eq!((c.tasks, c.switches), (AutoOnOff::On, AutoOnOff::On));
        assert_eq!(
            c.task_description.unwrap().to_string(),
            "CURRENT_TASK->id,name"
        );
        assert_eq!(c.switch_function.as_deref(), Some("switch_to"));
        // QEMU's `,,` reaches the plugin as one comma.
        let c = Config::parse([
            "out=x",
            "elf=k",
            "tasks=cur->tid,comm",
            "switches=sched_switch",
        ])
        .unwrap();
        assert_eq!(c.task_description.unwrap().to_string(), "cur->tid,comm");
        assert_eq!(c.switch_function.as_deref(), Some("sched_switch"));
        assert!(err("out=x,tasks=example").contains("add elf=KERNEL"));
        assert!(err("out=x,elf=k,tasks=off,switches=example").contains("tasks=off names none"));
        assert!(err("out=x,tasks=cur->id").starts_with("tasks=cur->id: no ','"));
        assert!(err("out=x,switches=a-b").starts_with("switches=a-b: must be"));
    }

    #[test]
    fn trigger_interrupt_samples_by_host_time() {
        let c = parse("out=x,trigger=interrupt").unwrap();
        assert!(c.at_interrupts);
        assert_eq!(
            c.sampling,
            SamplingMode::DelayMicros(DEFAULT_INTERRUPT_DELAY_US)
        );
        let c = parse("out=x,trigger=interrupt,delay=500,exact=on").unwrap();
        assert_eq!(
            (c.sampling, c.exact),
            (SamplingMode::DelayMicros(500), true)
        );
        assert!(!parse("out=x,trigger=block,period=7").unwrap().at_interrupts);
        // With alloc=, trigger= asks for samples too.
        let c = parse("out=x,alloc=rust,elf=k,trigger=interrupt").unwrap();
        assert_eq!(
            c.sampling,
            SamplingMode::DelayMicros(DEFAULT_INTERRUPT_DELAY_US)
        );
    }

    #[test]
    fn alloc_hooks_and_their_symbols() {
        let c = parse("out=x,alloc=rust,elf=k.elf").unwrap();
        assert_eq!(
            c.alloc,
            Some(AllocConfig {
                spec: "rust".into(),
                symbols: SymbolSource::Elf("k.elf".into())
            })
        );
        // alloc= alone samples nothing; with delay= or period= it samples too.
        assert_eq!(c.sampling, SamplingMode::Off);
        let c = parse("out=x,alloc=my.spec,symbols=System.map,period=1000").unwrap();
        assert_eq!(c.sampling, SamplingMode::PeriodInstructions(1000));
        assert_eq!(
            c.alloc.unwrap().symbols,
            SymbolSource::Map("System.map".into())
        );
        assert_eq!(
            parse("out=x,alloc=linux,symbols=m,delay=10")
                .unwrap()
                .sampling,
            SamplingMode::DelayMicros(10)
        );
        assert!(err("out=x,alloc=rust").contains("alloc= needs the kernel's symbols"));
        // elf= alone: the kernel's unwind tables, while sampling as without it.
        let c = parse("out=x,elf=k").unwrap();
        assert_eq!((c.kernel, c.alloc), (Some("k".into()), None));
        assert_eq!(c.sampling, SamplingMode::DelayMicros(DEFAULT_DELAY_US));
        assert!(
            err("out=x,symbols=m").contains("'symbols' gives symbols for alloc=, which is missing")
        );
        assert!(err("out=x,alloc=rust,elf=k,symbols=m").contains("'elf' and 'symbols' exclude"));
        assert!(err("out=x,alloc=,elf=k").starts_with("alloc=: the value is empty"));
        assert!(err("out=x,alloc").contains("argument 'alloc' needs a value"));
        assert!(err("out=x,alloc=a,alloc=b,elf=k").contains("'alloc' is given twice"));
    }

    #[test]
    fn flight_and_max_size() {
        let c = parse("out=o,flight=5,flight_trigger=panic,flight_trigger=spin,elf=k,max_size=64M")
            .unwrap();
        assert_eq!(c.flight_secs, Some(5));
        assert_eq!(c.flight_triggers, ["panic", "spin"]);
        assert_eq!(c.max_size, Some(64 << 20));
        assert!(parse("out=o,stacks=on").unwrap().stack_table);
        assert_eq!(
            parse("out=o,flight_trigger=panic,elf=k").unwrap_err(),
            ConfigError::TriggerWithoutFlight("flight_trigger")
        );
        assert_eq!(
            parse("out=o,flight_dump=/d").unwrap_err(),
            ConfigError::TriggerWithoutFlight("flight_dump")
        );
        assert_eq!(
            parse("out=o,flight=5,flight_trigger=panic").unwrap_err(),
            ConfigError::TriggerWithoutElf
        );
        assert_eq!(
            parse("out=o,flight=5,exact=on").unwrap_err(),
            ConfigError::FlightWithExact
        );
        assert!(parse("out=o,flight=0")
            .unwrap_err()
            .to_string()
            .contains("flight=0: must be between 1 and 86400"));
        assert!(parse("out=o,max_size=12")
            .unwrap_err()
            .to_string()
            .starts_with("max_size=12: at least"));
        assert_eq!(
            parse("out=o,flight").unwrap_err(),
            ConfigError::NoValue("flight".into())
        );
    }
}
