//! Reading a raw file while the plugin still writes it: each [`RawTail::poll`] hands over
//! the samples of the records completed since the last one, and keeps a torn last record's
//! bytes for the next poll.

use std::fs::File;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use kern_profile_format::{FormatError, Header, RawReader, Record};

use crate::address_space::CodeSamples;
use crate::input::{decode_raw, Sample};
use crate::tasks::Tasks;

/// A raw file followed as it grows.
pub struct RawTail {
    path: PathBuf,
    file: Option<File>,
    /// The header's bytes, once complete (each poll parses them again before the new bytes).
    header: Option<(Header, Vec<u8>)>,
    /// Bytes read but not yet parsed: the start of the header, or a torn record.
    pending: Vec<u8>,
    /// Whether the statistics record (written at the plugin's exit) was seen.
    pub finished: bool,
    /// The address spaces' programs so far (samples' keys).
    code: CodeSamples,
    /// Each vCPU's task across polls, and the tasks seen (`top --by`).
    tasks: Tasks,
}

impl RawTail {
    pub fn new(path: &Path) -> Self {
        RawTail {
            path: path.to_path_buf(),
            file: None,
            header: None,
            pending: Vec::new(),
            finished: false,
            code: CodeSamples::default(),
            tasks: Tasks::default(),
        }
    }

    /// The recording's tasks so far, which samples' task ids are of.
    pub fn tasks(&self) -> &Tasks {
        &self.tasks
    }

    /// The file's header, once written.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref().map(|h| &h.0)
    }

    /// Reads what was appended and passes each new sample to `on_sample`; returns how many.
    /// A file not there yet, or with its header still incomplete, gives none.
    pub fn poll(&mut self, mut on_sample: impl FnMut(&Sample<'_>)) -> Result<u64, FormatError> {
        if self.file.is_none() {
            match File::open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(_) => return Ok(0),
            }
        }
        let file = self.file.as_mut().expect("opened above");
        file.read_to_end(&mut self.pending)?;
        if self.header.is_none() {
            self.read_header()?;
        }
        // The header and the samples after it may arrive in one read (a short run read
        // only once QEMU exited): go on to the samples.
        let Some((_, header_bytes)) = &self.header else {
            return Ok(0);
        };
        let mut r = RawReader::new(Cursor::new(header_bytes).chain(&self.pending[..]))?;
        let header_len = header_bytes.len() as u64;
        let mut n = 0;
        let finished = &mut self.finished;
        decode_raw(
            &mut r,
            &mut self.code,
            &mut self.tasks,
            None,
            |rec, _| *finished |= matches!(rec, Record::Stats(_)),
            |s| {
                on_sample(s);
                n += 1;
            },
        )?;
        let parsed = match r.truncation() {
            Some(t) => t.offset,
            None => r.offset(),
        };
        let used = (parsed.saturating_sub(header_len) as usize).min(self.pending.len());
        self.pending.drain(..used);
        Ok(n)
    }

    /// Takes the header out of `pending` once it is whole.
    fn read_header(&mut self) -> Result<(), FormatError> {
        match RawReader::new(&self.pending[..]) {
            Ok(r) => {
                let len = r.record_offset() as usize;
                let header = r.header().clone();
                let bytes: Vec<u8> = self.pending.drain(..len).collect();
                self.header = Some((header, bytes));
                Ok(())
            }
            Err(FormatError::ShortHeader(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kern_profile_format::{encode_sample, Arch, SampleRecord, SamplingMode, Stats, StopReason};
    use kern_profile_test_support::raw_file::marked_header;
    use std::io::Write;

    fn header() -> Vec<u8> {
        let h = Header {
            start_unix_ns: 1,
            ..marked_header(Arch::I386, SamplingMode::DelayMicros(10), 2)
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        b
    }

    fn sample(vcpu: u32, pc: u64) -> Vec<u8> {
        let mut b = Vec::new();
        let rec = SampleRecord {
            vcpu,
            user: false,
            stop: StopReason::NullFramePointer.into(),
            time_ns: 5,
            icount: 0,
            pc,
            sp: 0x9000,
            sp_word: None,
            frames: &[0x1100, 0x1010],
            entry_resolved: false,
        };
        encode_sample(&mut b, 4, &rec);
        b
    }

    #[test]
    fn follows_a_growing_file_through_torn_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raw");
        let mut tail = RawTail::new(&path);
        let mut seen = Vec::new();
        let mut poll = |tail: &mut RawTail| {
            tail.poll(|s| seen.push((s.vcpu, s.addrs.to_vec())))
                .unwrap()
        };
        assert_eq!(poll(&mut tail), 0, "no file yet");
        let mut f = std::fs::File::create(&path).unwrap();
        let h = header();
        f.write_all(&h[..5]).unwrap();
        assert_eq!(poll(&mut tail), 0, "half a header");
        f.write_all(&h[5..]).unwrap();
        let (a, b) = (sample(0, 0x1204), sample(1, 0x1300));
        f.write_all(&a).unwrap();
        f.write_all(&b[..7]).unwrap();
        assert_eq!(
            poll(&mut tail),
            1,
            "the header, then the whole record, not the torn one"
        );
        assert_eq!(poll(&mut tail), 0, "nothing new");
        f.write_all(&b[7..]).unwrap();
        assert_eq!(poll(&mut tail), 1);
        assert!(!tail.finished);
        let mut stats = Vec::new();
        Stats::default().encode(&mut stats);
        f.write_all(&stats).unwrap();
        assert_eq!(poll(&mut tail), 0);
        assert!(tail.finished);
        assert_eq!(
            seen,
            vec![
                (0, vec![0x1204, 0x1100, 0x1010]),
                (1, vec![0x1300, 0x1100, 0x1010])
            ]
        );
    }

    /// A run shorter than one refresh: the first read finds the whole file, header, samples
    /// and statistics, and takes them all (the last table showed "no samples yet").
    #[test]
    fn a_whole_file_in_one_read_gives_its_samples() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raw");
        let mut bytes = header();
        bytes.extend(sample(0, 0x1204));
        bytes.extend(sample(1, 0x1300));
        Stats::default().encode(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let mut tail = RawTail::new(&path);
        assert_eq!(tail.poll(|_| {}).unwrap(), 2);
        assert!(tail.finished);
    }
}
