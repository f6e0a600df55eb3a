//! Reading CPU sample files of either format, told apart by their first bytes, as one
//! stream of [`Sample`]s.
//!
//! The legacy format (the original C plugin) has no header, no vCPU, no time and no mode:
//! its samples read as vCPU 0, kernel mode, without time, the first address being the PC.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use kern_profile_format::{
    detect, Arch, CpuFormat, ExactBlocks, FormatError, Header, LegacyReader, Privilege, RawReader,
    RawSummary, Record, SampleRef,
};
use rustc_hash::FxHashMap;

use crate::address_space::{self, CodeSamples};
use crate::error::ProfileError;
use crate::off_cpu::OffCpu;
use crate::progress;
use crate::run_groups::{RunGroups, WordUse};
use crate::tasks::{SampleTask, TaskOf, Tasks};
use crate::unnamed::CpuState;

/// One sample, normalised across formats.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub vcpu: u32,
    pub user: bool,
    /// Host time since the plugin started (raw format only).
    pub time_ns: Option<u64>,
    /// The word at `[SP]`, when it was read.
    pub sp_word: Option<u64>,
    /// The return-address register (riscv `ra`, aarch64 `x30`), when it was recorded.
    pub return_register: Option<u64>,
    /// Why the unwind stopped (raw format only).
    pub stop: Option<u8>,
    /// The PC, then return addresses, innermost first.
    pub addrs: &'a [u64],
    /// CPU mode and privilege (raw format version 2; unknown before).
    pub cpu: CpuState,
    /// The address space, when the sample recorded one with address translation on (raw
    /// format version 2): from [`Sample::of_raw`], the page-table base's identity (x86 CR3
    /// without its PCID bits); from [`decode_raw`], the key of that space's program then
    /// ([`CodeSamples::key`]).
    pub page_table: Option<u64>,
    /// The task its vCPU ran, from the recording's task records ([`crate::tasks`]); `None`
    /// before the vCPU's first one, and in recordings without any.
    pub task: Option<SampleTask<'a>>,
    /// Format version 4: its stack-table entry; samples with equal entries have equal
    /// fields but for vCPU, time, the word at `[SP]`, address space and task.
    pub stack: Option<u32>,
    /// The samples this one stands for: 1, but for a run counted by stack
    /// ([`crate::run_groups`]), where its time is that of the last of them.
    pub weight: u64,
}

impl<'a> Sample<'a> {
    /// The sample's task, as reports tell it.
    pub fn task(&self) -> TaskOf<'a> {
        TaskOf::of(self.task)
    }

    /// A sample of `addrs` on `vcpu` and nothing else known: all a legacy file holds.
    pub fn of_addresses(vcpu: u32, addrs: &'a [u64]) -> Self {
        Sample {
            vcpu,
            user: false,
            time_ns: None,
            sp_word: None,
            return_register: None,
            stop: None,
            addrs,
            cpu: CpuState::default(),
            page_table: None,
            task: None,
            stack: None,
            weight: 1,
        }
    }

    /// A raw-format sample of an `arch` guest whose PC and return addresses are `addrs`.
    pub fn of_raw(s: &SampleRef<'_>, addrs: &'a [u64], arch: Option<Arch>) -> Self {
        Sample {
            vcpu: s.vcpu,
            user: s.user(),
            time_ns: Some(s.time_ns),
            // The plugin resolved frameless entries itself: the [SP] fix is only for older
            // recordings.
            sp_word: s.sp_word().filter(|_| !s.entry_resolved()),
            return_register: s.return_register(),
            stop: Some(s.stop),
            addrs,
            cpu: CpuState {
                mode: s.mode(),
                firmware: s.privilege() == Privilege::Firmware,
            },
            page_table: address_space::of_sample(arch, s.mode(), s.page_table_base()),
            task: None,
            stack: s.stack,
            weight: 1,
        }
    }
}

/// What reading a whole file found besides samples.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    /// The file's records counted (format's one tally): samples, unwind stops, statistics,
    /// host timer, unknown records, truncation. Of a legacy file: its samples, all of vCPU 0,
    /// and where it was cut.
    pub tally: RawSummary,
    /// Legacy samples with no address at all (skipped).
    pub empty_samples: u64,
    /// Executions per instruction address (only when asked for).
    pub exact: FxHashMap<u64, u64>,
    /// Code bytes at sampled user addresses, per address space and program there (raw
    /// format version 2); samples' `page_table` are its keys.
    pub code: CodeSamples,
    /// The recording's tasks (task records), and the samples read in each.
    pub tasks: Tasks,
    /// Time off the CPU per task and waiting stack, from the switch records (empty without
    /// them).
    pub off_cpu: OffCpu,
}

impl ReadSummary {
    /// Whether the file holds exact block counts.
    pub fn has_exact(&self) -> bool {
        self.tally.exact_records > 0
    }
}

/// An opened CPU sample file, its header read.
pub struct CpuInput {
    pub path: PathBuf,
    pub format: CpuFormat,
    /// `None` for legacy files.
    pub header: Option<Header>,
    /// The raw format's version (0 for legacy files).
    pub version: u16,
    pub size: u64,
    reader: Reader,
}

enum Reader {
    Raw(RawReader<Box<dyn Read>>),
    Legacy(LegacyReader<Box<dyn Read>>),
}

impl CpuInput {
    /// Opens `path`, tells its format and reads the header. `progress` allows a bar.
    pub fn open(path: &Path, progress: bool) -> Result<Self, ProfileError> {
        let open_err = |source| ProfileError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut file = kern_profile_format::open_input(path).map_err(open_err)?;
        let size = file.metadata().map_err(open_err)?.len();
        let mut first = [0u8; 8];
        let mut n = 0;
        while n < first.len() {
            match file.read(&mut first[n..]).map_err(open_err)? {
                0 => break,
                k => n += k,
            }
        }
        file.seek(SeekFrom::Start(0)).map_err(open_err)?;
        // A file shorter than the magic but starting like it is a cut raw file, not legacy.
        let format =
            if n > 0 && n < first.len() && kern_profile_format::MAGIC.starts_with(&first[..n]) {
                CpuFormat::Raw
            } else {
                detect(&first[..n])
            };
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        let src = progress::reader(file, progress, size, &name);
        let format_err = |source| ProfileError::Format {
            path: path.to_path_buf(),
            source,
        };
        let (reader, header, version) = match format {
            CpuFormat::Raw => {
                let r = RawReader::open(src).map_err(format_err)?;
                let (h, v) = (r.header().clone(), r.version());
                (Reader::Raw(r), Some(h), v)
            }
            CpuFormat::Legacy => (Reader::Legacy(LegacyReader::new(src)), None, 0),
        };
        Ok(CpuInput {
            path: path.to_path_buf(),
            format,
            header,
            version,
            size,
            reader,
        })
    }

    /// Streams every sample to `on_sample`; collects exact counts when `want_exact`. With
    /// `by_stack`, a version-4 run's samples come counted by stack (a [`Sample::weight`]),
    /// `on_sample` telling it which stacks' words at `[SP]` matter.
    pub fn for_each(
        self,
        want_exact: bool,
        by_stack: Option<&WordUse>,
        mut on_sample: impl FnMut(&Sample<'_>),
    ) -> Result<ReadSummary, ProfileError> {
        let mut sum = ReadSummary::default();
        match self.reader {
            Reader::Raw(r) => read_raw(r, want_exact, by_stack, &mut sum, &mut on_sample),
            Reader::Legacy(r) => read_legacy(r, &mut sum, &mut on_sample),
        }
        .map_err(|source| ProfileError::Format {
            path: self.path,
            source,
        })?;
        Ok(sum)
    }
}

/// Decodes the records of `r` up to its end, or to the last whole one: each record goes to
/// `on_record` (with the samples it stands for), each code record to `code` (in file order:
/// it tells which program an address space runs from there on), each task record to `tasks`
/// (which task its vCPU runs from there on), then each sample, as a [`Sample`] whose address
/// space is `code`'s key and whose task is its vCPU's, to `on_sample`. With `by_stack`, a
/// version-4 run's samples come counted by stack ([`crate::run_groups`]): for readers of
/// counts, not of times, which say there which stacks' words at `[SP]` matter to them. The
/// one decode loop of raw files, for whole files and for `top`'s growing one alike.
pub fn decode_raw<R: Read>(
    r: &mut RawReader<R>,
    code: &mut CodeSamples,
    tasks: &mut Tasks,
    by_stack: Option<&WordUse>,
    mut on_record: impl FnMut(&Record<'_>, u64),
    mut on_sample: impl FnMut(&Sample<'_>),
) -> Result<(), FormatError> {
    let mut addrs: Vec<u64> = Vec::with_capacity(256);
    let arch = Some(r.header().arch);
    let mut groups = RunGroups::default();
    let mut sample = |s: &SampleRef<'_>, n: u64, code: &mut CodeSamples, tasks: &mut Tasks| {
        addrs.clear();
        addrs.push(s.pc);
        s.extend_frames(&mut addrs);
        let mut sample = Sample::of_raw(s, &addrs, arch);
        sample.page_table = sample.page_table.map(|id| code.key(id));
        sample.task = tasks.samples_on(s.vcpu, n);
        sample.weight = n;
        on_sample(&sample);
    };
    loop {
        if let Some(words) = by_stack.filter(|_| r.run_left() > 0) {
            let read = groups.read_run(r, words);
            // The samples before a bad reference count.
            for g in groups.take() {
                let s = r.sample_of(&g.reference);
                let rec = Record::Sample(s);
                on_record(&rec, g.samples);
                sample(&s, g.samples, code, tasks);
                std::mem::forget(rec);
            }
            read?;
            continue;
        }
        let Some(rec) = r.next_record()? else {
            break;
        };
        on_record(&rec, 1);
        // By value: a sample, the usual record, then needs no drop.
        match rec {
            Record::CodeBytes(c) => code.add(arch, &c),
            Record::Task(t) => tasks.record(&t),
            Record::Sample(s) => {
                sample(&s, 1, code, tasks);
                // A sample owns nothing: skip the drop glue every other record needs.
                std::mem::forget(rec);
            }
            _ => {}
        }
    }
    Ok(())
}

fn read_raw(
    mut r: RawReader<Box<dyn Read>>,
    want_exact: bool,
    by_stack: Option<&WordUse>,
    sum: &mut ReadSummary,
    on_sample: &mut impl FnMut(&Sample<'_>),
) -> Result<(), FormatError> {
    let tally = &mut sum.tally;
    let exact = &mut sum.exact;
    let off_cpu = &mut sum.off_cpu;
    decode_raw(
        &mut r,
        &mut sum.code,
        &mut sum.tasks,
        by_stack,
        |rec, n| {
            match rec {
                Record::Sample(s) => tally.add_samples(s, n),
                _ => tally.add(rec),
            }
            match rec {
                Record::ExactBlocks(blocks) if want_exact => add_exact(exact, blocks),
                Record::Sample(s) => off_cpu.saw_time(s.time_ns),
                Record::Task(t) => off_cpu.task_record(t),
                Record::Switch(s) => off_cpu.switch(s),
                _ => {}
            }
        },
        on_sample,
    )?;
    sum.tally.truncation = r.truncation();
    sum.off_cpu.finish();
    Ok(())
}

fn read_legacy(
    mut r: LegacyReader<Box<dyn Read>>,
    sum: &mut ReadSummary,
    on_sample: &mut impl FnMut(&Sample<'_>),
) -> Result<(), FormatError> {
    let mut addrs: Vec<u64> = Vec::with_capacity(256);
    while let Some(s) = r.next_sample()? {
        sum.tally.samples += 1;
        if s.is_empty() {
            sum.empty_samples += 1;
            continue;
        }
        sum.tally.per_vcpu.add(0);
        addrs.clear();
        addrs.extend(s.addresses());
        on_sample(&Sample::of_addresses(0, &addrs));
    }
    sum.tally.truncation = r.truncation();
    Ok(())
}

/// Adds a record's exact block counts, per instruction address.
fn add_exact(exact: &mut FxHashMap<u64, u64>, blocks: &ExactBlocks<'_>) {
    for b in blocks.iter() {
        for a in b.instructions() {
            let c = exact.entry(a).or_insert(0);
            *c = c.saturating_add(b.executions);
        }
    }
}
