//! Reading CPU sample files of either format, told apart by their first bytes, as one
//! stream of [`Sample`]s.
//!
//! The legacy format (the original C plugin) has no header, no vCPU, no time and no mode:
//! its samples read as vCPU 0, kernel mode, without time, the first address being the PC.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use kern_profile_format::{
    detect, CpuFormat, FormatError, Header, HostTimerStats, LegacyReader, RawReader, RawSummary,
    Record, Stats, StopCounts, Truncation,
};
use rustc_hash::FxHashMap;

use crate::error::ProfileError;
use crate::progress::{self, ProgressReader};

/// One sample, normalised across formats.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub vcpu: u32,
    pub user: bool,
    /// Host time since the plugin started (raw format only).
    pub time_ns: Option<u64>,
    /// The word at [SP], when it was read.
    pub sp_word: Option<u64>,
    /// Why the unwind stopped (raw format only).
    pub stop: Option<u8>,
    /// The PC, then return addresses, innermost first.
    pub addrs: &'a [u64],
}

/// What reading a whole file found besides samples.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    /// Samples read (before any filter).
    pub samples: u64,
    /// Legacy samples with no address at all (skipped).
    pub empty_samples: u64,
    /// The statistics record, when the run ended cleanly.
    pub stats: Option<Stats>,
    /// `delay=`: the host timer's ticks and each vCPU's idle time.
    pub host_timer: Option<HostTimerStats>,
    /// Where the file was cut, when it was.
    pub truncation: Option<Truncation>,
    /// Records of kinds this version does not know (skipped).
    pub unknown_records: u64,
    /// Unwind stops counted from the samples.
    pub sample_stops: StopCounts,
    /// Whether the file holds exact block counts.
    pub has_exact: bool,
    /// Executions per instruction address (only when asked for).
    pub exact: FxHashMap<u64, u64>,
    /// Highest vCPU index seen.
    pub max_vcpu: Option<u32>,
}

/// An opened CPU sample file, its header read.
pub struct CpuInput {
    pub path: PathBuf,
    pub format: CpuFormat,
    /// `None` for legacy files.
    pub header: Option<Header>,
    pub size: u64,
    reader: Reader,
}

enum Reader {
    Raw(RawReader<ProgressReader<File>>),
    Legacy(LegacyReader<ProgressReader<File>>),
}

impl CpuInput {
    /// Opens `path`, tells its format and reads the header. `progress` allows a bar.
    pub fn open(path: &Path, progress: bool) -> Result<Self, ProfileError> {
        let open_err = |source| ProfileError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(open_err)?;
        let size = file.metadata().map_err(open_err)?.len();
        if file.metadata().map_err(open_err)?.is_dir() {
            return Err(open_err(std::io::Error::other("is a directory")));
        }
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
        let src = ProgressReader::new(file, progress::bar(progress, size, &name));
        let format_err = |source| ProfileError::Format {
            path: path.to_path_buf(),
            source,
        };
        let (reader, header) = match format {
            CpuFormat::Raw => {
                let r = RawReader::new(src).map_err(format_err)?;
                let h = r.header().clone();
                (Reader::Raw(r), Some(h))
            }
            CpuFormat::Legacy => (Reader::Legacy(LegacyReader::new(src)), None),
        };
        Ok(CpuInput {
            path: path.to_path_buf(),
            format,
            header,
            size,
            reader,
        })
    }

    /// Streams every sample to `on_sample`; collects exact counts when `want_exact`.
    pub fn for_each(
        mut self,
        want_exact: bool,
        mut on_sample: impl FnMut(&Sample<'_>),
    ) -> Result<ReadSummary, ProfileError> {
        let path = self.path.clone();
        let format_err = |source: FormatError| ProfileError::Format {
            path: path.clone(),
            source,
        };
        let mut sum = ReadSummary::default();
        let mut addrs: Vec<u64> = Vec::with_capacity(256);
        match &mut self.reader {
            Reader::Raw(r) => {
                let mut tally = RawSummary::default();
                while let Some(rec) = r.next_record().map_err(format_err)? {
                    tally.add(&rec);
                    match rec {
                        Record::Sample(s) => {
                            addrs.clear();
                            addrs.push(s.pc);
                            addrs.extend(s.frames());
                            on_sample(&Sample {
                                vcpu: s.vcpu,
                                user: s.user(),
                                time_ns: Some(s.time_ns),
                                // The plugin resolved frameless entries itself:
                                // the [SP] fix is only for older recordings.
                                sp_word: s.sp_word().filter(|_| !s.entry_resolved()),
                                stop: Some(s.stop),
                                addrs: &addrs,
                            });
                        }
                        Record::ExactBlocks(blocks) if want_exact => {
                            for b in blocks.iter() {
                                for a in b.instructions() {
                                    let c = sum.exact.entry(a).or_insert(0);
                                    *c = c.saturating_add(b.executions);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                sum.samples = tally.samples;
                sum.sample_stops = tally.stops;
                sum.max_vcpu = tally.per_vcpu.max();
                sum.has_exact = tally.exact_records > 0;
                sum.stats = tally.stats;
                sum.host_timer = tally.host_timer;
                sum.unknown_records = tally.unknown_records;
                sum.truncation = r.truncation();
            }
            Reader::Legacy(r) => {
                while let Some(s) = r.next_sample().map_err(format_err)? {
                    sum.samples += 1;
                    if s.is_empty() {
                        sum.empty_samples += 1;
                        continue;
                    }
                    addrs.clear();
                    addrs.extend(s.addresses());
                    sum.max_vcpu = Some(0);
                    on_sample(&Sample {
                        vcpu: 0,
                        user: false,
                        time_ns: None,
                        sp_word: None,
                        stop: None,
                        addrs: &addrs,
                    });
                }
                sum.truncation = r.truncation();
            }
        }
        Ok(sum)
    }
}
