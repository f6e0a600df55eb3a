//! `--focus`, `--exclude`, `--from-time`, `--to-time`, `--timeline-samples`: for every CPU
//! output.

use clap::Args;
use kern_profile::{Options, TimelineCap};

/// Which part of the profile to show.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Focus")]
pub struct FilterArgs {
    /// Keep only the stacks through FUNCTION, rooted at it (its outermost call). FUNCTION is
    /// a full name (`kernel::workload::stage_outer`) or its tail after `::` (`stage_outer`)
    #[arg(long, value_name = "FUNCTION")]
    pub focus: Option<String>,

    /// Drop the stacks through FUNCTION (repeatable, or comma-separated)
    #[arg(long, value_name = "FUNCTION", value_delimiter = ',', action = clap::ArgAction::Append)]
    pub exclude: Vec<String>,

    /// Keep only samples taken SECS or more into the recording
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub from_time: Option<f64>,

    /// Keep only samples taken less than SECS into the recording
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub to_time: Option<f64>,

    /// The Firefox profile and the trace hold at most N samples (default 1000000): past it,
    /// each vCPU's every 2nd, 4th, 8th... sample, each weighing that many, and a warning says
    /// so (the flamegraph, the report and pprof count every sample); 0 keeps every sample
    #[arg(long, value_name = "N")]
    pub timeline_samples: Option<u64>,
}

impl FilterArgs {
    /// The report options these set, the rest default (what `record` and `top` draw with).
    pub fn options(&self) -> Options {
        Options {
            focus: self.focus.clone(),
            exclude: self.exclude.clone(),
            from_time: self.from_time,
            to_time: self.to_time,
            timeline_samples: self
                .timeline_samples
                .map_or(TimelineCap::DEFAULT, TimelineCap::from_count),
            ..Options::default()
        }
    }

    /// Whether any of these options was given.
    pub fn any(&self) -> bool {
        self.focus.is_some()
            || !self.exclude.is_empty()
            || self.from_time.is_some()
            || self.to_time.is_some()
            || self.timeline_samples.is_some()
    }
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds (e.g. 1.5)")),
    }
}
