//! What every `period=N` run must show in its raw file: its samples are the guest's
//! instructions over N.

use crate::RawCensus;

/// The instructions the guest ran by `c`'s statistics record, after asserting that the
/// plugin dropped no sample and that the samples are those instructions over `period`
/// within 1%.
pub fn instructions_over_period(c: &RawCensus, period: u64) -> u64 {
    let stats = c.stats.as_ref().expect("a statistics record at exit");
    assert_eq!(stats.dropped, 0);
    let insns: u64 = stats.vcpu_instructions.iter().sum();
    let want = insns as f64 / period as f64;
    let samples = c.samples;
    assert!(
        (samples as f64 - want).abs() / want < 0.01,
        "{samples} samples vs {want:.0} expected ({insns} instructions)"
    );
    insns
}

/// [`instructions_over_period`] of a whole run: not truncated, every sample the
/// statistics record counts in the file.
pub fn whole_run_instructions(c: &RawCensus, period: u64) -> u64 {
    assert!(c.truncation.is_none(), "{:?}", c.truncation);
    let stats = c.stats.as_ref().expect("a statistics record at exit");
    assert_eq!(
        stats.samples, c.samples,
        "every written sample is in the file"
    );
    instructions_over_period(c, period)
}
