//! The run over a CPU recording that `annotate` and `diff` read, as a [`CpuJob`] names it.

use kern_profile::collect::Run;
use kern_profile::job::CpuJob;
use kern_profile::symbolize::Symbolizer;

/// The run over `job`'s recording with `sym`, the symbols `job` loaded.
pub fn job_run<'a>(job: &'a CpuJob, sym: &'a mut Symbolizer) -> Run<'a> {
    Run::new(
        &job.input,
        job.progress,
        &job.filter,
        job.style,
        job.sources.kernel_name(),
        sym,
    )
}
