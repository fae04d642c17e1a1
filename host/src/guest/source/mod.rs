//! The job's data source: one query over the window's rows, read from the
//! kind of source the job names, and handed to the guest as columnar
//! batches (`batch`) built on a reader thread that owns the connection
//! (`cursor`). Each kind lives in a file of its own behind one small
//! trait (`SourceKind`: open the source and start the query, which the
//! shared reader then asks for its columns and chunk after chunk, and can
//! interrupt): [`sqlite`] (a database file opened read-only) and
//! [`postgres`] (one read-only snapshot of a PostgreSQL database). Every
//! kind binds the window's bounds as parameters, never as SQL text, and
//! refuses a query that does not use a start and an end before anything is
//! claimed. A time written without a zone is read only as the job's
//! `naive_timestamps` says ([`naive`]), else its column is refused before
//! anything is claimed too.
//!
//! A run's batches are recorded in its journal as the guest receives them,
//! so a replay serves them again without any source ([`Recorded`]).

mod batch;
mod cursor;
mod fingerprint;
mod naive;
pub mod postgres;
pub mod sqlite;
mod table;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use jiff::Timestamp;

use crate::core::error::{Error, Result};
pub use batch::{Batch, Column, ColumnData, ColumnInfo, ColumnKind, TextData};
use cursor::{Reader, StartFailure};
pub use cursor::{RowCursor, SourceInterrupt};
pub use fingerprint::{Fingerprint, RowChanges, changes, row_digests};
pub use naive::NaiveTimes;
pub use table::{Cell, Table};

/// A run's data source, of any kind: made from a kind's settings
/// ([`SourceSpec`] for SQLite, [`postgres::PostgresSpec`]) with `into()`.
#[derive(Debug, Clone)]
pub struct Source {
    kind: Arc<dyn SourceKind>,
    /// `[source] max_concurrent`: at most this many runs of this process
    /// read the same source at once.
    max_concurrent: Option<u32>,
}

impl Source {
    fn new(kind: impl SourceKind) -> Source {
        Source {
            kind: Arc::new(kind),
            max_concurrent: None,
        }
    }

    fn kind(&self) -> &dyn SourceKind {
        &*self.kind
    }

    /// The committed reports of the upstream windows a window needs
    /// (`[source] type = "upstream"`): the run reads them, once it has seen
    /// those windows DONE, and hands them over as a [`Table`] in its place.
    pub fn upstream() -> Source {
        Source::new(table::Upstream)
    }

    /// Whether this is [`Source::upstream`]'s place for the run to fill.
    pub fn is_upstream(&self) -> bool {
        self.kind.upstream()
    }

    /// The query it runs over each window, when it runs one.
    pub fn query(&self) -> Option<&str> {
        self.kind.query()
    }

    /// `sha256:<hex>` of [`Source::query`], as a run records it with the
    /// fingerprint of what it read, when it runs one.
    pub fn query_digest(&self) -> Option<String> {
        use sha2::Digest as _;
        self.query()
            .map(|q| format!("sha256:{}", hex::encode(sha2::Sha256::digest(q.as_bytes()))))
    }

    /// Where the rows come from, as messages show it: a file, or a URL
    /// with its password as `***`.
    pub fn location(&self) -> String {
        self.kind.location()
    }

    /// This source, read by at most `max` runs of this process at once
    /// (every job naming the same location shares the count).
    #[must_use]
    pub fn at_most(mut self, max: Option<u32>) -> Source {
        self.max_concurrent = max;
        self
    }

    /// The gate runs of this process pass to read the source: from the
    /// query's start to the run's end. Named by the location as shown (no
    /// password), so jobs that name the same database share it.
    fn enter(&self) -> crate::core::gate::Permit {
        crate::core::gate::Gates::shared().enter(
            &format!("source {}", self.location()),
            crate::core::gate::Limit {
                max_concurrent: self.max_concurrent,
                spacing: None,
            },
            &crate::core::clock::SystemClock,
        )
    }
}

/// The settings of a SQLite source, the default kind.
pub use sqlite::SqliteSpec as SourceSpec;

/// One kind of data source. Its reader thread calls [`SourceKind::start`],
/// which opens the source and checks the query, then refuses it or hands
/// the running query (its columns, its chunks) and a way to interrupt it
/// to the shared reader.
trait SourceKind: std::fmt::Debug + Send + Sync + 'static {
    /// Where the rows come from, as messages show it.
    fn location(&self) -> String;

    /// On the reader thread: opens the source, checks the query, binds
    /// `bounds` and runs it through `reader`.
    fn start(&self, bounds: Bounds, reader: Reader);

    /// Whether the run fills this source itself ([`Source::upstream`]).
    fn upstream(&self) -> bool {
        false
    }

    /// The query it runs, when it runs one.
    fn query(&self) -> Option<&str> {
        None
    }
}

/// The window a query reads: `[start, end)`.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    start: Timestamp,
    end: Timestamp,
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
    spec: Option<Source>,
    start: Timestamp,
    end: Timestamp,
    batch_rows: u32,
    open: bool,
    early: Option<RowCursor>,
    rows: Arc<AtomicU64>,
    interrupt: SourceInterrupt,
    out_of_time: Arc<AtomicBool>,
    replay: Option<Replay>,
    /// Held from the query's first start to the end of the run.
    permit: Option<crate::core::gate::Permit>,
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
            None::<Source>,
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
        spec: Option<impl Into<Source>>,
        start: Timestamp,
        end: Timestamp,
        batch_rows: std::num::NonZeroU32,
    ) -> Self {
        SourceAccess {
            spec: spec.map(Into::into),
            start,
            end,
            batch_rows: batch_rows.get(),
            open: false,
            early: None,
            rows: Arc::new(AtomicU64::new(0)),
            interrupt: SourceInterrupt::default(),
            out_of_time: Arc::new(AtomicBool::new(false)),
            replay: None,
            permit: None,
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
            StartFailure::Invalid(m) => Error::Input(m.into()),
            StartFailure::Failed(m) => Error::Source(m.into()),
        })?;
        self.early = Some(cursor);
        Ok(())
    }

    fn start_cursor(&mut self, spec: Source) -> std::result::Result<RowCursor, StartFailure> {
        if self.permit.is_none() {
            self.permit = Some(spec.enter());
        }
        RowCursor::start(
            spec,
            Bounds {
                start: self.start,
                end: self.end,
            },
            self.batch_rows,
            self.rows.clone(),
            self.out_of_time.clone(),
            &self.interrupt,
        )
    }

    /// Whether the source's own time limit stopped the query (the run's
    /// limit, enforced by the server while the query ran).
    pub fn ran_out_of_time(&self) -> bool {
        self.out_of_time.load(Ordering::Relaxed)
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
