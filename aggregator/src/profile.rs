//! A CPU profile collected from one sample file: interned address stacks with their counts,
//! plus what the file said about its run (header, statistics, truncation).

use std::path::{Path, PathBuf};

use kern_profile_format::{CpuFormat, Header, HostTimerStats, SamplingMode, StopReason};
use rustc_hash::FxHashMap;

use crate::counts::{RunCoalescer, StackCounts};
use crate::error::ProfileError;
use crate::input::{CpuInput, ReadSummary};
use crate::options::{ModeFilter, Options};
use crate::output::text::pct;
use crate::stacks::KeyBuilder;
use crate::symbolize::Symbolizer;

/// Samples of one file, interned by address stack.
#[derive(Debug)]
pub struct CpuProfile {
    pub path: PathBuf,
    pub format: CpuFormat,
    pub header: Option<Header>,
    pub summary: ReadSummary,
    pub counts: StackCounts,
    /// Samples kept by the filters.
    pub kept: u64,
    /// Kept samples per vCPU, sorted by vCPU.
    pub per_vcpu: Vec<(u32, u64)>,
    /// Kept user-mode samples per vCPU, sorted by vCPU (vCPUs with none left out).
    pub per_vcpu_user: Vec<(u32, u64)>,
    /// User-mode samples read, before any filter.
    pub user_samples_read: u64,
}

impl CpuProfile {
    /// Reads `path` (either format), checking its architecture against the symbolizer's ELF.
    pub fn collect(
        path: &Path,
        sym: &mut Symbolizer,
        opts: &Options,
    ) -> Result<Self, ProfileError> {
        let input = CpuInput::open(path, opts.progress)?;
        if let Some(h) = &input.header {
            sym.check_arch(h.arch)?;
        }
        let (format, header) = (input.format, input.header.clone());
        let markers = header.as_ref().is_some_and(|h| h.markers);
        let keys = KeyBuilder::new(opts).with_markers(markers);
        let mut counts = StackCounts::default();
        let mut key = Vec::with_capacity(256);
        // Kept samples per vCPU: an array for the usual indices, a map for the rest.
        let mut per_vcpu_low = vec![0u64; 256];
        let mut per_vcpu: FxHashMap<u32, u64> = FxHashMap::default();
        let mut user_low = vec![0u64; 256];
        let mut per_vcpu_user: FxHashMap<u32, u64> = FxHashMap::default();
        let mut kept = 0u64;
        let mut user_samples_read = 0u64;
        let mut runs = RunCoalescer::default();
        // An `exact=only` recording's exact counts are its profile.
        let exact_only = header
            .as_ref()
            .is_some_and(|h| h.sampling == SamplingMode::Off);
        let summary = input.for_each(opts.exact || exact_only, |s| {
            user_samples_read += s.user as u64;
            if keys.build(s, sym, &mut key) {
                runs.add(s.vcpu, &key, &mut counts);
                kept += 1;
                match per_vcpu_low.get_mut(s.vcpu as usize) {
                    Some(n) => *n += 1,
                    None => *per_vcpu.entry(s.vcpu).or_insert(0) += 1,
                }
                if s.user {
                    match user_low.get_mut(s.vcpu as usize) {
                        Some(n) => *n += 1,
                        None => *per_vcpu_user.entry(s.vcpu).or_insert(0) += 1,
                    }
                }
            }
        })?;
        runs.flush(&mut counts);
        counts.flush();
        let gather = |map: FxHashMap<u32, u64>, low: Vec<u64>| {
            let mut v: Vec<(u32, u64)> = map.into_iter().collect();
            v.extend((0u32..).zip(low).filter(|&(_, n)| n > 0));
            v.sort_unstable();
            v
        };
        let per_vcpu = gather(per_vcpu, per_vcpu_low);
        let per_vcpu_user = gather(per_vcpu_user, user_low);
        Ok(CpuProfile {
            path: path.to_path_buf(),
            format,
            header,
            summary,
            counts,
            kept,
            per_vcpu,
            per_vcpu_user,
            user_samples_read,
        })
    }

    /// Kept user-mode samples: on vCPU `cpu`, or on all of them.
    pub fn user_kept(&self, cpu: Option<u32>) -> u64 {
        self.per_vcpu_user
            .iter()
            .filter(|(c, _)| cpu.is_none_or(|x| x == *c))
            .map(|(_, n)| n)
            .sum()
    }

    /// Problems worth telling the user: a cut file, dropped samples, unknown records.
    pub fn warnings(&self) -> Vec<String> {
        input_warnings(&self.path, self.format, &self.summary)
    }

    /// Header lines of the text report; with `split`, the kernel/user split of the kept
    /// samples (by the mode each was sampled in), per vCPU too with `per_cpu`.
    pub fn describe(
        &self,
        kernel: &str,
        opts: &Options,
        split: bool,
        per_cpu: bool,
    ) -> Vec<String> {
        let mut h = Vec::new();
        let fmt = match self.format {
            CpuFormat::Raw => "kern-profile raw format v1",
            CpuFormat::Legacy => {
                "legacy format of the original C plugin: no time, vCPU 0, kernel only"
            }
        };
        h.push(format!(
            "kern-profile CPU profile of {kernel}, from {} ({fmt})",
            self.path.display()
        ));
        let s = &self.summary;
        let mut line = format!("samples: {} read, {} kept", s.samples, self.kept);
        let filters = filter_description(opts);
        if !filters.is_empty() {
            line.push_str(&format!(" ({filters})"));
        }
        if let Some(st) = &s.stats {
            line.push_str(&format!("; {} dropped by the plugin", st.dropped));
        }
        h.push(line);
        if let Some(hd) = &self.header {
            h.push(format!(
                "sampling: {}; {} vCPU{}; QEMU {}; unwind depth limit {}",
                sampling_description(hd.sampling),
                hd.vcpus,
                if hd.vcpus == 1 { "" } else { "s" },
                hd.qemu_version,
                hd.max_depth
            ));
        }
        if let Some(t) = &s.host_timer {
            h.push(host_timer_text(t));
        }
        if self.per_vcpu.len() > 1 {
            let parts: Vec<String> = self
                .per_vcpu
                .iter()
                .map(|(c, n)| format!("cpu {c} {n} ({:.1}%)", pct(*n, self.kept)))
                .collect();
            h.push(format!("per vCPU: {}", parts.join(", ")));
        }
        if split {
            h.push(format!(
                "kernel/user split: {}",
                split_text(self.kept, self.user_kept(None))
            ));
            if per_cpu {
                for &(c, n) in &self.per_vcpu {
                    h.push(format!(
                        "kernel/user split, cpu {c}: {}",
                        split_text(n, self.user_kept(Some(c)))
                    ));
                }
            }
        }
        if self.format == CpuFormat::Raw {
            let (stops, from) = match &s.stats {
                Some(st) => (&st.stops, "statistics record"),
                None => (
                    &s.sample_stops,
                    "counted from the samples: no statistics record",
                ),
            };
            let total: u64 = stops.iter().sum();
            let parts: Vec<String> = stops
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(i, &n)| {
                    let name = StopReason::from_u8(i as u8)
                        .map_or_else(|| format!("reason {i}"), |r| r.name().to_string());
                    format!("{name} {n} ({:.1}%)", pct(n, total))
                })
                .collect();
            if !parts.is_empty() {
                h.push(format!("unwind stops ({from}): {}", parts.join(", ")));
            }
        }
        h
    }
}

/// `host timer: 95210 ticks (every 10 µs on average; 12 skipped, late); halted: cpu 1 0.52 s`.
fn host_timer_text(t: &HostTimerStats) -> String {
    let mut line = format!(
        "host timer: {} ticks (every {} µs on average",
        t.ticks,
        t.interval_ns as f64 / 1000.0
    );
    if t.late > 0 {
        line.push_str(&format!(
            "; {} skipped, the host woke the timer late",
            t.late
        ));
    }
    line.push(')');
    let throttled: u64 = t.vcpus.iter().map(|v| v.throttled_ticks).sum();
    if throttled > 0 {
        line.push_str(&format!(
            "; {throttled} vCPU ticks skipped because stack walks were slow (sampling kept under a tenth of the run)"
        ));
    }
    let idle: Vec<String> = t
        .vcpus
        .iter()
        .enumerate()
        .filter(|(_, v)| v.idle_ns > 0)
        .map(|(c, v)| format!("cpu {c} {:.2} s", v.idle_ns as f64 / 1e9))
        .collect();
    if !idle.is_empty() {
        line.push_str(&format!("; halted, so not sampled: {}", idle.join(", ")));
    }
    line
}

/// `kernel 62.10% (621), user 37.90% (379)`: samples in kernel and in user mode.
fn split_text(total: u64, user: u64) -> String {
    let kernel = total.saturating_sub(user);
    format!(
        "kernel {:.2}% ({kernel}), user {:.2}% ({user})",
        pct(kernel, total),
        pct(user, total)
    )
}

/// Warnings about how a file was read.
pub fn input_warnings(path: &Path, format: CpuFormat, s: &ReadSummary) -> Vec<String> {
    let p = path.display();
    let mut w = Vec::new();
    if let Some(t) = &s.truncation {
        w.push(format!("{p}: {t}"));
    } else if format == CpuFormat::Raw && s.stats.is_none() {
        w.push(format!(
            "{p} has no statistics record: QEMU was stopped before the plugin finished \
             (the samples are valid; dropped samples and unwind stops are not known)"
        ));
    }
    if let Some(st) = &s.stats {
        if st.dropped > 0 {
            w.push(format!(
                "{p}: the plugin dropped {} of {} samples (its writer fell behind)",
                st.dropped,
                st.dropped + st.samples
            ));
        }
        if st.samples != s.samples && s.truncation.is_none() {
            w.push(format!(
                "{p}: the statistics record counts {} samples but the file holds {}",
                st.samples, s.samples
            ));
        }
    }
    if s.unknown_records > 0 {
        w.push(format!(
            "{p}: skipped {} records of unknown kinds (written by a newer plugin?)",
            s.unknown_records
        ));
    }
    if s.empty_samples > 0 {
        w.push(format!(
            "{p}: skipped {} samples without any address",
            s.empty_samples
        ));
    }
    if s.samples == 0 && !s.has_exact {
        w.push(format!("{p} holds no samples"));
    }
    w
}

/// `every 100000 guest instructions per vCPU`.
pub fn sampling_description(m: SamplingMode) -> String {
    match m {
        SamplingMode::DelayMicros(us) => format!("every {us} µs of host time per vCPU (delay)"),
        SamplingMode::PeriodInstructions(n) => {
            format!("every {n} guest instructions per vCPU (period)")
        }
        SamplingMode::Off => "none: exact block counts only (exact=only)".to_string(),
    }
}

/// The filters in force, for headers and subtitles (empty when none).
pub fn filter_description(o: &Options) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &o.cpus {
        parts.push(format!("vCPUs {c}"));
    }
    match o.mode {
        ModeFilter::All => {}
        ModeFilter::KernelOnly => parts.push("kernel only".to_string()),
        ModeFilter::UserOnly => parts.push("user only".to_string()),
    }
    parts.join(", ")
}
