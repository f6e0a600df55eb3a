//! The plugin's arguments: `Config::parse` over the input split at commas (as QEMU splits
//! `-plugin kern-profile.so,ARGS`), and the QEMU command-line checks over it split at NULs
//! (as `/proc/self/cmdline` is).

use std::hint::black_box;

use kern_profile_plugin::config::Config;
use kern_profile_plugin::qemu_args::{single_threaded_tcg, split_cmdline};

/// One input through the target.
pub fn run(data: &[u8]) {
    crate::bounded(data.len(), || check(data));
}

fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match Config::parse(text.split(',')) {
        Ok(c) => {
            black_box((c.sampling.code(), c.sampling.value(), c.depth, c.exact));
        }
        Err(e) => {
            black_box(e.to_string());
        }
    }
    let args = split_cmdline(data);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    black_box(single_threaded_tcg(&refs));
}
