//! The job's data source: one SQLite database opened read-only and one query
//! whose window bounds are bound as parameters. Rows reach the guest as
//! columnar batches built on a reader thread that owns the connection. The
//! reader works ahead (it can start before the claim, and builds the next
//! chunk while the guest aggregates this one) but never more than two chunks
//! ahead, so a query of any size streams in bounded memory. Chunks are cut
//! at fixed row counts, and each guest request gets at most the rest of the
//! current chunk, so batch boundaries depend only on the guest's requests,
//! never on timing.
//!
//! The query may use these named parameters: `:start` and `:end` (the
//! window's bounds in Unix seconds, `[start, end)`), `:start_ms`/`:end_ms`
//! (milliseconds) and `:start_rfc3339`/`:end_rfc3339` (RFC 3339 UTC text).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use jiff::Timestamp;
use rusqlite::fallible_streaming_iterator::FallibleStreamingIterator;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Statement};
use rustc_hash::FxHashMap;

use crate::core::error::{Error, Result};

/// Parameters the query may use; at least one start and one end are required.
const PARAMS: [&str; 6] = [
    ":start",
    ":end",
    ":start_ms",
    ":end_ms",
    ":start_rfc3339",
    ":end_rfc3339",
];

/// Bytes of text or blob data after which a batch is cut short.
const MAX_BATCH_BYTES: usize = 8 << 20;

/// A configured data source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// The SQLite database file.
    pub path: PathBuf,
    /// The query, using `:start`/`:end` (or their variants) for the window.
    pub query: String,
}

fn open_read_only(path: &Path) -> std::result::Result<Connection, String> {
    if !path.is_file() {
        return Err(format!(
            "data source `{}` does not exist; fix `source.path` in the job config",
            path.display()
        ));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot open data source `{}`: {e}", path.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| format!("cannot open data source `{}`: {e}", path.display()))?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| format!("cannot open data source `{}`: {e}", path.display()))?;
    Ok(conn)
}

fn prepare<'c>(conn: &'c Connection, query: &str) -> std::result::Result<Statement<'c>, String> {
    let stmt = conn
        .prepare(query)
        .map_err(|e| format!("invalid source query: {e}"))?;
    if !stmt.readonly() {
        return Err("invalid source query: it writes; use a SELECT".to_string());
    }
    let has = |names: &[&str]| {
        names
            .iter()
            .any(|n| stmt.parameter_index(n).ok().flatten().is_some())
    };
    if !has(&PARAMS[0..6].iter().step_by(2).copied().collect::<Vec<_>>())
        || !has(&PARAMS[1..6].iter().step_by(2).copied().collect::<Vec<_>>())
    {
        return Err(
            "invalid source query: it must restrict rows to the window with :start and :end \
             (for example `WHERE ts >= :start AND ts < :end`)"
                .to_string(),
        );
    }
    for i in 1..=stmt.parameter_count() {
        match stmt.parameter_name(i) {
            Some(name) if PARAMS.contains(&name) => {}
            other => {
                return Err(format!(
                    "invalid source query: unknown parameter `{}`; use {}",
                    other.unwrap_or("?"),
                    PARAMS.join(", ")
                ));
            }
        }
    }
    Ok(stmt)
}

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ColumnKind {
    /// 64-bit integers.
    Integer,
    /// 64-bit floats.
    Real,
    /// UTF-8 text.
    Text,
    /// Bytes.
    Blob,
}

/// A column's name and type.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ColumnInfo {
    /// Name as the query labels it.
    pub name: String,
    /// Its type.
    pub kind: ColumnKind,
}

/// Values packed end to end with `rows + 1` offsets.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TextData {
    /// Concatenated bytes.
    pub data: Vec<u8>,
    /// Offsets into `data`.
    pub offsets: Vec<u32>,
}

/// One column's values in a batch.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ColumnData {
    /// Integers.
    Integer(Vec<i64>),
    /// Reals.
    Real(Vec<f64>),
    /// Plain text.
    Text(TextData),
    /// Dictionary-encoded text.
    TextDict {
        /// Distinct values.
        values: TextData,
        /// Per-row index into `values`.
        indices: Vec<u32>,
    },
    /// Bytes.
    Blob(TextData),
}

/// One column of a batch.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Column {
    /// NULL bitmap, `None` when no row is NULL.
    pub nulls: Option<Vec<u8>>,
    /// The values.
    pub data: ColumnData,
}

/// Consecutive rows in columnar form.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    /// Row count.
    pub rows: u32,
    /// Columns in query order.
    pub columns: Vec<Column>,
}

/// Why the source could not answer the guest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SourceError {
    /// No source in the config.
    NotConfigured,
    /// The query failed.
    QueryFailed(String),
    /// A value does not fit its column's type.
    TypeMismatch(String),
    /// Misuse: a second cursor, or reading past the end.
    InvalidState(String),
}

/// The run's access to its source: the spec and the window, at most one open
/// cursor at a time, and the number of rows handed out.
#[derive(Debug)]
pub struct SourceAccess {
    spec: Option<SourceSpec>,
    start: Timestamp,
    end: Timestamp,
    batch_rows: u32,
    open: bool,
    early: Option<RowCursor>,
    rows: Arc<AtomicU64>,
    interrupt: SourceInterrupt,
    replay: Option<Replay>,
}

/// A replay's recorded cursors, served in order, and the first answer it
/// had to invent because the journal lacked it.
#[derive(Debug, Default)]
struct Replay {
    sessions: std::collections::VecDeque<Recorded>,
    served: usize,
    divergence: Divergence,
}

/// Where a replay notes the first thing the guest asked that the journal
/// does not hold.
#[derive(Debug, Clone, Default)]
pub struct Divergence(Arc<std::sync::Mutex<Option<String>>>);

impl Divergence {
    fn note(&self, what: &str) {
        let mut slot = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(what.to_string());
        }
    }

    /// The first divergence noted, if any.
    pub fn get(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// A recorded run's source, served again by a replay: the answer to `open`,
/// the columns, and every batch answer in order. When the recorded run
/// stopped reading before the end, a last answer says the journal holds no
/// more rows (a divergence, not a crash).
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// What `open` answered.
    pub open: std::result::Result<(), SourceError>,
    /// The columns, when the recorded guest asked for them.
    pub columns: Option<Vec<ColumnInfo>>,
    /// The batch answers, in order.
    pub replies: Vec<std::result::Result<Option<Batch>, SourceError>>,
}

/// The prefix of every source error a replay invents: the new guest asked
/// for something the journal does not hold.
pub const DIVERGENCE: &str = "replay divergence: ";

impl SourceAccess {
    /// Access that serves a recorded run's cursors, one per `open`, in
    /// order, instead of querying anything.
    pub fn replaying(sessions: Vec<Recorded>) -> Self {
        let mut access = SourceAccess::new(
            None,
            Timestamp::UNIX_EPOCH,
            Timestamp::UNIX_EPOCH,
            std::num::NonZeroU32::MIN,
        );
        access.replay = Some(Replay {
            sessions: sessions.into(),
            ..Replay::default()
        });
        access
    }

    /// In a replay, the first thing the guest asked that the journal does
    /// not hold.
    pub fn divergence(&self) -> Option<String> {
        self.replay.as_ref().and_then(|r| r.divergence.get())
    }

    /// Access for one run over `[start, end)`.
    pub fn new(
        spec: Option<SourceSpec>,
        start: Timestamp,
        end: Timestamp,
        batch_rows: std::num::NonZeroU32,
    ) -> Self {
        SourceAccess {
            spec,
            start,
            end,
            batch_rows: batch_rows.get(),
            open: false,
            early: None,
            rows: Arc::new(AtomicU64::new(0)),
            interrupt: SourceInterrupt::default(),
            replay: None,
        }
    }

    /// A handle that interrupts this run's query from another thread.
    pub fn interrupter(&self) -> SourceInterrupt {
        self.interrupt.clone()
    }

    /// Starts the query ahead of the guest, and waits only until it is known
    /// to be valid: the database opened, the query prepared and bound. The
    /// reader then steps through it while the host claims the window and
    /// instantiates the guest.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file or the query problem.
    pub fn start_early(&mut self) -> Result<()> {
        let Some(spec) = self.spec.clone() else {
            return Ok(());
        };
        let cursor = self.start_cursor(spec).map_err(|e| match e {
            StartFailure::Invalid(m) => Error::Input(m),
            StartFailure::Failed(m) => Error::Source(m),
        })?;
        self.early = Some(cursor);
        Ok(())
    }

    fn start_cursor(&self, spec: SourceSpec) -> std::result::Result<RowCursor, StartFailure> {
        RowCursor::start(
            spec,
            self.start,
            self.end,
            self.batch_rows,
            self.rows.clone(),
            &self.interrupt,
        )
    }

    /// Rows handed to the guest so far.
    pub fn rows_read(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// Starts the query.
    ///
    /// # Errors
    ///
    /// `NotConfigured`, `InvalidState` if a cursor is open, `QueryFailed`.
    pub fn open(&mut self) -> std::result::Result<RowCursor, SourceError> {
        if let Some(replay) = self.replay.as_mut() {
            let Some(recorded) = replay.sessions.pop_front() else {
                let what = if replay.served == 0 {
                    "the guest opened its source; the recorded run never did".to_string()
                } else {
                    format!(
                        "the guest opened its source {} times; the recorded run did {} time(s)",
                        replay.served + 1,
                        replay.served
                    )
                };
                replay.divergence.note(&what);
                return Err(SourceError::InvalidState(format!("{DIVERGENCE}{what}")));
            };
            replay.served += 1;
            recorded.open.clone()?;
            self.open = true;
            return Ok(RowCursor::replayed(
                recorded,
                self.rows.clone(),
                replay.divergence.clone(),
            ));
        }
        let spec = self.spec.clone().ok_or(SourceError::NotConfigured)?;
        if self.open {
            return Err(SourceError::InvalidState(
                "a cursor is already open; drop it before opening another".to_string(),
            ));
        }
        let mut cursor = match self.early.take() {
            Some(cursor) => cursor,
            None => self
                .start_cursor(spec)
                .map_err(StartFailure::into_source_error)?,
        };
        cursor.ready()?;
        self.open = true;
        Ok(cursor)
    }

    /// Closes a cursor the guest dropped.
    pub fn close(&mut self, cursor: RowCursor) {
        drop(cursor);
        self.open = false;
    }
}

type Reply = std::result::Result<Option<Batch>, SourceError>;

/// What the reader reports as it starts: first that the query is valid
/// (prepared and bound), then, after its first step, the columns.
enum Progress {
    Prepared(rusqlite::InterruptHandle),
    Ready(Vec<ColumnInfo>),
}

/// Why the reader could not start: the query or file is wrong (the user's
/// input), or the query failed while running (the source's state).
#[derive(Debug)]
enum StartFailure {
    Invalid(String),
    Failed(String),
}

impl StartFailure {
    fn into_source_error(self) -> SourceError {
        match self {
            StartFailure::Invalid(m) | StartFailure::Failed(m) => SourceError::QueryFailed(m),
        }
    }
}

/// Stops whatever the source's reader is doing, from another thread: the
/// guest's time limit uses it, since a long SQLite step blocks in host code
/// where the epoch deadline cannot reach.
#[derive(Clone, Default)]
pub struct SourceInterrupt(Arc<std::sync::Mutex<Option<rusqlite::InterruptHandle>>>);

impl SourceInterrupt {
    /// Interrupts the running query, if any.
    pub fn interrupt(&self) {
        if let Some(h) = self.0.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            h.interrupt();
        }
    }

    fn set(&self, handle: rusqlite::InterruptHandle) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }
}

impl std::fmt::Debug for SourceInterrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SourceInterrupt")
    }
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
    /// In a replay: where answers the journal lacked are noted.
    divergence: Option<Divergence>,
    /// In a replay: the recorded guest never asked for the columns.
    columns_unrecorded: bool,
}

impl RowCursor {
    fn start(
        spec: SourceSpec,
        start: Timestamp,
        end: Timestamp,
        cap: u32,
        rows: Arc<AtomicU64>,
        interrupt: &SourceInterrupt,
    ) -> std::result::Result<RowCursor, StartFailure> {
        // One chunk waits in the channel while the reader builds the next.
        let (chunk_tx, chunk_rx) = sync_channel::<Reply>(1);
        let (info_tx, info_rx) = sync_channel(2);
        let stop = Arc::new(AtomicBool::new(false));
        let reader_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("jobhost-source".to_string())
            .spawn(move || reader(spec, start, end, cap, info_tx, chunk_tx, &reader_stop))
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
            divergence: None,
            columns_unrecorded: false,
        };
        // Wait only until the query is known to be valid; its first step
        // (which may be slow) goes on in the background.
        match cursor.info.recv() {
            Ok(Ok(Progress::Prepared(handle))) => interrupt.set(handle),
            Ok(Ok(Progress::Ready(_))) | Err(_) => {
                return Err(StartFailure::Failed(
                    "the source reader stopped".to_string(),
                ));
            }
            Ok(Err(failure)) => return Err(failure),
        }
        Ok(cursor)
    }

    /// A cursor that serves a recorded run's answers, re-cut to whatever
    /// batch size the guest asks for.
    fn replayed(recorded: Recorded, rows: Arc<AtomicU64>, divergence: Divergence) -> RowCursor {
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
            Ok(Ok(Progress::Prepared(_))) | Err(_) => Err(SourceError::QueryFailed(
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
        // close; a long SQLite step is interrupted.
        self.stop.store(true, Ordering::Relaxed);
        self.interrupt.interrupt();
        self.chunks = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Batch {
    /// Checks that the batch is well formed: every column holds `rows`
    /// values, text offsets rise within their data, dictionary indices
    /// point into the dictionary, NULL bitmaps cover every row. A batch
    /// read back from a journal or a replay file is checked before use.
    ///
    /// # Errors
    ///
    /// What is wrong, in a few words.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let rows = self.rows as usize;
        let text_ok = |t: &TextData, n: usize| {
            t.offsets.len() == n + 1
                && t.offsets.first() == Some(&0)
                && t.offsets.windows(2).all(|w| w[0] <= w[1])
                && t.offsets
                    .last()
                    .is_some_and(|&e| e as usize == t.data.len())
        };
        for (i, c) in self.columns.iter().enumerate() {
            let ok = match &c.data {
                ColumnData::Integer(v) => v.len() == rows,
                ColumnData::Real(v) => v.len() == rows,
                ColumnData::Text(t) | ColumnData::Blob(t) => text_ok(t, rows),
                ColumnData::TextDict { values, indices } => {
                    let n = values.offsets.len().saturating_sub(1);
                    text_ok(values, n)
                        && indices.len() == rows
                        && indices.iter().all(|&x| (x as usize) < n)
                }
            };
            let nulls_ok = c.nulls.as_ref().is_none_or(|b| b.len() >= rows.div_ceil(8));
            if !ok || !nulls_ok {
                return Err(format!("column {i} of a {rows}-row batch is malformed"));
            }
        }
        Ok(())
    }

    /// Splits off the first `n` rows; the rest is `None` when nothing remains.
    fn split_front(self, n: u32) -> (Batch, Option<Batch>) {
        if n >= self.rows {
            return (self, None);
        }
        let (rows, at) = (self.rows, n as usize);
        let mut front = Vec::with_capacity(self.columns.len());
        let mut back = Vec::with_capacity(self.columns.len());
        for column in self.columns {
            let (nulls_front, nulls_back) = split_nulls(column.nulls, at, rows as usize);
            let (data_front, data_back) = match column.data {
                ColumnData::Integer(mut v) => {
                    let b = v.split_off(at);
                    (ColumnData::Integer(v), ColumnData::Integer(b))
                }
                ColumnData::Real(mut v) => {
                    let b = v.split_off(at);
                    (ColumnData::Real(v), ColumnData::Real(b))
                }
                ColumnData::Text(t) => {
                    let (f, b) = split_text(t, at);
                    (ColumnData::Text(f), ColumnData::Text(b))
                }
                ColumnData::Blob(t) => {
                    let (f, b) = split_text(t, at);
                    (ColumnData::Blob(f), ColumnData::Blob(b))
                }
                ColumnData::TextDict {
                    values,
                    mut indices,
                } => {
                    let b = indices.split_off(at);
                    // The front gets a dictionary of just its own values;
                    // the rest keeps the chunk's and is compacted when served.
                    let (front_values, front_indices) = compact(&values, &indices);
                    (
                        ColumnData::TextDict {
                            values: front_values,
                            indices: front_indices,
                        },
                        ColumnData::TextDict { values, indices: b },
                    )
                }
            };
            front.push(Column {
                nulls: nulls_front,
                data: data_front,
            });
            back.push(Column {
                nulls: nulls_back,
                data: data_back,
            });
        }
        (
            Batch {
                rows: n,
                columns: front,
            },
            Some(Batch {
                rows: rows - n,
                columns: back,
            }),
        )
    }
}

impl Batch {
    /// Rebuilds every dictionary column from the values its rows use, in
    /// order of first appearance, as the WIT promises for each batch.
    fn compact_dictionaries(&mut self) {
        for column in &mut self.columns {
            if let ColumnData::TextDict { values, indices } = &mut column.data {
                let (v, i) = compact(values, indices);
                *values = v;
                *indices = i;
            }
        }
    }
}

/// The values `indices` use, in order of first appearance, and the indices
/// renumbered to match.
fn compact(values: &TextData, indices: &[u32]) -> (TextData, Vec<u32>) {
    let mut renumber: FxHashMap<u32, u32> = FxHashMap::default();
    let mut out = TextData {
        data: Vec::new(),
        offsets: vec![0],
    };
    let mut new_indices = Vec::with_capacity(indices.len());
    for &id in indices {
        let next = renumber.len() as u32;
        let new_id = *renumber.entry(id).or_insert_with(|| {
            let (a, b) = (
                values.offsets[id as usize] as usize,
                values.offsets[id as usize + 1] as usize,
            );
            out.data.extend_from_slice(&values.data[a..b]);
            out.offsets.push(out.data.len() as u32);
            next
        });
        new_indices.push(new_id);
    }
    (out, new_indices)
}

fn split_text(mut t: TextData, at: usize) -> (TextData, TextData) {
    let cut = t.offsets[at];
    let data_back = t.data.split_off(cut as usize);
    let offsets_back: Vec<u32> = t.offsets[at..].iter().map(|o| o - cut).collect();
    t.offsets.truncate(at + 1);
    (
        t,
        TextData {
            data: data_back,
            offsets: offsets_back,
        },
    )
}

fn split_nulls(
    nulls: Option<Vec<u8>>,
    at: usize,
    rows: usize,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let Some(bits) = nulls else {
        return (None, None);
    };
    let is_null = |i: usize| bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
    let pack = |range: std::ops::Range<usize>| {
        let mut out = vec![0u8; range.len().div_ceil(8)];
        let mut any = false;
        for (j, i) in range.enumerate() {
            if is_null(i) {
                out[j / 8] |= 1 << (j % 8);
                any = true;
            }
        }
        any.then_some(out)
    };
    (pack(0..at), pack(at..rows))
}

fn reader(
    spec: SourceSpec,
    start: Timestamp,
    end: Timestamp,
    cap: u32,
    info: SyncSender<std::result::Result<Progress, StartFailure>>,
    chunks: SyncSender<Reply>,
    stop: &AtomicBool,
) {
    let conn = match open_read_only(&spec.path) {
        Ok(c) => c,
        Err(e) => {
            let _ = info.send(Err(StartFailure::Invalid(e)));
            return;
        }
    };
    let interrupt = conn.get_interrupt_handle();
    let mut stmt = match prepare(&conn, &spec.query) {
        Ok(s) => s,
        Err(e) => {
            let _ = info.send(Err(StartFailure::Invalid(e)));
            return;
        }
    };
    if let Err(e) = bind(&mut stmt, start, end) {
        let _ = info.send(Err(StartFailure::Invalid(format!(
            "invalid source query: {e}"
        ))));
        return;
    }
    if info.send(Ok(Progress::Prepared(interrupt))).is_err() {
        return;
    }
    let declared: Vec<(String, Option<ColumnKind>)> = stmt
        .columns()
        .map(|c| (c.name().to_string(), c.decl_type().map(kind_from_decl)))
        .collect();
    let mut rows = stmt.raw_query();
    let first = match rows.next() {
        Ok(r) => r,
        Err(e) => {
            let _ = info.send(Err(StartFailure::Failed(format!(
                "the source query failed: {e}"
            ))));
            return;
        }
    };
    let has_first = first.is_some();
    // Columns without a declared type (expressions) take the type of their
    // first value; NULL or no rows means text.
    let columns: Vec<ColumnInfo> = declared
        .into_iter()
        .enumerate()
        .map(|(i, (name, kind))| {
            let kind = kind.unwrap_or_else(|| match first.map(|r| r.get_ref(i)) {
                Some(Ok(ValueRef::Integer(_))) => ColumnKind::Integer,
                Some(Ok(ValueRef::Real(_))) => ColumnKind::Real,
                Some(Ok(ValueRef::Blob(_))) => ColumnKind::Blob,
                _ => ColumnKind::Text,
            });
            ColumnInfo { name, kind }
        })
        .collect();
    let kinds: Vec<ColumnKind> = columns.iter().map(|c| c.kind).collect();
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    if info.send(Ok(Progress::Ready(columns))).is_err() {
        return;
    }
    let mut row_number: u64 = 0;
    let mut pending_first = has_first;
    let mut done = !has_first;
    loop {
        if done {
            let _ = chunks.send(Ok(None));
            return;
        }
        let limit = cap as usize;
        let mut builders: Vec<ColumnBuilder> = kinds
            .iter()
            .map(|k| ColumnBuilder::new(*k, limit))
            .collect();
        let mut n = 0usize;
        let mut bytes = 0usize;
        let mut failure = None;
        while n < limit && bytes < MAX_BATCH_BYTES && !stop.load(Ordering::Relaxed) {
            let row = if pending_first {
                pending_first = false;
                FallibleStreamingIterator::get(&rows)
            } else {
                match rows.next() {
                    Ok(r) => r,
                    Err(e) => {
                        failure = Some(SourceError::QueryFailed(e.to_string()));
                        break;
                    }
                }
            };
            let Some(row) = row else {
                done = true;
                break;
            };
            row_number += 1;
            for (i, b) in builders.iter_mut().enumerate() {
                let value = match row.get_ref(i) {
                    Ok(v) => v,
                    Err(e) => {
                        failure = Some(SourceError::QueryFailed(e.to_string()));
                        break;
                    }
                };
                if let Err(found) = b.push(n, value, &mut bytes) {
                    failure = Some(SourceError::TypeMismatch(format!(
                        "column `{}` is {} but row {row_number} holds {found}",
                        names[i],
                        kind_name(kinds[i])
                    )));
                    break;
                }
            }
            if failure.is_some() {
                break;
            }
            n += 1;
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let reply = match failure {
            Some(e) => Err(e),
            None if n == 0 => Ok(None),
            None => Ok(Some(Batch {
                rows: n as u32,
                columns: builders.into_iter().map(|b| b.finish(n)).collect(),
            })),
        };
        let last = !matches!(reply, Ok(Some(_)));
        if chunks.send(reply).is_err() || last {
            return;
        }
    }
}

fn bind(stmt: &mut Statement<'_>, start: Timestamp, end: Timestamp) -> rusqlite::Result<()> {
    for (name, value) in [
        (":start", rusqlite::types::Value::Integer(start.as_second())),
        (":end", rusqlite::types::Value::Integer(end.as_second())),
        (
            ":start_ms",
            rusqlite::types::Value::Integer(start.as_millisecond()),
        ),
        (
            ":end_ms",
            rusqlite::types::Value::Integer(end.as_millisecond()),
        ),
        (
            ":start_rfc3339",
            rusqlite::types::Value::Text(start.to_string()),
        ),
        (
            ":end_rfc3339",
            rusqlite::types::Value::Text(end.to_string()),
        ),
    ] {
        if let Some(i) = stmt.parameter_index(name)? {
            stmt.raw_bind_parameter(i, value)?;
        }
    }
    Ok(())
}

/// SQLite's type affinity rules, applied to a declared column type.
fn kind_from_decl(decl: &str) -> ColumnKind {
    let d = decl.to_ascii_uppercase();
    if d.contains("INT") {
        ColumnKind::Integer
    } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
        ColumnKind::Text
    } else if d.contains("BLOB") || d.is_empty() {
        ColumnKind::Blob
    } else {
        ColumnKind::Real
    }
}

fn kind_name(k: ColumnKind) -> &'static str {
    match k {
        ColumnKind::Integer => "integer",
        ColumnKind::Real => "real",
        ColumnKind::Text => "text",
        ColumnKind::Blob => "blob",
    }
}

fn value_name(v: &ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "NULL",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}

/// Builds one column of one batch.
enum ColumnBuilder {
    Integer(Vec<i64>, Nulls),
    Real(Vec<f64>, Nulls),
    Text(TextBuilder, Nulls),
    Blob(TextData, Nulls),
}

#[derive(Default)]
struct Nulls(Option<Vec<u8>>);

impl Nulls {
    fn set(&mut self, row: usize, cap: usize) {
        let bits = self.0.get_or_insert_with(|| vec![0; cap.div_ceil(8)]);
        if row / 8 >= bits.len() {
            bits.resize(row / 8 + 1, 0);
        }
        bits[row / 8] |= 1 << (row % 8);
    }

    fn finish(self, rows: usize) -> Option<Vec<u8>> {
        self.0.map(|mut b| {
            b.truncate(rows.div_ceil(8));
            b
        })
    }
}

impl ColumnBuilder {
    fn new(kind: ColumnKind, cap: usize) -> ColumnBuilder {
        match kind {
            ColumnKind::Integer => {
                ColumnBuilder::Integer(Vec::with_capacity(cap), Nulls::default())
            }
            ColumnKind::Real => ColumnBuilder::Real(Vec::with_capacity(cap), Nulls::default()),
            ColumnKind::Text => ColumnBuilder::Text(TextBuilder::new(cap), Nulls::default()),
            ColumnKind::Blob => ColumnBuilder::Blob(
                TextData {
                    data: Vec::new(),
                    offsets: vec![0],
                },
                Nulls::default(),
            ),
        }
    }

    /// Appends row `row`; on a type mismatch returns what was found.
    fn push(
        &mut self,
        row: usize,
        v: ValueRef<'_>,
        bytes: &mut usize,
    ) -> std::result::Result<(), &'static str> {
        match (self, v) {
            (ColumnBuilder::Integer(vals, nulls), ValueRef::Null) => {
                nulls.set(row, vals.capacity());
                vals.push(0);
            }
            (ColumnBuilder::Integer(vals, _), ValueRef::Integer(i)) => vals.push(i),
            (ColumnBuilder::Real(vals, nulls), ValueRef::Null) => {
                nulls.set(row, vals.capacity());
                vals.push(0.0);
            }
            (ColumnBuilder::Real(vals, _), ValueRef::Real(f)) => vals.push(f),
            (ColumnBuilder::Real(vals, _), ValueRef::Integer(i)) => vals.push(i as f64),
            (ColumnBuilder::Text(t, nulls), ValueRef::Null) => {
                nulls.set(row, t.cap);
                t.push(b"");
            }
            (ColumnBuilder::Text(t, _), ValueRef::Text(s)) => {
                if std::str::from_utf8(s).is_err() {
                    return Err("text that is not valid UTF-8");
                }
                *bytes += s.len();
                t.push(s);
            }
            (ColumnBuilder::Blob(t, nulls), ValueRef::Null) => {
                nulls.set(row, t.offsets.capacity());
                t.offsets.push(t.data.len() as u32);
            }
            (ColumnBuilder::Blob(t, _), ValueRef::Blob(b) | ValueRef::Text(b)) => {
                *bytes += b.len();
                t.data.extend_from_slice(b);
                t.offsets.push(t.data.len() as u32);
            }
            (_, other) => return Err(value_name(&other)),
        }
        Ok(())
    }

    fn finish(self, rows: usize) -> Column {
        match self {
            ColumnBuilder::Integer(v, n) => Column {
                nulls: n.finish(rows),
                data: ColumnData::Integer(v),
            },
            ColumnBuilder::Real(v, n) => Column {
                nulls: n.finish(rows),
                data: ColumnData::Real(v),
            },
            ColumnBuilder::Text(t, n) => Column {
                nulls: n.finish(rows),
                data: t.finish(),
            },
            ColumnBuilder::Blob(t, n) => Column {
                nulls: n.finish(rows),
                data: ColumnData::Blob(t),
            },
        }
    }
}

/// Text, dictionary-encoded while the batch has few distinct values (at
/// most a quarter of its rows), plain otherwise. The dictionary moves string
/// hashing out of the guest, where it is 2-3x slower than here.
struct TextBuilder {
    cap: usize,
    dict: Option<Dictionary>,
    plain: TextData,
}

/// A batch's distinct values so far, and each row's index into them.
struct Dictionary {
    ids: FxHashMap<Box<[u8]>, u32>,
    values: TextData,
    indices: Vec<u32>,
}

impl TextBuilder {
    fn new(cap: usize) -> TextBuilder {
        TextBuilder {
            cap,
            dict: Some(Dictionary {
                ids: FxHashMap::default(),
                values: TextData {
                    data: Vec::new(),
                    offsets: vec![0],
                },
                indices: Vec::with_capacity(cap),
            }),
            plain: TextData::default(),
        }
    }

    fn push(&mut self, s: &[u8]) {
        if let Some(dict) = &mut self.dict {
            let id = match dict.ids.get(s) {
                Some(&id) => id,
                None => {
                    let id = dict.ids.len() as u32;
                    dict.ids.insert(s.into(), id);
                    dict.values.data.extend_from_slice(s);
                    dict.values.offsets.push(dict.values.data.len() as u32);
                    id
                }
            };
            dict.indices.push(id);
            if dict.ids.len() > self.cap / 4 + 1 {
                self.abandon_dictionary();
            }
            return;
        }
        self.plain.data.extend_from_slice(s);
        self.plain.offsets.push(self.plain.data.len() as u32);
    }

    /// Abandons the dictionary, expanding what it holds so far.
    fn abandon_dictionary(&mut self) {
        let Some(Dictionary {
            values, indices, ..
        }) = self.dict.take()
        else {
            return;
        };
        let mut plain = TextData {
            data: Vec::new(),
            offsets: Vec::with_capacity(self.cap + 1),
        };
        plain.offsets.push(0);
        for id in indices {
            let (a, b) = (
                values.offsets[id as usize] as usize,
                values.offsets[id as usize + 1] as usize,
            );
            plain.data.extend_from_slice(&values.data[a..b]);
            plain.offsets.push(plain.data.len() as u32);
        }
        self.plain = plain;
    }

    fn finish(mut self) -> ColumnData {
        if let Some(dict) = &self.dict
            && dict.ids.len() * 4 > dict.indices.len().max(4)
        {
            self.abandon_dictionary();
        }
        match self.dict {
            Some(Dictionary {
                values, indices, ..
            }) => ColumnData::TextDict { values, indices },
            None => ColumnData::Text(self.plain),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: u32) -> std::num::NonZeroU32 {
        std::num::NonZeroU32::new(n).unwrap()
    }

    fn db(rows: &[(i64, Option<&str>, f64)]) -> (tempfile::TempDir, SourceSpec) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("src.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (ts INTEGER, name TEXT, amount REAL)")
            .unwrap();
        for (ts, name, amount) in rows {
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3)",
                rusqlite::params![ts, name, amount],
            )
            .unwrap();
        }
        let spec = SourceSpec {
            path,
            query: "SELECT ts, name, amount FROM t WHERE ts >= :start AND ts < :end ORDER BY ts"
                .to_string(),
        };
        (dir, spec)
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn only_rows_inside_the_window_are_returned_in_bounded_batches() {
        let rows: Vec<_> = (0..100).map(|i| (i, Some("a"), 1.0)).collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(10), ts(60), batch(16));
        let mut c = access.open().unwrap();
        let mut total = 0;
        let mut first_ts = None;
        while let Some(b) = c.next_batch(1000).unwrap() {
            assert!(b.rows <= 16);
            if let ColumnData::Integer(v) = &b.columns[0].data {
                first_ts.get_or_insert(v[0]);
            }
            total += b.rows;
        }
        assert_eq!(total, 50);
        assert_eq!(first_ts, Some(10));
        assert_eq!(access.rows_read(), 50);
    }

    #[test]
    fn repeated_text_is_dictionary_encoded_and_nulls_are_flagged() {
        let rows: Vec<_> = (0..40)
            .map(|i| {
                (
                    i,
                    if i == 3 {
                        None
                    } else {
                        Some(["x", "y"][i as usize % 2])
                    },
                    2.5,
                )
            })
            .collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(100), batch(8192));
        let mut c = access.open().unwrap();
        let b = c.next_batch(8192).unwrap().unwrap();
        assert_eq!(b.rows, 40);
        let col = &b.columns[1];
        assert_eq!(col.nulls.as_deref(), Some(&[0b0000_1000, 0, 0, 0, 0][..]));
        let ColumnData::TextDict { values, indices } = &col.data else {
            panic!("expected a dictionary, got {:?}", col.data)
        };
        assert_eq!(indices.len(), 40);
        assert_eq!(values.offsets.len(), 4, "x, y and the NULL placeholder");
        assert!(c.next_batch(8192).unwrap().is_none());
        assert!(matches!(
            c.next_batch(8192),
            Err(SourceError::InvalidState(_))
        ));
    }

    #[test]
    fn distinct_text_falls_back_to_plain_encoding() {
        let names: Vec<String> = (0..100).map(|i| format!("n{i}")).collect();
        let rows: Vec<_> = (0..100)
            .map(|i| (i as i64, Some(names[i].as_str()), 1.0))
            .collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(1000), batch(8192));
        let b = access.open().unwrap().next_batch(64).unwrap().unwrap();
        let ColumnData::Text(t) = &b.columns[1].data else {
            panic!("expected plain text")
        };
        assert_eq!(b.rows, 64);
        assert_eq!(t.offsets.len(), 65);
        assert_eq!(
            &t.data[t.offsets[63] as usize..t.offsets[64] as usize],
            b"n63"
        );
    }

    #[test]
    fn small_requests_split_chunks_without_losing_or_reordering_rows() {
        let names: Vec<String> = (0..50).map(|i| format!("n{}", i % 3)).collect();
        let rows: Vec<_> = (0..50)
            .map(|i| {
                (
                    i as i64,
                    if i % 7 == 0 {
                        None
                    } else {
                        Some(names[i].as_str())
                    },
                    i as f64,
                )
            })
            .collect();
        let (_p, spec) = db(&rows);
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(100), batch(16));
        access.start_early().unwrap();
        let mut c = access.open().unwrap();
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        let mut dictionaries = 0;
        while let Some(b) = c.next_batch(3).unwrap() {
            sizes.push(b.rows);
            let ColumnData::Integer(ts) = &b.columns[0].data else {
                panic!()
            };
            for (i, t) in ts.iter().enumerate() {
                let null = b.columns[1]
                    .nulls
                    .as_ref()
                    .is_some_and(|n| n[i / 8] & (1 << (i % 8)) != 0);
                if let ColumnData::TextDict { values, indices } = &b.columns[1].data {
                    dictionaries += 1;
                    let mut used: Vec<u32> = indices.clone();
                    used.sort_unstable();
                    used.dedup();
                    assert_eq!(used.len(), values.offsets.len() - 1, "no foreign values");
                }
                let name = match &b.columns[1].data {
                    ColumnData::TextDict { values, indices } => {
                        let id = indices[i] as usize;
                        String::from_utf8(
                            values.data
                                [values.offsets[id] as usize..values.offsets[id + 1] as usize]
                                .to_vec(),
                        )
                        .unwrap()
                    }
                    ColumnData::Text(t) => String::from_utf8(
                        t.data[t.offsets[i] as usize..t.offsets[i + 1] as usize].to_vec(),
                    )
                    .unwrap(),
                    other => panic!("{other:?}"),
                };
                seen.push((*t, if null { None } else { Some(name) }));
            }
        }
        // Chunks of 16 are served 3 at a time: 3, 3, 3, 3, 3, 1, 3, ...
        // and every dictionary holds exactly the values of its own batch.
        let mut expected_sizes = [3, 3, 3, 3, 3, 1].repeat(3);
        expected_sizes.push(2);
        assert_eq!(sizes, expected_sizes);
        assert!(dictionaries > 10, "the text column travels as a dictionary");
        let expected: Vec<_> = rows
            .iter()
            .map(|(t, n, _)| (*t, n.map(str::to_string)))
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(access.rows_read(), 50);
    }

    #[test]
    fn a_query_without_window_parameters_is_refused() {
        let (_p, mut spec) = db(&[]);
        let check = |spec: &SourceSpec| {
            SourceAccess::new(Some(spec.clone()), ts(0), ts(1), batch(10))
                .start_early()
                .unwrap_err()
        };
        spec.query = "SELECT ts FROM t".to_string();
        let err = check(&spec);
        assert!(matches!(err, Error::Input(_)));
        assert!(err.to_string().contains(":start and :end"), "{err}");
        spec.query = "DELETE FROM t WHERE ts >= :start AND ts < :end".to_string();
        assert!(check(&spec).to_string().contains("writes"));
    }

    #[test]
    fn text_in_a_real_column_is_a_type_mismatch_naming_column_and_row() {
        let (_dir, spec) = db(&[(1, Some("a"), 1.0)]);
        let conn = Connection::open(&spec.path).unwrap();
        conn.execute("INSERT INTO t VALUES (2, 'b', 'lots')", [])
            .unwrap();
        let mut access = SourceAccess::new(Some(spec), ts(0), ts(10), batch(8192));
        let err = access.open().unwrap().next_batch(10).unwrap_err();
        assert_eq!(
            err,
            SourceError::TypeMismatch("column `amount` is real but row 2 holds text".to_string())
        );
    }
}
