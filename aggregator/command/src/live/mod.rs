//! `kern-profile top`: the hottest functions of a running guest, like `perf top`, from the
//! raw file the plugin is writing ([`tail`]), counted as they come and named as the report
//! names them ([`profile`]), shown about once a second ([`view`]). On a terminal the table
//! redraws in place (keys: `c` next vCPU, `s` self/total, `t` by function, guest thread or
//! process, `q` or Ctrl-C stops QEMU); otherwise (a pipe, a log, a test) a
//! table is printed every interval. Either way the recording is kept for `kern-profile
//! report`, and the last table is printed when QEMU exits. The recording comes from the
//! plugin, or from the gdbstub sampler of `top --gdb`: the same file either way ([`LiveRun`]).

pub mod profile;
pub mod tail;
pub mod view;

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::{cursor, execute, queue, terminal};

use std::path::PathBuf;

use crate::filter::SampleFilter;
use crate::job::SymbolSources;
use crate::record::gdb_launch::GdbRunning;
use crate::record::launch::{describe_status, Guest};
use crate::record::{RecordError, Running};
use crate::stacks::{KeyBuilder, NameStyle, StackNamer};
use crate::ReportBy;

use profile::LiveProfile;
use tail::RawTail;
use view::{render, Status, View};

/// How `top` shows things.
#[derive(Debug, Clone)]
pub struct TopOptions {
    /// Time between two tables.
    pub interval: Duration,
    /// Rows of the table (on a terminal: at most what fits).
    pub rows: usize,
    /// Redraw in place and read keys (a terminal); else print a table every interval.
    pub interactive: bool,
    /// Its keys carry each sample's task ([`SampleFilter::task_keys`]), for the tables by
    /// task or process.
    pub filter: SampleFilter,
    pub style: NameStyle,
    /// The table shown first: by function, or the samples per guest thread or process.
    pub by: ReportBy,
}

/// A running QEMU whose recording grows as it runs.
pub trait LiveRun {
    fn guest(&mut self) -> &mut Guest;
    fn sources(&self) -> &SymbolSources;
    /// The recording being written.
    fn raw_partial(&self) -> PathBuf;
}

impl LiveRun for Running {
    fn guest(&mut self) -> &mut Guest {
        &mut self.guest
    }
    fn sources(&self) -> &SymbolSources {
        &self.session.sources
    }
    fn raw_partial(&self) -> PathBuf {
        Running::raw_partial(self)
    }
}

impl LiveRun for GdbRunning {
    fn guest(&mut self) -> &mut Guest {
        &mut self.guest
    }
    fn sources(&self) -> &SymbolSources {
        &self.sources
    }
    fn raw_partial(&self) -> PathBuf {
        GdbRunning::raw_partial(self)
    }
}

/// Runs the live view until QEMU exits, writing tables to `out` (the final one too); the
/// caller then finishes `running` (keeps its recording).
pub fn run_top(
    running: &mut dyn LiveRun,
    opts: &TopOptions,
    out: &mut dyn Write,
) -> Result<(), RecordError> {
    let mut sym = running.sources().load()?;
    let mut namer = StackNamer::new(&mut sym, opts.style);
    let keys = KeyBuilder::new(&opts.filter).with_markers(true);
    let mut live = LiveProfile::default();
    let mut tail = RawTail::new(&running.raw_partial());
    let mut view = View {
        by: opts.by,
        ..View::default()
    };
    let start = Instant::now();
    let mut screen = if opts.interactive {
        Some(Screen::enter().map_err(io_err("cannot set up the terminal"))?)
    } else {
        None
    };
    let mut exited = None;
    let mut deadline = start + opts.interval;
    loop {
        if exited.is_none() {
            exited = running.guest().try_wait()?;
        }
        // A bad record (not a torn one) ends the live view; the recording is still kept.
        let _ = tail.poll(|s| live.add(s, &keys, namer.symbolizer()));
        let status = Status {
            elapsed: start.elapsed(),
            exited: exited.as_ref().map(describe_status),
            keys: screen.is_some(),
        };
        if exited.is_some() {
            break;
        }
        let table = live.table(&mut namer, &opts.filter.names, tail.tasks(), view.by);
        match &mut screen {
            Some(sc) => {
                let (w, h) = terminal::size().unwrap_or((80, 24));
                let size = (w as usize, h as usize);
                let lines = render(&table, view, &status, opts.rows, size);
                sc.draw(&lines).map_err(io_err("cannot draw"))?;
                match sc.key_until(deadline).map_err(io_err("cannot read keys"))? {
                    Some(Key::Quit) => running.guest().interrupt(),
                    Some(Key::NextVcpu) => view.next_vcpu(&table.vcpus()),
                    Some(Key::Order) => view.by_total = !view.by_total,
                    Some(Key::By) => view.next_by(),
                    None => deadline += opts.interval,
                }
            }
            None => {
                let lines = render(&table, view, &status, opts.rows, (0, 0));
                write_lines(out, &lines).map_err(io_err("cannot write"))?;
                wait_until(running, deadline)?;
                deadline += opts.interval;
            }
        }
        // After a slow pass, restart the cadence rather than redraw back to back.
        if deadline < Instant::now() {
            deadline = Instant::now() + opts.interval;
        }
    }
    drop(screen);
    let status = Status {
        elapsed: start.elapsed(),
        exited: exited.as_ref().map(describe_status),
        keys: false,
    };
    let table = live.table(&mut namer, &opts.filter.names, tail.tasks(), view.by);
    let lines = render(&table, view, &status, opts.rows, (0, 0));
    write_lines(out, &lines).map_err(io_err("cannot write"))
}

/// Sleeps until `deadline`, waking early when QEMU exits.
fn wait_until(running: &mut dyn LiveRun, deadline: Instant) -> Result<(), RecordError> {
    while Instant::now() < deadline {
        if running.guest().try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50).min(deadline - Instant::now()));
    }
    Ok(())
}

fn write_lines(out: &mut dyn Write, lines: &[String]) -> io::Result<()> {
    for l in lines {
        writeln!(out, "{l}")?;
    }
    writeln!(out)?;
    out.flush()
}

fn io_err(what: &'static str) -> impl Fn(io::Error) -> RecordError {
    move |source| RecordError::Io {
        what: what.into(),
        source,
    }
}

/// A key that does something.
enum Key {
    Quit,
    NextVcpu,
    Order,
    By,
}

/// The terminal in raw mode on its alternate screen, restored when dropped.
struct Screen;

impl Screen {
    fn enter() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let screen = Screen;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(screen)
    }

    fn draw(&mut self, lines: &[String]) -> io::Result<()> {
        let mut out = io::stdout().lock();
        queue!(
            out,
            cursor::MoveTo(0, 0),
            terminal::Clear(terminal::ClearType::All)
        )?;
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                out.write_all(b"\r\n")?;
            }
            out.write_all(l.as_bytes())?;
        }
        out.flush()
    }

    /// The first key pressed before `deadline`.
    fn key_until(&mut self, deadline: Instant) -> io::Result<Option<Key>> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !event::poll(left)? {
                return Ok(None);
            }
            let Event::Key(k) = event::read()? else {
                continue;
            };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            let ctrl_c =
                k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
            return Ok(Some(match k.code {
                _ if ctrl_c => Key::Quit,
                KeyCode::Char('q') | KeyCode::Esc => Key::Quit,
                KeyCode::Char('c') => Key::NextVcpu,
                KeyCode::Char('s') => Key::Order,
                KeyCode::Char('t') => Key::By,
                _ => continue,
            }));
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}
