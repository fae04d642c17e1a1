//! Standard output and standard error for a process that must not stop
//! when nobody reads them: the daemon and the dashboard. A write to a pipe
//! whose reader stalls (a log collector that is down, a container runtime
//! whose log driver blocks, `jobhost daemon | slow-filter`) blocks once the
//! pipe's buffer is full; a daemon blocked there runs nothing more, and its
//! jobs turn late. So such a process hands each line to a thread of the
//! stream's own, which writes while the process goes on. What waits to be
//! written is bounded ([`QUEUED`] bytes a stream); a line past that is
//! dropped and counted, and the count is said on the stream before the next
//! line that gets through (what the daemon's lines tell of is in the store:
//! `jobhost history`). At exit the lines still waiting get a bounded time
//! ([`FINISH`]) to go. Other commands write as they always did.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// The most bytes a stream keeps waiting to be written.
pub const QUEUED: usize = 8 << 20;

/// How long the lines still waiting at exit get to be written.
pub const FINISH: Duration = Duration::from_secs(5);

/// What holding one line costs besides its bytes (its buffer and its place
/// in the queue), counted against [`QUEUED`].
const LINE_COST: usize = 64;

/// Which standard stream a spool writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One stream's spool: lines queued for its writer thread.
pub struct Spool {
    state: Mutex<State>,
    queued: Arc<AtomicUsize>,
    done: Mutex<Option<Receiver<()>>>,
    limit: usize,
    stream: Stream,
}

/// What the writers of a spool share.
struct State {
    /// `None` once the spool finished.
    tx: Option<Sender<Vec<u8>>>,
    /// Lines dropped since the last one queued, to be said before the next.
    dropped: u64,
}

impl Spool {
    /// A spool writing to `stream`, keeping at most `limit` bytes waiting.
    ///
    /// # Errors
    ///
    /// The thread could not be started.
    pub fn start(stream: Stream, limit: usize) -> std::io::Result<Spool> {
        let write: Box<dyn Write + Send> = match stream {
            Stream::Stdout => Box::new(std::io::stdout()),
            Stream::Stderr => Box::new(std::io::stderr()),
        };
        Spool::over(write, stream, limit)
    }

    /// A spool writing to `out` (a test's pipe), its note on dropped
    /// lines worded for `stream`.
    ///
    /// # Errors
    ///
    /// The thread could not be started.
    pub fn over(
        mut out: Box<dyn Write + Send>,
        stream: Stream,
        limit: usize,
    ) -> std::io::Result<Spool> {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let q = queued.clone();
        std::thread::Builder::new()
            .name(format!("jobhost-{}", stream.name()))
            .spawn(move || {
                // A stream that cannot be written (a reader gone) loses its
                // lines; the process goes on.
                for line in rx {
                    q.fetch_sub(line.len() + LINE_COST, Ordering::SeqCst);
                    let _ = out.write_all(&line);
                    let _ = out.flush();
                }
                let _ = done_tx.send(());
            })?;
        Ok(Spool {
            state: Mutex::new(State {
                tx: Some(tx),
                dropped: 0,
            }),
            queued,
            done: Mutex::new(Some(done_rx)),
            limit,
            stream,
        })
    }

    /// Queues `line` (whole, its newline included), after the note on the
    /// lines dropped before it if any; or drops and counts it when the
    /// queue is full. A line given after [`Spool::finish`] is dropped.
    pub fn line(&self, line: Vec<u8>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { tx, dropped } = &mut *state;
        let Some(tx) = tx.as_ref() else {
            return;
        };
        // A line is taken when nothing waits, however long; otherwise only
        // within the limit (each line counted with what holding it costs).
        let waiting = self.queued.load(Ordering::SeqCst);
        if waiting > 0 && waiting + line.len() + LINE_COST > self.limit {
            *dropped += 1;
            return;
        }
        if *dropped > 0 {
            self.send(tx, self.stream.dropped_note(*dropped));
            *dropped = 0;
        }
        self.send(tx, line);
    }

    fn send(&self, tx: &Sender<Vec<u8>>, line: Vec<u8>) {
        let len = line.len() + LINE_COST;
        self.queued.fetch_add(len, Ordering::SeqCst);
        if tx.send(line).is_err() {
            self.queued.fetch_sub(len, Ordering::SeqCst);
        }
    }

    /// Lets the lines still waiting go (and the note on the last ones
    /// dropped), for at most `wait`; whether all went. Lines given
    /// afterwards are dropped.
    pub fn finish(&self, wait: Duration) -> bool {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(tx) = state.tx.take()
                && state.dropped > 0
            {
                self.send(&tx, self.stream.dropped_note(state.dropped));
                state.dropped = 0;
            }
        }
        let done = self
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        done.is_some_and(|d| d.recv_timeout(wait).is_ok())
    }
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    /// The line that says `n` lines were dropped: a JSON line on standard
    /// output (where the daemon's lines are JSON), a note on standard error.
    fn dropped_note(self, n: u64) -> Vec<u8> {
        match self {
            Stream::Stdout => format!(
                "{{\"event\":\"dropped\",\"lines\":{n},\"detail\":\"standard output was not read \
                 as fast as it was written: {n} line(s) were dropped; the runs they told of are \
                 in the store (`jobhost history`)\"}}\n"
            ),
            Stream::Stderr => format!(
                "jobhost: warning: standard error was not read as fast as it was written: {n} \
                 line(s) were dropped\n"
            ),
        }
        .into_bytes()
    }
}

static STDERR: OnceLock<Spool> = OnceLock::new();
static STDOUT: OnceLock<Arc<Spool>> = OnceLock::new();

/// From now on this process's notes on standard error ([`crate::core::text::say`])
/// go through a spool, and its lines on standard output through the writer
/// this returns: for a process that must not block on either. Called once;
/// a second call returns the same writer.
///
/// # Errors
///
/// A thread could not be started (the streams are then written as before).
pub fn install() -> std::io::Result<Lines> {
    install_stderr()?;
    let out = match STDOUT.get() {
        Some(out) => out.clone(),
        None => {
            let spool = Arc::new(Spool::start(Stream::Stdout, QUEUED)?);
            STDOUT.get_or_init(|| spool).clone()
        }
    };
    Ok(Lines {
        spool: out,
        pending: Vec::new(),
    })
}

/// From now on this process's notes on standard error go through a spool
/// (for a process that writes nothing to standard output).
///
/// # Errors
///
/// The thread could not be started (standard error is then written as
/// before).
pub fn install_stderr() -> std::io::Result<()> {
    if STDERR.get().is_none() {
        let spool = Spool::start(Stream::Stderr, QUEUED)?;
        let _ = STDERR.set(spool);
    }
    Ok(())
}

/// Writes `text` (whole lines) to standard error: queued on its spool when
/// [`install`] made one, else at once, in one write. A stderr that cannot
/// be written is not an error of the command.
pub fn to_stderr(text: &[u8]) {
    match STDERR.get() {
        Some(spool) => spool.line(text.to_vec()),
        None => {
            let _ = std::io::stderr().lock().write_all(text);
        }
    }
}

/// Lets the lines still waiting on the spooled streams go, for at most
/// `wait` in all (nothing to do without [`install`]): [`FINISH`] at a
/// command's end, less on the way out of a second stop signal.
pub fn finish(wait: Duration) {
    let until = std::time::Instant::now() + wait;
    if let Some(out) = STDOUT.get() {
        out.finish(wait);
    }
    if let Some(err) = STDERR.get() {
        err.finish(until.saturating_duration_since(std::time::Instant::now()));
    }
}

/// Calls [`finish`] with [`FINISH`] when dropped: however a command ends,
/// a panic included, what it said gets its time to go.
pub struct Finish;

impl Drop for Finish {
    fn drop(&mut self) {
        finish(FINISH);
    }
}

/// A writer of whole lines onto a spool: what is written up to a newline
/// is queued as one line.
pub struct Lines {
    spool: Arc<Spool>,
    pending: Vec<u8>,
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&rest[..=at]);
            self.spool.line(std::mem::take(&mut self.pending));
            rest = &rest[at + 1..];
        }
        self.pending.extend_from_slice(rest);
        // Text that never ends its line is not held without bound.
        if self.pending.len() > self.spool.limit {
            self.spool.line(std::mem::take(&mut self.pending));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that blocks until told, then keeps what it is given; it
    /// says when a write first reached it.
    struct Gate {
        open: Arc<(Mutex<bool>, std::sync::Condvar)>,
        kept: Arc<Mutex<Vec<u8>>>,
        reached: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.reached.store(true, Ordering::SeqCst);
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            self.kept.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_reader_holds_up_no_writer_lines_past_the_limit_are_dropped_and_said_once_it_reads()
    {
        let open = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let kept = Arc::new(Mutex::new(Vec::new()));
        let reached = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gate = Gate {
            open: open.clone(),
            kept: kept.clone(),
            reached: reached.clone(),
        };
        // Room for 10 lines of 10 bytes, each with what holding it costs.
        let spool = Spool::over(Box::new(gate), Stream::Stdout, 10 * (10 + LINE_COST)).unwrap();
        let mut lines = Lines {
            spool: Arc::new(spool),
            pending: Vec::new(),
        };
        // The reader reads nothing: every write returns at once. The first
        // line is taken by the writer thread, which blocks on it; then the
        // queue holds 10 of the rest (each given in two pieces), and the
        // other 39 are dropped.
        let mut line = |i: usize| {
            write!(lines, "{{\"n\":").unwrap();
            writeln!(lines, "{i:03}}}").unwrap();
        };
        line(0);
        while !reached.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        for i in 1..50 {
            line(i);
        }
        let (lock, cv) = &*open;
        *lock.lock().unwrap() = true;
        cv.notify_all();
        assert!(
            lines.spool.finish(Duration::from_secs(10)),
            "all that was queued went"
        );
        let text = String::from_utf8(kept.lock().unwrap().clone()).unwrap();
        let got: Vec<&str> = text.lines().collect();
        // The lines that got through are whole, the first ones, in order;
        // then one JSON line counting the rest, where they would have been.
        let (note, numbered) = got.split_last().unwrap();
        assert_eq!(numbered.len(), 11, "{got:?}");
        for (i, l) in numbered.iter().enumerate() {
            assert_eq!(*l, format!("{{\"n\":{i:03}}}"), "{got:?}");
        }
        let note: serde_json::Value = serde_json::from_str(note).unwrap();
        assert_eq!(note["event"], "dropped");
        assert_eq!(
            note["lines"].as_u64().unwrap() + numbered.len() as u64,
            50,
            "{got:?}"
        );
        // After finishing, a line is dropped, not queued.
        lines.spool.line(b"late\n".to_vec());
        assert!(
            !String::from_utf8(kept.lock().unwrap().clone())
                .unwrap()
                .contains("late")
        );
    }

    #[test]
    fn a_line_longer_than_the_limit_goes_when_nothing_waits() {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let gate = Gate {
            open: Arc::new((Mutex::new(true), std::sync::Condvar::new())),
            kept: kept.clone(),
            reached: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        let spool = Spool::over(Box::new(gate), Stream::Stderr, 100).unwrap();
        let long = format!("{}\n", "x".repeat(1000));
        spool.line(long.clone().into_bytes());
        assert!(spool.finish(Duration::from_secs(10)));
        assert_eq!(
            String::from_utf8(kept.lock().unwrap().clone()).unwrap(),
            long
        );
    }

    #[test]
    fn a_reader_that_keeps_up_gets_every_line_whole_and_in_order() {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let gate = Gate {
            open: Arc::new((Mutex::new(true), std::sync::Condvar::new())),
            kept: kept.clone(),
            reached: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        let spool = Arc::new(Spool::over(Box::new(gate), Stream::Stderr, QUEUED).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let spool = spool.clone();
                std::thread::spawn(move || {
                    let mut lines = Lines {
                        spool,
                        pending: Vec::new(),
                    };
                    for i in 0..500 {
                        writeln!(lines, "thread {t} line {i}").unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(spool.finish(Duration::from_secs(10)));
        let text = String::from_utf8(kept.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 2000);
        for t in 0..4 {
            let mine: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(&format!("thread {t} ")))
                .collect();
            let want: Vec<String> = (0..500).map(|i| format!("thread {t} line {i}")).collect();
            assert_eq!(mine, want);
        }
    }
}
