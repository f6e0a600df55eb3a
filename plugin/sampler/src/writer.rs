//! The writer thread: receives batches of encoded records over a bounded channel and writes
//! each one to the output as it comes (no buffer of its own: the operating system's page
//! cache keeps what a killed QEMU wrote). A sender whose batch does not fit in the channel
//! waits for room, at most [`SUBMIT_WAIT`] and only while the writer keeps up: a writer
//! starved of CPU (more busy vCPUs than host cores) then runs, and nothing is lost; a stuck
//! writer costs one wait, after which a batch that does not fit is dropped at once and its
//! samples counted, until the channel has room again. A sample counts as written only once
//! its bytes reached the output; the first write error is reported when it happens, through
//! the `on_error` hook, and every later batch is counted as failed.
//!
//! Two bounds change what is written: `flight` keeps batches in a ring
//! ([`FlightRing`]) until [`Writer::dump`] or the end, and `max_size` stops writing once
//! the output would pass that many bytes; what either leaves out is counted apart from
//! the drops.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::{self, JoinHandle};

use crossbeam_channel::{
    bounded, Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError,
};

use crate::flight::{Evicted, FlightConfig, FlightRing};
use kern_profile_format::stack_table::Compactor;

/// Encoded records and how many samples (and allocation events) they hold.
#[derive(Debug, Default)]
pub struct Batch {
    pub bytes: Vec<u8>,
    pub samples: u64,
    pub events: u64,
    /// Host time of its newest record (ns): the flight ring's age.
    pub last_ns: u64,
}

enum Msg {
    Batch(Batch),
    /// Write the flight ring now, and every batch after it as it comes.
    Dump,
    Finish,
}

/// An output that says how many bytes it holds (for `max_size`).
pub trait Output: Write {
    /// Bytes in the output so far, after the last flush.
    fn size(&mut self) -> u64;
}

/// Writer settings.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// Batches the channel holds before senders start dropping.
    pub channel_batches: usize,
    /// Capacity of fresh batch buffers.
    pub batch_bytes: usize,
    /// The longest a sender waits for room ([`SUBMIT_WAIT`]).
    pub submit_wait: std::time::Duration,
    /// `flight=`: keep the last seconds in a ring instead of writing.
    pub flight: Option<FlightConfig>,
    /// `flight_dump=`: a file whose appearance writes the ring, as [`Writer::dump`] does
    /// (`kern-profile record` makes it on SIGUSR1); looked for every [`DUMP_POLL`], and
    /// removed once seen.
    pub dump_file: Option<std::path::PathBuf>,
    /// `max_size=`: write no batch that would take the output past this many bytes.
    pub max_size: Option<u64>,
    /// `stacks=on`: the guest's word width; samples are written as references to a stack
    /// table (format version 4, [`Compactor`]) as they leave for the output.
    pub stack_table: Option<usize>,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            channel_batches: 256,
            batch_bytes: 64 << 10,
            submit_wait: SUBMIT_WAIT,
            flight: None,
            dump_file: None,
            max_size: None,
            stack_table: None,
        }
    }
}

/// The longest a vCPU waits for room in the channel before it drops its batch: a few of the
/// host scheduler's time slices, so that a writer thread sharing a core with busy vCPUs runs.
pub const SUBMIT_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// How often the writer thread looks for `dump_file`.
pub const DUMP_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Called once, from the writer thread, with the first write error.
pub type OnError = Box<dyn Fn(&io::Error) + Send>;

/// What the writer thread hands back when finished.
pub struct Finished<W: Write> {
    /// The output, positioned after the last batch written.
    pub out: W,
    /// Samples of batches whose bytes reached the output.
    pub samples_written: u64,
    /// Samples of batches that could not be written after an I/O error.
    pub samples_failed: u64,
    /// Allocation events, likewise.
    pub events_written: u64,
    pub events_failed: u64,
    /// The first I/O error, if any.
    pub error: Option<io::Error>,
    /// `flight=`: what the ring left out for its window or its bytes.
    pub evicted: Evicted,
    /// `max_size=`: samples and events not written because the output was full.
    pub samples_over_size: u64,
    pub events_over_size: u64,
    /// `max_size=`: a batch did not fit, so none after it was written either (the file
    /// stays a prefix of the recording).
    pub full: bool,
    /// `flight=`: whether [`Writer::dump`] wrote the ring before the end.
    pub dumped: bool,
}

/// The senders' side, shared by every vCPU.
pub struct Writer<W: Output + Send + 'static> {
    tx: Sender<Msg>,
    pool: Receiver<Vec<u8>>,
    dropped: AtomicU64,
    dropped_events: AtomicU64,
    /// A wait for room timed out, and the channel has had no room since: drop, do not wait.
    stalled: AtomicBool,
    submit_wait: std::time::Duration,
    batch_bytes: usize,
    thread: Mutex<Option<JoinHandle<Finished<W>>>>,
}

impl<W: Output + Send + 'static> Writer<W> {
    /// Starts the writer thread over `out`; `on_error` hears of the first write error.
    pub fn spawn(out: W, cfg: WriterConfig, on_error: OnError) -> io::Result<Self> {
        let (tx, rx) = bounded(cfg.channel_batches.max(1));
        let (pool_tx, pool) = bounded(cfg.channel_batches.max(1));
        let (batch_bytes, submit_wait) = (cfg.batch_bytes, cfg.submit_wait);
        let thread = thread::Builder::new()
            .name("kern-profile-writer".into())
            .spawn(move || run(out, cfg, rx, pool_tx, on_error))?;
        Ok(Writer {
            tx,
            pool,
            dropped: AtomicU64::new(0),
            dropped_events: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
            submit_wait,
            batch_bytes,
            thread: Mutex::new(Some(thread)),
        })
    }
    /// An empty buffer for a new batch, recycled when possible.
    pub fn fresh_buffer(&self) -> Vec<u8> {
        self.pool
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(self.batch_bytes))
    }

    /// Hands a batch to the writer. When the channel is full it waits for room, at most
    /// `submit_wait` and not while the writer is stalled (see the module's comment); a
    /// batch that still does not fit (or whose writer is gone) is dropped and its samples
    /// are counted, and its buffer is returned, emptied, for reuse.
    pub fn submit(&self, batch: Batch) -> Option<Vec<u8>> {
        if batch.bytes.is_empty() {
            return Some(batch.bytes);
        }
        let m = match self.tx.try_send(Msg::Batch(batch)) {
            Ok(()) => {
                // Read first: every vCPU passes here, and a store would bounce the line.
                if self.stalled.load(Ordering::Relaxed) {
                    self.stalled.store(false, Ordering::Relaxed);
                }
                return None;
            }
            Err(TrySendError::Full(m)) if !self.stalled.load(Ordering::Relaxed) => {
                match self.tx.send_timeout(m, self.submit_wait) {
                    Ok(()) => return None,
                    Err(SendTimeoutError::Timeout(m)) => {
                        self.stalled.store(true, Ordering::Relaxed);
                        m
                    }
                    Err(SendTimeoutError::Disconnected(m)) => m,
                }
            }
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => m,
        };
        let Msg::Batch(mut b) = m else { return None };
        self.dropped.fetch_add(b.samples, Ordering::Relaxed);
        self.dropped_events.fetch_add(b.events, Ordering::Relaxed);
        b.bytes.clear();
        Some(b.bytes)
    }

    /// Hands a batch to the writer, waiting for room: for the exit path only.
    pub fn submit_blocking(&self, batch: Batch) {
        if batch.bytes.is_empty() {
            return;
        }
        let (samples, events) = (batch.samples, batch.events);
        if self.tx.send(Msg::Batch(batch)).is_err() {
            self.dropped.fetch_add(samples, Ordering::Relaxed);
            self.dropped_events.fetch_add(events, Ordering::Relaxed);
        }
    }

    /// `flight=`: writes the ring now (once), then every batch as it comes. Waits for room
    /// in the channel: the caller handed over its own batch first, and that one must be in.
    pub fn dump(&self) {
        let _ = self.tx.send(Msg::Dump);
    }

    /// Samples dropped because the writer fell behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Allocation events dropped because the writer fell behind.
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events.load(Ordering::Relaxed)
    }

    /// Writes everything submitted so far, stops the thread and returns the output.
    /// Returns `None` when already finished (or the thread died).
    pub fn finish(&self) -> Option<Finished<W>> {
        let handle = self.thread.lock().ok()?.take()?;
        let _ = self.tx.send(Msg::Finish);
        handle.join().ok()
    }
}

fn run<W: Output>(
    out: W,
    cfg: WriterConfig,
    rx: Receiver<Msg>,
    pool: Sender<Vec<u8>>,
    on_error: OnError,
) -> Finished<W> {
    let mut w = Outlet {
        f: Finished {
            out,
            samples_written: 0,
            samples_failed: 0,
            events_written: 0,
            events_failed: 0,
            error: None,
            evicted: Evicted::default(),
            samples_over_size: 0,
            events_over_size: 0,
            full: false,
            dumped: false,
        },
        max_size: cfg.max_size,
        compactor: cfg.stack_table.map(Compactor::new),
        scratch: Vec::new(),
        on_error,
    };
    let mut ring = cfg.flight.map(FlightRing::new);
    let recycle = |mut bytes: Vec<u8>| {
        bytes.clear();
        let _ = pool.try_send(bytes);
    };
    loop {
        // Once the ring is written, the dump file means nothing.
        let msg = match &cfg.dump_file {
            Some(path) if ring.is_some() => match std::fs::remove_file(path) {
                Ok(()) => Ok(Msg::Dump),
                Err(_) => match rx.recv_timeout(DUMP_POLL) {
                    Ok(m) => Ok(m),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => Err(()),
                },
            },
            _ => rx.recv().map_err(|_| ()),
        };
        match msg {
            Ok(Msg::Batch(b)) => match ring.as_mut() {
                Some(r) => r.push(b).into_iter().for_each(recycle),
                None => {
                    w.write(&b);
                    recycle(b.bytes);
                }
            },
            Ok(Msg::Dump) => {
                w.f.dumped |= ring.is_some();
                w.write_ring(ring.take());
            }
            Ok(Msg::Finish) | Err(_) => {
                w.write_ring(ring.take());
                return w.f;
            }
        }
    }
}

/// The writer thread's side of the output: its counts, its bounds and the stack table.
struct Outlet<W: Output> {
    f: Finished<W>,
    max_size: Option<u64>,
    compactor: Option<Compactor>,
    /// A batch in the stack table's form.
    scratch: Vec<u8>,
    on_error: OnError,
}

impl<W: Output> Outlet<W> {
    /// Writes what the ring holds of its window, oldest first.
    fn write_ring(&mut self, ring: Option<FlightRing>) {
        let Some(mut ring) = ring else { return };
        for b in ring.drain() {
            self.write(&b);
        }
        self.f.evicted = ring.evicted();
    }

    /// Writes one batch, or counts it as failed once an error has been seen, or as over
    /// the size once the output is full (neither is compacted then: nothing follows).
    fn write(&mut self, b: &Batch) {
        let f = &mut self.f;
        if f.error.is_some() {
            f.samples_failed += b.samples;
            f.events_failed += b.events;
            return;
        }
        if f.full {
            f.samples_over_size += b.samples;
            f.events_over_size += b.events;
            return;
        }
        let bytes = match &mut self.compactor {
            Some(c) => {
                self.scratch.clear();
                c.compact(&b.bytes, &mut self.scratch);
                &self.scratch
            }
            None => &b.bytes,
        };
        // A compressed output grows by less than the batch: the bound holds either way.
        f.full = self
            .max_size
            .is_some_and(|max| f.out.size() + bytes.len() as u64 > max);
        if f.full {
            f.samples_over_size += b.samples;
            f.events_over_size += b.events;
            return;
        }
        match f.out.write_all(bytes).and_then(|()| f.out.flush()) {
            Ok(()) => {
                f.samples_written += b.samples;
                f.events_written += b.events;
            }
            Err(e) => {
                (self.on_error)(&e);
                f.samples_failed += b.samples;
                f.events_failed += b.events;
                f.error = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Condvar};
    use std::time::{Duration, Instant};

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

    impl Output for Sink {
        fn size(&mut self) -> u64 {
            self.data.lock().unwrap().len() as u64
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

    fn quiet() -> OnError {
        Box::new(|_| {})
    }

    fn batch(byte: u8, n: usize, samples: u64) -> Batch {
        Batch {
            bytes: vec![byte; n],
            samples,
            events: 0,
            last_ns: 0,
        }
    }

    #[test]
    fn batches_arrive_in_order_and_finish_flushes() {
        let sink = Sink::default();
        let w = Writer::spawn(sink.clone(), WriterConfig::default(), quiet()).unwrap();
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
    fn allocation_events_are_counted_apart_from_samples() {
        let sink = Sink::default();
        sink.close_gate();
        let cfg = WriterConfig {
            channel_batches: 1,
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink.clone(), cfg, quiet()).unwrap();
        let with_events = |n| Batch {
            bytes: vec![1; 8],
            samples: 1,
            events: n,
            last_ns: 0,
        };
        for _ in 0..5 {
            w.submit(with_events(10));
        }
        sink.open_gate();
        let f = w.finish().unwrap();
        assert!(w.dropped_events() >= 30, "{}", w.dropped_events());
        assert_eq!(f.events_written + w.dropped_events(), 50);
        assert_eq!(f.events_written, 10 * f.samples_written);
    }

    #[test]
    fn data_reaches_the_output_without_finish() {
        let sink = Sink::default();
        let w = Writer::spawn(sink.clone(), WriterConfig::default(), quiet()).unwrap();
        w.submit(batch(7, 10, 1));
        let t = Instant::now();
        while sink.bytes().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(2), "never written");
            thread::sleep(Duration::from_millis(5));
        }
        w.finish();
    }

    #[test]
    fn a_full_channel_drops_and_counts() {
        let sink = Sink::default();
        sink.close_gate();
        let cfg = WriterConfig {
            channel_batches: 2,
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink.clone(), cfg, quiet()).unwrap();
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

    /// A writer that is slow but moving (a starved thread): the sender waits for room and
    /// nothing is dropped.
    #[test]
    fn a_slow_writer_loses_nothing() {
        let sink = Sink::default();
        sink.close_gate();
        let cfg = WriterConfig {
            channel_batches: 2,
            // Far longer than the writer is held up, however loaded the machine.
            submit_wait: Duration::from_secs(60),
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink.clone(), cfg, quiet()).unwrap();
        let gate = sink.clone();
        let opener = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            gate.open_gate();
        });
        for _ in 0..10 {
            assert!(w.submit(batch(1, 10, 3)).is_none());
        }
        opener.join().unwrap();
        assert_eq!(w.dropped(), 0);
        let f = w.finish().unwrap();
        assert_eq!(f.samples_written, 30);
    }

    /// A failing output: nothing counts as written, and the error is reported once, when
    /// it happens (with a buffer in between, batches used to count as written when buffered).
    #[test]
    fn write_errors_are_reported_once_and_nothing_counts_as_written() {
        let sink = Sink {
            fail: true,
            ..Sink::default()
        };
        let reports = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&reports);
        let on_error: OnError = Box::new(move |e| {
            assert!(e.to_string().contains("disk full"));
            seen.fetch_add(1, Ordering::Relaxed);
        });
        let w = Writer::spawn(sink, WriterConfig::default(), on_error).unwrap();
        w.submit(batch(1, 10, 4));
        let t = Instant::now();
        while reports.load(Ordering::Relaxed) == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "the error was not reported"
            );
            thread::sleep(Duration::from_millis(1));
        }
        w.submit_blocking(batch(1, 10, 5));
        let f = w.finish().unwrap();
        assert_eq!(f.samples_written, 0);
        assert_eq!(f.samples_failed, 9);
        assert!(f.error.unwrap().to_string().contains("disk full"));
        assert_eq!(reports.load(Ordering::Relaxed), 1, "reported once");
    }

    #[test]
    fn buffers_are_recycled() {
        let sink = Sink::default();
        let w = Writer::spawn(sink, WriterConfig::default(), quiet()).unwrap();
        let mut b = w.fresh_buffer();
        assert!(b.capacity() >= 64 << 10);
        b.extend_from_slice(&[1; 1000]);
        let ptr = b.as_ptr();
        w.submit(Batch {
            bytes: b,
            samples: 1,
            events: 0,
            last_ns: 0,
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

    fn at(byte: u8, last_ns: u64) -> Batch {
        Batch {
            last_ns,
            ..batch(byte, 10, 1)
        }
    }

    fn flight(window_ns: u64) -> WriterConfig {
        WriterConfig {
            flight: Some(FlightConfig {
                window_ns,
                max_bytes: u64::MAX,
            }),
            ..WriterConfig::default()
        }
    }

    /// Nothing is written before the end; then only the window's batches.
    #[test]
    fn flight_writes_the_window_at_the_end() {
        let sink = Sink::default();
        let w = Writer::spawn(sink.clone(), flight(100), quiet()).unwrap();
        for t in 0..10u8 {
            w.submit_blocking(at(t, t as u64 * 50));
        }
        thread::sleep(Duration::from_millis(20));
        assert!(sink.bytes().is_empty(), "written before the end");
        let f = w.finish().unwrap();
        assert_eq!(f.samples_written, 3);
        assert_eq!(f.evicted.samples, 7);
        assert!(!f.dumped);
        let firsts: Vec<u8> = sink.bytes().chunks(10).map(|c| c[0]).collect();
        assert_eq!(firsts, [7, 8, 9]);
    }

    /// A dump writes the ring, then every batch as it comes.
    #[test]
    fn flight_dump_then_streams() {
        let sink = Sink::default();
        let w = Writer::spawn(sink.clone(), flight(100), quiet()).unwrap();
        for t in 0..4u8 {
            w.submit_blocking(at(t, t as u64 * 100));
        }
        w.dump();
        w.dump();
        w.submit_blocking(at(20, 2000));
        let f = w.finish().unwrap();
        assert!(f.dumped);
        let firsts: Vec<u8> = sink.bytes().chunks(10).map(|c| c[0]).collect();
        assert_eq!(firsts, [2, 3, 20]);
        assert_eq!(f.samples_written, 3);
        assert_eq!(f.evicted.samples, 2);
    }

    /// max_size: the file stays a prefix: no batch after the first that did not fit.
    #[test]
    fn max_size_keeps_a_prefix() {
        let sink = Sink::default();
        let cfg = WriterConfig {
            max_size: Some(35),
            ..WriterConfig::default()
        };
        let w = Writer::spawn(sink.clone(), cfg, quiet()).unwrap();
        for i in 0..5u8 {
            w.submit_blocking(batch(i, 10, 2));
        }
        w.submit_blocking(batch(9, 1, 1));
        let f = w.finish().unwrap();
        assert_eq!(sink.bytes().len(), 30);
        assert_eq!(f.samples_written, 6);
        assert_eq!(f.samples_over_size, 5);
        assert!(f.full);
    }

    /// `dump_file`: its appearance writes the ring, and it is removed.
    #[test]
    fn a_dump_file_writes_the_ring() {
        let sink = Sink::default();
        let path = std::env::temp_dir().join(format!("kp-dump-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let cfg = WriterConfig {
            dump_file: Some(path.clone()),
            ..flight(1_000)
        };
        let w = Writer::spawn(sink.clone(), cfg, quiet()).unwrap();
        w.submit_blocking(at(1, 10));
        std::fs::write(&path, b"").unwrap();
        let t = Instant::now();
        while sink.bytes().is_empty() {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "the ring was not written"
            );
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!path.exists(), "the file is removed");
        w.submit_blocking(at(2, 20));
        let f = w.finish().unwrap();
        assert!(f.dumped);
        assert_eq!(f.samples_written, 2);
    }
}
