//! The one pass over a recording that every CPU output draws from: what the outputs drawn
//! from it need ([`Needs`]), and what it collected for them ([`Collected`]).

use std::path::PathBuf;

use kern_profile_profile::collect::Run;
use kern_profile_profile::input::CpuInput;
use kern_profile_profile::profile::{CpuProfile, SampleSink};
use kern_profile_profile::timed::{TimedSamples, TimelineCap};
use kern_profile_profile::ProfileError;

/// What an output needs of the pass besides the stack counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// The exact counts.
    pub exact: bool,
    /// The kept samples at their times (Firefox, trace events), as many as the cap holds.
    pub samples: Option<TimelineCap>,
    /// A base run to compare with (a differential), read after the recording.
    pub base: Option<PathBuf>,
}

impl Needs {
    /// The exact counts only.
    pub const EXACT: Needs = Needs {
        exact: true,
        samples: None,
        base: None,
    };

    /// The kept samples at their times only, at most what `cap` holds.
    pub fn samples(cap: TimelineCap) -> Needs {
        Needs {
            exact: false,
            samples: Some(cap),
            base: None,
        }
    }

    /// What two outputs drawn from one pass need (one base run at most: the first's).
    pub fn or(self, other: Needs) -> Needs {
        Needs {
            exact: self.exact || other.exact,
            samples: match (self.samples, other.samples) {
                (Some(a), Some(b)) => Some(a.or(b)),
                (a, b) => a.or(b),
            },
            base: self.base.or(other.base),
        }
    }
}

/// What one pass over a recording collected, for every output drawn from it.
pub struct Collected {
    pub profile: CpuProfile,
    /// The kept samples at their times; empty unless an output needs them.
    pub samples: TimedSamples,
    /// The base run, when an output needs one.
    pub base: Option<CpuProfile>,
}

impl Collected {
    /// The pass: collects `input` (opened by [`Run::open`]) as `needs` say, the only place
    /// any CPU output's input is read.
    pub fn pass(run: &mut Run<'_>, input: CpuInput, needs: &Needs) -> Result<Self, ProfileError> {
        let mut samples = TimedSamples::new(needs.samples.unwrap_or(TimelineCap::All));
        let mut sinks: Vec<&mut dyn SampleSink> = Vec::new();
        if needs.samples.is_some() {
            sinks.push(&mut samples);
        }
        let profile = run.collect_from(input, needs.exact, &mut sinks)?;
        let base = match &needs.base {
            Some(path) => Some(run.collect(path, false)?),
            None => None,
        };
        Ok(Collected {
            profile,
            samples,
            base,
        })
    }
}
