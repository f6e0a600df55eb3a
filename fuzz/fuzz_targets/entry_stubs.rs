#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kern_profile_fuzz::targets::entry_stubs::run(data));
