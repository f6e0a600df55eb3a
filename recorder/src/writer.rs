//! The writer thread: receives batches of encoded records over a bounded channel and writes
//! them through a large buffer, flushing at least every `flush_interval`. Senders never
//! block: a batch that does not fit in the channel is dropped and its samples counted.

use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};

/// Encoded records and how many samples they hold.
#[derive(Debug, Default)]
pub struct Batch {
    pub bytes: Vec<u8>,
    pub samples: u64,
}

enum Msg {
    Batch(Batch),
    Finish,
}

/// Writer settings.
#[derive(Debug, Clone, Copy)]
pub struct WriterConfig {
    /// Batches the channel holds before senders start dropping.
    pub channel_batches: usize,
    /// Size of the write buffer.
    pub buffer_bytes: usize,
    /// Data reaches the file at most this long after the writer received it.
    pub flush_interval: Duration,
    /// Capacity of fresh batch buffers.
    pub batch_bytes: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            channel_batches: 256,
            buffer_bytes: 1 << 20,
            flush_interval: Duration::from_millis(250),
            batch_bytes: 64 << 10,
        }
    }
}

/// What the writer thread hands back when finished.
pub struct Finished<W: Write> {
    /// The output, flushed, positioned after the last batch.
    pub out: BufWriter<W>,
    /// Samples of batches written successfully.
    pub samples_written: u64,
    /// Samples of batches that could not be written after an I/O error.
    pub samples_failed: u64,
    /// The first I/O error, if any.
    pub error: Option<io::Error>,
}

/// The senders' side, shared by every vCPU.
pub struct Writer<W: Write + Send + 'static> {
    tx: Sender<Msg>,
    pool: Receiver<Vec<u8>>,
    dropped: AtomicU64,
    batch_bytes: usize,
    thread: Mutex<Option<JoinHandle<Finished<W>>>>,
}

impl<W: Write + Send + 'static> Writer<W> {
    /// Starts the writer thread over `out`.
    pub fn spawn(out: W, cfg: WriterConfig) -> io::Result<Self> {
        let (tx, rx) = bounded(cfg.channel_batches.max(1));
        let (pool_tx, pool) = bounded(cfg.channel_batches.max(1));
        let thread = thread::Builder::new()
            .name("kern-profile-writer".into())
            .spawn(move || run(out, rx, pool_tx, cfg))?;
        Ok(Writer {
            tx,
            pool,
            dropped: AtomicU64::new(0),
            batch_bytes: cfg.batch_bytes,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// An empty buffer for a new batch, recycled when possible.
    pub fn fresh_buffer(&self) -> Vec<u8> {
        self.pool
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(self.batch_bytes))
    }

    /// Hands a batch to the writer without blocking. When the channel is full (or the writer
    /// is gone) the batch is dropped and its samples are counted; its buffer is returned,
    /// emptied, for reuse.
    pub fn submit(&self, batch: Batch) -> Option<Vec<u8>> {
        if batch.bytes.is_empty() {
            return Some(batch.bytes);
        }
        match self.tx.try_send(Msg::Batch(batch)) {
            Ok(()) => None,
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => {
                let Msg::Batch(mut b) = m else { return None };
                self.dropped.fetch_add(b.samples, Ordering::Relaxed);
                b.bytes.clear();
                Some(b.bytes)
            }
        }
    }

    /// Hands a batch to the writer, waiting for room: for the exit path only.
    pub fn submit_blocking(&self, batch: Batch) {
        if batch.bytes.is_empty() {
            return;
        }
        let samples = batch.samples;
        if self.tx.send(Msg::Batch(batch)).is_err() {
            self.dropped.fetch_add(samples, Ordering::Relaxed);
        }
    }

    /// Samples dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes everything submitted so far, stops the thread and returns the output.
    /// Returns `None` when already finished (or the thread died).
    pub fn finish(&self) -> Option<Finished<W>> {
        let handle = self.thread.lock().ok()?.take()?;
        let _ = self.tx.send(Msg::Finish);
        handle.join().ok()
    }
}

fn run<W: Write>(
    out: W,
    rx: Receiver<Msg>,
    pool: Sender<Vec<u8>>,
    cfg: WriterConfig,
) -> Finished<W> {
    let mut f = Finished {
        out: BufWriter::with_capacity(cfg.buffer_bytes, out),
        samples_written: 0,
        samples_failed: 0,
        error: None,
    };
    let mut last_flush = Instant::now();
    let mut dirty = false;
    loop {
        let wait = if dirty {
            cfg.flush_interval.saturating_sub(last_flush.elapsed())
        } else {
            Duration::from_secs(3600)
        };
        match rx.recv_timeout(wait) {
            Ok(Msg::Batch(mut b)) => {
                if f.error.is_none() {
                    match f.out.write_all(&b.bytes) {
                        Ok(()) => {
                            f.samples_written += b.samples;
                            dirty = true;
                        }
                        Err(e) => {
                            f.samples_failed += b.samples;
                            f.error = Some(e);
                        }
                    }
                } else {
                    f.samples_failed += b.samples;
                }
                b.bytes.clear();
                let _ = pool.try_send(b.bytes);
            }
            Ok(Msg::Finish) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if dirty && last_flush.elapsed() >= cfg.flush_interval {
            if let Err(e) = f.out.flush() {
                f.error.get_or_insert(e);
            }
            dirty = false;
            last_flush = Instant::now();
        }
    }
    if let Err(e) = f.out.flush() {
        f.error.get_or_insert(e);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Condvar};

    /// A shared in-memory output that records flushes and can be held shut.
    #[derive(Clone, Default)]
    struct Sink {
        data: Arc<Mutex<Vec<u8>>>,
        flushes: Arc<AtomicU64>,
        gate: Arc<(Mutex<bool>, Condvar)>,
        fail: bool,
    }

    impl Sink {
        fn close_gate(&self) {
            *self.gate.0.lock().unwrap() = true;
        }
        fn open_gate(&self) {
            *self.gate.0.lock().unwrap() = false;
            self.gate.1.notify_all();
        }
        fn bytes(&self) -> Vec<u8> {
            self.data.lock().unwrap().clone()
        }
    }

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let mut closed = self.gate.0.lock().unwrap();
            while *closed {
                closed = self.gate.1.wait(closed).unwrap();
            }
            if self.fail {
                return Err(io::Error::other("disk full"));
            }
            self.data.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            self.flushes.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    fn batch(byte: u8, n: usize, samples: u64) -> Batch {
        Batch {
            bytes: vec![byte; n],
            samples,
        }
    }

    #[test]
    fn batches_arrive_in_order_and_finish_flushes() {
        let sink = Sink::default();
        let w = Writer::spawn(sink.clone(), WriterConfig::default()).unwrap();
        for i in 0..10u8 {
            assert!(w.submit(batch(i, 100, 2)).is_none());
        }
        let f = w.finish().unwrap();
        assert_eq!(f.samples_written, 20);
        assert_eq!(f.samples_failed, 0);
        assert!(f.error.is_none());
        let data = sink.bytes();
        assert_eq!(data.len(), 1000);
        assert!(data
            .chunks(100)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&b| b == i as u8)));
        assert_eq!(w.dropped(), 0);
        assert!(w.finish().is_none(), "finish only once");
    }

    #[test]
    fn data_reaches_the_output_without_finish() {
        let sink = Sink::default();
        let cfg = WriterConfig {
            flush_interval: Duration::from_millis(20),
            buffer_bytes: 1 << 20,
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink.clone(), cfg).unwrap();
        w.submit(batch(7, 10, 1));
        let t = Instant::now();
        while sink.bytes().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(2), "never flushed");
            thread::sleep(Duration::from_millis(5));
        }
        assert!(sink.flushes.load(Ordering::Relaxed) >= 1);
        w.finish();
    }

    #[test]
    fn a_full_channel_drops_and_counts() {
        let sink = Sink::default();
        sink.close_gate();
        let cfg = WriterConfig {
            channel_batches: 2,
            buffer_bytes: 0,
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink.clone(), cfg).unwrap();
        let mut returned = 0;
        for _ in 0..10 {
            if let Some(v) = w.submit(batch(1, 10, 3)) {
                assert!(v.is_empty());
                returned += 1;
            }
        }
        // One batch may be held by the blocked writer, two in the channel.
        assert!(returned >= 7, "{returned}");
        assert_eq!(w.dropped(), returned * 3);
        sink.open_gate();
        let f = w.finish().unwrap();
        assert_eq!(f.samples_written + w.dropped(), 30);
        assert_eq!(sink.bytes().len() as u64, f.samples_written / 3 * 10);
    }

    #[test]
    fn write_errors_are_counted_not_fatal() {
        let sink = Sink {
            fail: true,
            ..Sink::default()
        };
        let cfg = WriterConfig {
            buffer_bytes: 0,
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink, cfg).unwrap();
        w.submit(batch(1, 10, 4));
        w.submit_blocking(batch(1, 10, 5));
        let f = w.finish().unwrap();
        assert_eq!(f.samples_written, 0);
        assert_eq!(f.samples_failed, 9);
        assert!(f.error.unwrap().to_string().contains("disk full"));
    }

    #[test]
    fn buffers_are_recycled() {
        let sink = Sink::default();
        let w = Writer::spawn(sink, WriterConfig::default()).unwrap();
        let mut b = w.fresh_buffer();
        assert!(b.capacity() >= 64 << 10);
        b.extend_from_slice(&[1; 1000]);
        let ptr = b.as_ptr();
        w.submit(Batch {
            bytes: b,
            samples: 1,
        });
        let t = Instant::now();
        loop {
            let v = w.fresh_buffer();
            if v.as_ptr() == ptr {
                assert!(v.is_empty());
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(2));
            thread::sleep(Duration::from_millis(1));
        }
        assert!(
            w.submit(Batch::default()).is_some(),
            "empty batches are not sent"
        );
        w.finish();
    }
}
