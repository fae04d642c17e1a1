//! An open query, whatever its kind: a reader thread that owns the
//! source's connection and builds fixed-size chunks ahead of the guest, and
//! the cursor the guest reads them through. The reader works ahead (it can
//! start before the claim, and builds the next chunk while the guest
//! aggregates this one) but never more than two chunks ahead: one waits in
//! a channel of one while the reader builds the next. Each guest request
//! gets at most the rest of the current chunk, so batch boundaries depend
//! only on the guest's requests, never on timing.
//!
//! A kind drives its reader through [`Reader`]: it opens the source and
//! checks the query, then either refuses it ([`Reader::refuse`]) or hands
//! the running query to [`Reader::run`], which calls the kind's
//! [`Query`] for the columns and then chunk after chunk.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use super::batch::{Batch, Chunk, ColumnInfo, ColumnKind};
use super::{Bounds, DIVERGENCE, Divergence, Recorded, Source, SourceError};

pub(super) type Reply = std::result::Result<Option<Batch>, SourceError>;

/// Stops a running query from another thread (the run's deadline, a cursor
/// dropped while its reader waits on the source).
pub(super) type Interrupter = Box<dyn Fn() + Send + Sync>;

/// A query a kind has started, read by [`Reader::run`].
pub(super) trait Query {
    /// The result's columns. Runs the query's first step (which may be
    /// slow); an error is the query failing while it runs.
    fn columns(&mut self) -> std::result::Result<Vec<ColumnInfo>, String>;

    /// Appends rows to `chunk` until it is full or the result ends;
    /// answers whether more rows may follow.
    fn next_chunk(&mut self, chunk: &mut Chunk<'_>) -> std::result::Result<bool, SourceError>;
}

/// What the reader reports as it starts: first that the query is valid
/// (checked and bound), then, after its first step, the columns.
enum Progress {
    Prepared,
    Ready(Vec<ColumnInfo>),
}

/// Why the reader could not start: the query or source is wrong (the
/// user's input), or the query failed while running (the source's state).
#[derive(Debug)]
pub(super) enum StartFailure {
    Invalid(String),
    Failed(String),
}

impl StartFailure {
    pub(super) fn into_source_error(self) -> SourceError {
        match self {
            StartFailure::Invalid(m) | StartFailure::Failed(m) => SourceError::QueryFailed(m),
        }
    }
}

/// Stops whatever the source's reader is doing, from another thread: the
/// guest's time limit uses it, since a long query blocks in host code where
/// the epoch deadline cannot reach.
#[derive(Clone, Default)]
pub struct SourceInterrupt(Arc<std::sync::Mutex<Option<Interrupter>>>);

impl SourceInterrupt {
    /// Interrupts the running query, if any.
    pub fn interrupt(&self) {
        if let Some(h) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            h();
        }
    }

    fn set(&self, handle: Option<Interrupter>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = handle;
    }
}

impl std::fmt::Debug for SourceInterrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceInterrupt")
    }
}

/// The reader thread's side of a cursor: where it reports that the query
/// started, its columns, and its chunks.
pub(crate) struct Reader {
    info: SyncSender<std::result::Result<Progress, StartFailure>>,
    chunks: SyncSender<Reply>,
    stop: Arc<AtomicBool>,
    interrupt: SourceInterrupt,
    cap: usize,
    /// Chunks the cursor has asked the channel for.
    requested: Arc<AtomicU64>,
    /// The most chunks built that the cursor had not yet received.
    peak: Arc<AtomicU64>,
    /// Set when the source's own time limit stopped the query.
    out_of_time: Arc<AtomicBool>,
}

impl Reader {
    /// The query or source is the user's mistake: nothing runs.
    pub(super) fn refuse(self, why: String) {
        let _ = self.info.send(Err(StartFailure::Invalid(why)));
    }

    /// The flag a kind sets when the source's own time limit (the run's)
    /// stopped the query.
    pub(super) fn out_of_time(&self) -> Arc<AtomicBool> {
        self.out_of_time.clone()
    }

    /// Rows per chunk.
    pub(super) fn chunk_rows(&self) -> usize {
        self.cap
    }

    /// The source failed before the query could start.
    pub(super) fn fail(self, why: String) {
        let _ = self.info.send(Err(StartFailure::Failed(why)));
    }

    /// Runs a valid query to its end: says it started (so the run may
    /// claim its window), reports its columns after the first step, then
    /// sends chunks until the result ends, the query fails or the cursor is
    /// dropped. `interrupt` stops the query from another thread meanwhile.
    pub(super) fn run<Q: Query>(self, interrupt: Interrupter, mut query: Q) {
        self.interrupt.set(Some(interrupt));
        let last = self.stream(&mut query);
        // Nothing runs any more: an interrupt from now on is a no-op (a
        // cursor dropped after the end sends nothing to the source).
        self.interrupt.set(None);
        match last {
            Some(Last::Start(failure)) => {
                let _ = self.info.send(Err(failure));
            }
            Some(Last::Reply(reply)) => {
                let _ = self.chunks.send(reply);
            }
            None => {}
        }
    }

    /// Sends everything but the last message, which it returns (`None`
    /// when the cursor is gone).
    fn stream<Q: Query>(&self, query: &mut Q) -> Option<Last> {
        self.info.send(Ok(Progress::Prepared)).ok()?;
        let columns = match query.columns() {
            Ok(c) => c,
            Err(e) => return Some(Last::Start(StartFailure::Failed(e))),
        };
        let kinds: Vec<ColumnKind> = columns.iter().map(|c| c.kind).collect();
        self.info.send(Ok(Progress::Ready(columns))).ok()?;
        let mut before: u64 = 0;
        let mut built: u64 = 0;
        loop {
            let mut chunk = Chunk::new(&kinds, self.cap, before, &self.stop);
            let filled = query.next_chunk(&mut chunk);
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            let more = match filled {
                Err(e) => return Some(Last::Reply(Err(e))),
                Ok(more) => more,
            };
            before += chunk.rows() as u64;
            let Some(batch) = chunk.finish() else {
                return Some(Last::Reply(Ok(None)));
            };
            built += 1;
            let ahead = built.saturating_sub(self.requested.load(Ordering::Relaxed));
            self.peak.fetch_max(ahead, Ordering::Relaxed);
            self.chunks.send(Ok(Some(batch))).ok()?;
            if !more {
                return Some(Last::Reply(Ok(None)));
            }
        }
    }
}

/// The last message of a reader.
enum Last {
    Start(StartFailure),
    Reply(Reply),
}

/// An open query: a reader thread that owns the connection and sends
/// fixed-size chunks ahead, and the chunk the guest is part way through.
#[derive(Debug)]
pub struct RowCursor {
    columns: Option<Vec<ColumnInfo>>,
    info: Receiver<std::result::Result<Progress, StartFailure>>,
    chunks: Option<Receiver<Reply>>,
    current: Option<Batch>,
    /// Whether `current` is what is left of a split chunk, whose
    /// dictionaries still hold values of rows already served.
    remainder: bool,
    stop: Arc<AtomicBool>,
    interrupt: SourceInterrupt,
    thread: Option<JoinHandle<()>>,
    finished: bool,
    rows: Arc<AtomicU64>,
    requested: Arc<AtomicU64>,
    peak: Arc<AtomicU64>,
    /// In a replay: where answers the journal lacked are noted.
    divergence: Option<Divergence>,
    /// In a replay: the recorded guest never asked for the columns.
    columns_unrecorded: bool,
}

impl RowCursor {
    pub(super) fn start(
        spec: Source,
        bounds: Bounds,
        cap: u32,
        rows: Arc<AtomicU64>,
        out_of_time: Arc<AtomicBool>,
        interrupt: &SourceInterrupt,
    ) -> std::result::Result<RowCursor, StartFailure> {
        // One chunk waits in the channel while the reader builds the next.
        let (chunk_tx, chunk_rx) = sync_channel::<Reply>(1);
        let (info_tx, info_rx) = sync_channel(2);
        let stop = Arc::new(AtomicBool::new(false));
        let (requested, peak) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let reader = Reader {
            info: info_tx,
            chunks: chunk_tx,
            stop: stop.clone(),
            interrupt: interrupt.clone(),
            cap: cap as usize,
            requested: requested.clone(),
            peak: peak.clone(),
            out_of_time,
        };
        let thread = std::thread::Builder::new()
            .name("jobhost-source".to_string())
            .spawn(move || spec.kind().start(bounds, reader))
            .map_err(|e| StartFailure::Failed(format!("cannot start the source reader: {e}")))?;
        let cursor = RowCursor {
            columns: None,
            info: info_rx,
            chunks: Some(chunk_rx),
            current: None,
            remainder: false,
            stop,
            interrupt: interrupt.clone(),
            thread: Some(thread),
            finished: false,
            rows,
            requested,
            peak,
            divergence: None,
            columns_unrecorded: false,
        };
        // Wait only until the query is known to be valid; its first step
        // (which may be slow) goes on in the background.
        match cursor.info.recv() {
            Ok(Ok(Progress::Prepared)) => Ok(cursor),
            Ok(Ok(Progress::Ready(_))) | Err(_) => Err(StartFailure::Failed(
                "the source reader stopped".to_string(),
            )),
            Ok(Err(failure)) => Err(failure),
        }
    }

    /// A cursor that serves a recorded run's answers, re-cut to whatever
    /// batch size the guest asks for.
    pub(super) fn replayed(
        recorded: Recorded,
        rows: Arc<AtomicU64>,
        divergence: Divergence,
    ) -> RowCursor {
        let (tx, chunks) = std::sync::mpsc::channel::<Reply>();
        let ends = matches!(recorded.replies.last(), Some(Ok(None) | Err(_)));
        for reply in recorded.replies {
            let _ = tx.send(reply);
        }
        if !ends {
            let _ = tx.send(Err(SourceError::InvalidState(format!(
                "{DIVERGENCE}the guest read past the rows the recorded run read; \
                 the journal holds no more"
            ))));
        }
        let (_, info) = std::sync::mpsc::channel();
        RowCursor {
            columns_unrecorded: recorded.columns.is_none(),
            columns: Some(recorded.columns.unwrap_or_default()),
            divergence: Some(divergence),
            info,
            chunks: Some(chunks),
            current: None,
            remainder: false,
            stop: Arc::new(AtomicBool::new(false)),
            interrupt: SourceInterrupt::default(),
            thread: None,
            finished: false,
            rows,
            requested: Arc::new(AtomicU64::new(0)),
            peak: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Waits for the query's first step, which tells the columns.
    ///
    /// # Errors
    ///
    /// `QueryFailed` when the query failed while running.
    pub fn ready(&mut self) -> std::result::Result<(), SourceError> {
        if self.columns.is_some() {
            return Ok(());
        }
        match self.info.recv() {
            Ok(Ok(Progress::Ready(columns))) => {
                self.columns = Some(columns);
                Ok(())
            }
            Ok(Err(failure)) => Err(failure.into_source_error()),
            Ok(Ok(Progress::Prepared)) | Err(_) => Err(SourceError::QueryFailed(
                "the source reader stopped".to_string(),
            )),
        }
    }

    /// The result's columns (empty until [`RowCursor::ready`] succeeded).
    pub fn columns(&self) -> &[ColumnInfo] {
        if let (true, Some(d)) = (self.columns_unrecorded, &self.divergence) {
            d.note("the guest asked for its columns; the recorded run never did");
        }
        self.columns.as_deref().unwrap_or_default()
    }

    /// The most chunks the reader had built ahead of the guest at any
    /// moment: at most two, however large the result.
    pub fn peak_chunks_ahead(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// The next batch: at most `max_rows` rows, and at most the rest of the
    /// current chunk.
    ///
    /// # Errors
    ///
    /// `QueryFailed`/`TypeMismatch` from the reader; `InvalidState` after the end.
    pub fn next_batch(&mut self, max_rows: u32) -> Reply {
        if self.finished {
            return Err(SourceError::InvalidState(
                "the cursor already reported its end".to_string(),
            ));
        }
        let chunk = match self.current.take() {
            Some(chunk) => chunk,
            None => {
                // Counted before the wait, so the reader never sees a chunk
                // taken out of the channel as still ahead.
                self.requested.fetch_add(1, Ordering::Relaxed);
                let received = self.chunks.as_ref().map(Receiver::recv);
                match received {
                    Some(Ok(Ok(Some(chunk)))) => chunk,
                    Some(Ok(other)) => {
                        self.finished = true;
                        if let (Some(d), Err(SourceError::InvalidState(m))) =
                            (&self.divergence, &other)
                            && let Some(what) = m.strip_prefix(DIVERGENCE)
                        {
                            d.note(what);
                        }
                        return other;
                    }
                    Some(Err(_)) | None => {
                        self.finished = true;
                        return Err(SourceError::QueryFailed("the reader stopped".to_string()));
                    }
                }
            }
        };
        let (mut batch, rest) = chunk.split_front(max_rows.max(1));
        if rest.is_none() && self.remainder {
            batch.compact_dictionaries();
        }
        self.remainder = rest.is_some();
        self.current = rest;
        self.rows
            .fetch_add(u64::from(batch.rows), Ordering::Relaxed);
        Ok(Some(batch))
    }
}

impl Drop for RowCursor {
    fn drop(&mut self) {
        // The reader checks the flag between rows and sees the channel
        // close; a query still running on the source is interrupted.
        self.stop.store(true, Ordering::Relaxed);
        self.interrupt.interrupt();
        self.chunks = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
