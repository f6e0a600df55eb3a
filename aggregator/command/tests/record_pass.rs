//! `record`'s outputs come from one pass: drawing every output of a recording (exact counts
//! too) opens the recording once and the kernel ELF once, as the kernel's inotify events
//! count them (`record` itself adds one check of each before QEMU runs).

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use kern_profile::job::SymbolSources;
use kern_profile::record::aggregate::aggregate;
use kern_profile::symbolize::KernelFile;
use kern_profile::Options;

/// Counts the opens of watched files (inotify `IN_OPEN`).
struct OpenCounter {
    fd: i32,
}

impl OpenCounter {
    fn new() -> Self {
        // SAFETY: a plain system call; the descriptor is checked and closed on drop.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        OpenCounter { fd }
    }

    /// Watches `path`; returns its watch descriptor.
    fn watch(&self, path: &Path) -> i32 {
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd, c.as_ptr(), libc::IN_OPEN) };
        assert!(
            wd >= 0,
            "inotify_add_watch: {}",
            std::io::Error::last_os_error()
        );
        wd
    }

    /// The watch descriptor of each open since the watches began, in order.
    fn opens(&self) -> Vec<i32> {
        let mut opened = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: `buf` is writable for its length.
            let got = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if got <= 0 {
                return opened;
            }
            // struct inotify_event: wd, mask, cookie, len, then `len` bytes of name.
            let mut at = 0usize;
            while at + 16 <= got as usize {
                let word =
                    |i: usize| u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().unwrap());
                let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
                if mask & libc::IN_OPEN != 0 {
                    opened.push(wd);
                }
                at += 16 + len;
            }
        }
    }
}

impl Drop for OpenCounter {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.fd) };
    }
}

/// A synthetic recording (`exact`: with exact counts) and a copy of the tiny ELF in a fresh
/// directory `name`, and the sources that name it.
fn recording(name: &str, exact: bool) -> (PathBuf, PathBuf, PathBuf, SymbolSources) {
    let dir = common::temp_dir(name);
    let raw = common::write(&dir, "cpu.raw", &common::synthetic_raw(exact));
    let elf = dir.join("tiny.elf");
    std::fs::copy(common::tiny_elf(), &elf).unwrap();
    let sources = SymbolSources {
        elf: Some(elf.clone()),
        ..SymbolSources::default()
    };
    (dir, raw, elf, sources)
}

#[test]
fn every_output_of_a_recording_comes_from_one_read_of_it_and_of_the_elf() {
    let (dir, raw, elf, sources) = recording("one-pass", true);
    let counter = OpenCounter::new();
    let (raw_wd, elf_wd) = (counter.watch(&raw), counter.watch(&elf));
    let done = aggregate(&raw, &dir, &sources, None, &Options::default(), true, 10).unwrap();
    let names: Vec<_> = done
        .files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "cpu.svg",
            "report.txt",
            "profile.json",
            "profile.pb.gz",
            "exact.svg",
            "exact.txt",
            "callgrind.out"
        ]
    );
    assert!(!done.top.is_empty());
    let opened = counter.opens();
    let count = |wd| opened.iter().filter(|&&w| w == wd).count();
    assert_eq!(count(raw_wd), 1, "opens of the recording");
    assert_eq!(count(elf_wd), 1, "opens of the kernel ELF");
}

/// `record` reads the kernel before QEMU starts (to check it) and hands what it read to the
/// drawing: a Linux image is not unpacked a second time, nor the ELF opened again.
#[test]
fn a_kernel_already_read_is_not_read_again() {
    let (dir, raw, elf, sources) = recording("preloaded", false);
    let kernel = KernelFile::load(&elf).unwrap();
    let counter = OpenCounter::new();
    let elf_wd = counter.watch(&elf);
    let done = aggregate(
        &raw,
        &dir,
        &sources,
        Some(kernel),
        &Options::default(),
        false,
        10,
    );
    let done = done.unwrap();
    assert!(!done.top.is_empty());
    let opened = counter.opens();
    assert_eq!(opened.iter().filter(|&&w| w == elf_wd).count(), 0);
}
