//! Compressed recordings (`compress=on`): read as the plain file they hold, cut anywhere
//! they keep the samples before the cut, and the plain reader says what they are.

use std::io::Write;

use kern_profile_format::*;
use kern_profile_test_support::raw_file::raw_header;

/// A plain file of `n` samples, and where each sample ends.
fn plain(n: usize) -> (Vec<u8>, Vec<usize>) {
    let h = raw_header(Arch::X86_64, SamplingMode::DelayMicros(10), 2);
    let mut out = Vec::new();
    h.encode_version(VERSION_2, &mut out);
    let mut ends = Vec::new();
    for i in 0..n as u64 {
        let frames = [0xffff_ffff_8100_2000 + i % 7, 0xffff_ffff_8100_3000];
        let s = SampleRecord {
            vcpu: (i % 2) as u32,
            user: false,
            stop: StopReason::NullFramePointer.into(),
            time_ns: 1000 * i,
            icount: 0,
            pc: 0xffff_ffff_8100_1000 + i % 13,
            sp: 0xffff_c900_0001_0000,
            sp_word: None,
            frames: &frames,
            entry_resolved: false,
        };
        encode_sample_v2(&mut out, h.ptr_width(), &s, &SampleExtras::default());
        ends.push(out.len());
    }
    (out, ends)
}

/// `bytes` compressed as the plugin writes them: a block ended every `batch` bytes.
fn compressed(bytes: &[u8], batch: usize) -> (Vec<u8>, Vec<usize>) {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), compressed::LEVEL).unwrap();
    let mut flushed = Vec::new();
    for chunk in bytes.chunks(batch) {
        e.write_all(chunk).unwrap();
        e.flush().unwrap();
        flushed.push(e.get_ref().len());
    }
    (e.finish().unwrap(), flushed)
}

fn samples(bytes: &[u8]) -> (usize, Option<Truncation>) {
    let mut r = RawReader::open(bytes).unwrap();
    let mut n = 0;
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Sample(s) = rec {
            assert_eq!(s.frame_count(), 2);
            n += 1;
        }
    }
    (n, r.truncation())
}

#[test]
fn a_compressed_file_reads_as_the_plain_one() {
    let (raw, _) = plain(2000);
    let (z, _) = compressed(&raw, 4096);
    assert!(
        z.len() * 5 < raw.len(),
        "{} of {} bytes",
        z.len(),
        raw.len()
    );
    assert_eq!(samples(&raw), (2000, None));
    assert_eq!(samples(&z), (2000, None));
    // The plain reader names what it was given.
    let e = RawReader::new(&z[..]).err().unwrap();
    assert!(matches!(e, FormatError::Compressed), "{e}");
    assert_eq!(detect(&z[..8]), CpuFormat::Raw);
}

#[test]
fn a_cut_compressed_file_keeps_every_batch_before_the_cut() {
    let (raw, ends) = plain(2000);
    let (z, flushed) = compressed(&raw, 4096);
    // Cut right after each flush: exactly the samples in the batches before it.
    for (k, &at) in flushed.iter().enumerate().take(flushed.len() - 1) {
        let bytes_before = 4096 * (k + 1);
        let whole = ends.iter().filter(|&&e| e <= bytes_before).count();
        let (n, t) = samples(&z[..at]);
        assert_eq!(n, whole, "cut after batch {k}");
        // A batch boundary inside a sample: its torn start warns.
        assert_eq!(
            t.is_some(),
            !ends.contains(&bytes_before),
            "cut after batch {k}"
        );
    }
    // Anywhere else: no error, no more than the whole.
    for at in (5..z.len()).step_by(97) {
        match RawReader::open(&z[..at]) {
            // Cut before the first block ended: no header yet.
            Err(FormatError::ShortHeader(_)) => assert!(at < flushed[0]),
            Err(e) => panic!("cut at {at}: {e}"),
            Ok(_) => assert!(samples(&z[..at]).0 <= 2000),
        }
    }
}
