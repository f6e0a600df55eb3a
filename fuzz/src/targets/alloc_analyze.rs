//! The allocation analysis of a memtrace (lenient, the view picked by the input's length)
//! and its text report.

use std::hint::black_box;

use crate::{bounded, Trickle};
use kern_profile::output::alloc_report::write_report;
use kern_profile_alloc::{analyze, Options, View};

/// One input through the target.
pub fn run(data: &[u8]) {
    bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let opts = Options {
        view: View::ALL[data.len() % View::ALL.len()],
        lenient: true,
        ..Options::default()
    };
    let a = match analyze(Trickle::new(data), &opts) {
        Ok(a) => a,
        Err(e) => {
            black_box(e.to_string());
            return;
        }
    };
    let mut report = Vec::new();
    write_report(&mut report, &a, &mut |s| format!("{s:x?}"), 10).expect("writes to a Vec");
    black_box(report);
}
