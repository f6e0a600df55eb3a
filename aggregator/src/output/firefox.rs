//! A Firefox Profiler profile (the processed format, through `fxprof-processed-profile`, as
//! samply writes it): one process for the kernel, one thread per vCPU, each sample at its
//! time so that the timeline and the per-vCPU tracks work.
//!
//! Samples stream in: each distinct address stack of a thread is named and interned once,
//! later samples with it only add a sample row. Legacy files have no time; their samples are
//! placed 1 ms apart, in file order, on one thread.

use std::io::Write;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, Profile,
    ReferenceTimestamp, SamplingInterval, StackHandle, ThreadHandle, Timestamp,
};
use kern_profile_format::SamplingMode;
use rustc_hash::FxHashMap;

use crate::error::ProfileError;
use crate::input::{CpuInput, ReadSummary};
use crate::options::Options;
use crate::stacks::{KeyBuilder, NameStyle, StackNamer, UNKNOWN_FRAME};
use crate::symbolize::Symbolizer;

struct ThreadState {
    handle: ThreadHandle,
    stacks: FxHashMap<Box<[u64]>, Option<StackHandle>>,
    last_ns: Option<u64>,
    first_ns: Option<u64>,
    samples: u64,
}

/// Reads `input` and writes its profile as JSON to `out`. Returns what reading found and the
/// number of samples kept.
pub fn write_firefox(
    input: CpuInput,
    sym: &mut Symbolizer,
    opts: &Options,
    product: &str,
    out: impl Write,
) -> Result<(ReadSummary, u64), ProfileError> {
    let header = input.header.clone();
    let reference = header
        .as_ref()
        .map_or(ReferenceTimestamp::from_millis_since_unix_epoch(0.0), |h| {
            ReferenceTimestamp::from_millis_since_unix_epoch(h.start_unix_ns as f64 / 1e6)
        });
    let declared = match header.as_ref().map(|h| h.sampling) {
        Some(SamplingMode::DelayMicros(us)) => {
            Some(SamplingInterval::from_nanos(us.saturating_mul(1000)))
        }
        _ => None,
    };
    let mut profile = Profile::new(
        product,
        reference,
        declared.unwrap_or(SamplingInterval::from_millis(1)),
    );
    profile.set_symbolicated(true);
    profile.set_os_name("guest kernel under QEMU (kern-profile)");
    let start = Timestamp::from_nanos_since_reference(0);
    let process = profile.add_process(product, 1, start);
    let kernel_cat = profile.add_category("Kernel", CategoryColor::Orange);
    let user_cat = profile.add_category("User", CategoryColor::Blue);

    let mut threads: FxHashMap<u32, ThreadState> = FxHashMap::default();
    let new_thread = |profile: &mut Profile, vcpu: u32| {
        // No "main" thread: the profiler would name it after the process.
        let handle = profile.add_thread(process, vcpu, start, false);
        profile.set_thread_name(handle, &format!("vCPU {vcpu}"));
        ThreadState {
            handle,
            stacks: FxHashMap::default(),
            last_ns: None,
            first_ns: None,
            samples: 0,
        }
    };
    // One track per vCPU QEMU ran, even an idle one.
    if let Some(h) = &header {
        for v in 0..h.vcpus.min(4096) {
            if opts.cpus.as_ref().is_none_or(|c| c.contains(v)) {
                let t = new_thread(&mut profile, v);
                threads.insert(v, t);
            }
        }
    }

    let markers = input.header.as_ref().is_some_and(|h| h.markers);
    let keys = KeyBuilder::new(opts).with_markers(markers);
    let mut namer = StackNamer::new(sym, NameStyle::from_options(opts, false));
    let mut key = Vec::with_capacity(256);
    let mut names = Vec::with_capacity(256);
    let mut infos = Vec::with_capacity(256);
    let mut index = 0u64;
    let mut kept = 0u64;
    let summary = input.for_each(false, |s| {
        let seq = index;
        index += 1;
        if !keys.build(s, namer.symbolizer(), &mut key) {
            return;
        }
        kept += 1;
        let t = threads
            .entry(s.vcpu)
            .or_insert_with(|| new_thread(&mut profile, s.vcpu));
        let stack = match t.stacks.get(&key[..]) {
            Some(h) => *h,
            None => {
                // User frames (of a user-mode sample, or the user part of a system call's
                // stack sampled in the kernel) in the User category.
                let user_part = namer.name_key_spaces(&key, &mut names);
                infos.clear();
                for (i, n) in names.iter().enumerate() {
                    let category = if &**n == UNKNOWN_FRAME {
                        CategoryHandle::OTHER
                    } else if s.user || user_part.contains(&i) {
                        user_cat
                    } else {
                        kernel_cat
                    };
                    infos.push(FrameInfo {
                        frame: Frame::Label(profile.intern_string(n)),
                        category_pair: category.into(),
                        flags: FrameFlags::empty(),
                    });
                }
                let h = profile.intern_stack_frames(t.handle, infos.drain(..));
                t.stacks.insert(key.as_slice().into(), h);
                h
            }
        };
        let ns = s.time_ns.unwrap_or(seq.saturating_mul(1_000_000));
        let delta = t.last_ns.map_or(CpuDelta::ZERO, |l| {
            CpuDelta::from_nanos(ns.saturating_sub(l))
        });
        t.last_ns = Some(ns);
        t.first_ns.get_or_insert(ns);
        t.samples += 1;
        profile.add_sample(
            t.handle,
            Timestamp::from_nanos_since_reference(ns),
            stack,
            delta,
            1,
        );
    })?;

    if declared.is_none() {
        // `period` sampling: declare the mean host-time spacing of samples.
        let (span, gaps) =
            threads
                .values()
                .fold((0u64, 0u64), |(s, g), t| match (t.first_ns, t.last_ns) {
                    (Some(a), Some(b)) if t.samples > 1 => (
                        s.saturating_add(b.saturating_sub(a)),
                        g.saturating_add(t.samples - 1),
                    ),
                    _ => (s, g),
                });
        if gaps > 0 && span > 0 {
            profile.set_interval(SamplingInterval::from_nanos((span / gaps).max(1)));
        }
    }

    let mut out = std::io::BufWriter::new(out);
    serde_json::to_writer(&mut out, &profile)
        .map_err(std::io::Error::other)
        .and_then(|()| out.flush())
        .map_err(|source| ProfileError::Write {
            what: "the Firefox profile".into(),
            source,
        })?;
    Ok((summary, kept))
}
