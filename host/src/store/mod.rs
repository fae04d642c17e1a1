//! The claim store: the durable record of which windows have been claimed,
//! by whom, under which fence, and how far each run got. Everything that must
//! survive the process (the claim, the staged messages, the job's cursor)
//! lives here and nowhere else. [`ClaimStore`] is the contract; `sqlite` is
//! the default backend (one machine, one file) and `postgres` the one for
//! fleets (many hosts, one database). [`StoreLocation`] names one of them
//! and [`open`] opens it; the claim decision itself ([`decide`]) is shared,
//! so the two backends cannot answer the same row differently.
//!
//! Each backend measures leases and retry times on one clock of its own:
//! SQLite on the host's lease clock (the reading passed in as `now`), which
//! every process on the one machine shares; PostgreSQL on the database's
//! `now()`, so hosts whose clocks disagree still agree on who holds a lease.
//!
//! A run moves `CLAIMED -> PREPARED -> DONE`; it may instead end `FAILED`
//! (retryable failures are claimed again after a backoff, up to the job's
//! attempts; permanent ones never) or `ABANDONED` (the host gave up and a
//! person must look). A window the scheduler decided not to run is a row in
//! `SKIPPED`, written only where no row exists; per job, the store also
//! keeps how far the scheduler has decided every window. Every write after the claim names the fence it was
//! claimed with; a write that matches no row means another process took the
//! run over, and the writer must stop without writing or delivering.

pub mod durable;
pub mod location;
mod pg_connect;
mod pg_schema;
mod pg_support;
pub mod postgres;
pub mod sqlite;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::core::error::{Error, Result};
use crate::core::failpoint::Failpoints;
use crate::core::window::{JobName, Window, WindowKey};

pub use location::{PostgresUrl, StoreLocation};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// How long a claim on PostgreSQL waits for another session's hold on the
/// window's row before it answers [`Claim::Locked`]: only a claim or a
/// write of that one window holds it, for milliseconds, so a holder that
/// takes longer is paused or cut off in the middle of a transaction. (On
/// SQLite the write lock is the whole store's, held also by other jobs'
/// legitimate writes: a claim there waits [`WRITE_WAIT`].)
pub const CLAIM_WAIT: Duration = Duration::from_secs(2);

/// How long every other write waits for such a hold before it fails the
/// run (retryable): on PostgreSQL also the `lock_timeout` of every write
/// transaction.
pub const WRITE_WAIT: Duration = Duration::from_secs(10);

/// How long the server lets a transaction of jobhost's own sit idle before
/// it ends the session (PostgreSQL's `idle_in_transaction_session_timeout`):
/// jobhost never waits between the statements of a transaction, so a
/// session idle that long belongs to a process that is paused or cut off,
/// and ending it frees the rows it holds for everyone else.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(5);

/// The longest one statement of the store may run (PostgreSQL's
/// `statement_timeout`, in every write transaction).
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Opens (creating and migrating when needed) the store at `location`.
///
/// # Errors
///
/// `Error::Input` for a path or URL that cannot be a jobhost store;
/// `Error::Store` when the store cannot be reached or read.
pub fn open(location: &StoreLocation) -> Result<Box<dyn ClaimStore>> {
    open_with(location, None)
}

/// [`open`], stopping at [`Boundary::InPrepare`](crate::core::failpoint::Boundary)
/// inside the transaction that commits a report (tests only).
///
/// # Errors
///
/// As [`open`].
pub fn open_with(
    location: &StoreLocation,
    failpoints: Option<Arc<dyn Failpoints>>,
) -> Result<Box<dyn ClaimStore>> {
    Ok(match location {
        StoreLocation::Sqlite(path) => {
            Box::new(SqliteStore::open(path)?.with_failpoints(failpoints))
        }
        StoreLocation::Postgres(url) => {
            Box::new(PostgresStore::open(url)?.with_failpoints(failpoints))
        }
    })
}

/// Opens an existing store for reading: nothing is created or migrated.
///
/// # Errors
///
/// `Error::Input` when there is no jobhost store there; `Error::Store` when
/// it cannot be reached.
pub fn open_read_only(location: &StoreLocation) -> Result<Box<dyn ClaimStore>> {
    Ok(match location {
        StoreLocation::Sqlite(path) => Box::new(SqliteStore::open_read_only(path)?),
        StoreLocation::Postgres(url) => Box::new(PostgresStore::open_read_only(url)?),
    })
}

/// The fence number of a claim: incremented by every takeover, so a stale
/// owner's writes match nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fence(pub i64);

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Claimed; the guest has not produced a committed report yet.
    Claimed,
    /// The report and its messages are committed; delivery is under way.
    Prepared,
    /// Every message was delivered; the job's cursor has moved.
    Done,
    /// The run failed; `retryable` failures may be claimed again.
    Failed,
    /// The host gave up; a person must look.
    Abandoned,
    /// The scheduler decided not to run the window (its job's catch-up
    /// policy); `error` holds the reason. Nothing ran and nothing was sent,
    /// so a run asked for on purpose may still claim it.
    Skipped,
}

impl RunState {
    /// The state's name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Claimed => "CLAIMED",
            RunState::Prepared => "PREPARED",
            RunState::Done => "DONE",
            RunState::Failed => "FAILED",
            RunState::Abandoned => "ABANDONED",
            RunState::Skipped => "SKIPPED",
        }
    }

    /// Parses a stored state name.
    pub fn parse(s: &str) -> Option<RunState> {
        Some(match s {
            "CLAIMED" => RunState::Claimed,
            "PREPARED" => RunState::Prepared,
            "DONE" => RunState::Done,
            "FAILED" => RunState::Failed,
            "ABANDONED" => RunState::Abandoned,
            "SKIPPED" => RunState::Skipped,
            _ => return None,
        })
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A held claim: what every fenced write must present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The window key the claim is for.
    pub key: WindowKey,
    /// The fence the claim was taken with.
    pub fence: Fence,
    /// Who holds it (host, process id and a random tag).
    pub owner: String,
    /// Which attempt at the window this is, from 1.
    pub attempt: u32,
}

/// What a claim attempt asks for.
#[derive(Debug, Clone)]
pub struct ClaimRequest<'a> {
    /// The window to claim.
    pub window: &'a Window,
    /// The claiming process.
    pub owner: &'a str,
    /// `sha256:<hex>` of the component that will run.
    pub component: &'a str,
    /// The host's lease clock reading. SQLite measures the lease on it;
    /// PostgreSQL ignores it and uses the database's clock.
    pub now: Timestamp,
    /// How long the lease lasts if not renewed.
    pub lease: Duration,
    /// Attempts after which a failed window is no longer retried.
    pub max_attempts: u32,
    /// Whether a window the scheduler skipped is run (a run asked for on
    /// purpose) or answered [`Claim::Skipped`] (the scheduler's own runs:
    /// a skip is that window's decision, and stands).
    pub take_skipped: bool,
}

/// The answer to a claim attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The window is ours to run; `takeover` when a dead owner's expired
    /// lease or an earlier retryable failure was taken over.
    Run {
        /// The claim to present on every later write.
        lease: Lease,
        /// Whether an earlier claim existed.
        takeover: bool,
    },
    /// An earlier owner committed its report and died while delivering: the
    /// stored messages must be delivered, the guest must not run again.
    Resume {
        /// The claim to present on every later write.
        lease: Lease,
    },
    /// Already done.
    Done {
        /// The attempt that finished it.
        attempt: u32,
        /// Its fence.
        fence: Fence,
    },
    /// An earlier attempt failed and its backoff has not passed yet.
    Wait {
        /// The earliest instant of the next attempt.
        until: Timestamp,
        /// The current fence.
        fence: Fence,
        /// The attempts made so far.
        attempts: u32,
        /// The last recorded error.
        error: Option<String>,
    },
    /// Another process holds a live lease.
    Busy {
        /// Who holds it.
        owner: String,
        /// Its attempt.
        attempt: u32,
        /// Its fence.
        fence: Fence,
        /// Until when.
        lease_until: Timestamp,
    },
    /// Another session held what the claim must write (the window's row,
    /// or the store's write lock) for longer than [`CLAIM_WAIT`]: a process
    /// paused or cut off in the middle of a transaction. Answered at once
    /// instead of waited on; a later invocation tries again.
    Locked {
        /// What was held.
        held: Held,
        /// How long the claim waited.
        waited: Duration,
    },
    /// A scheduler skipped the window (catch-up), and this claim does not
    /// take skipped windows.
    Skipped {
        /// Why it was skipped.
        reason: Option<String>,
    },
    /// Failed permanently, or out of attempts.
    GaveUp {
        /// The current fence.
        fence: Fence,
        /// The attempts made.
        attempts: u32,
        /// The last recorded error.
        error: Option<String>,
        /// True when this claim is what moved the run to ABANDONED (its
        /// attempts ran out just now).
        abandoned_now: bool,
    },
}

/// What another session held when a claim gave up waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The window's row (PostgreSQL).
    Row,
    /// The store's write lock (SQLite: one lock for the whole file).
    Store,
}

/// How a failed attempt ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Try again once `after` has passed on the store's clock. A CLAIMED
    /// run becomes FAILED (retryable); a PREPARED run keeps its committed
    /// report and messages and lets its claim go, so that the next attempt
    /// delivers them.
    Retry {
        /// The wait before the next attempt.
        after: Duration,
    },
    /// Let the claim go, as `Retry`, without counting this attempt: the
    /// process was asked to stop while waiting, and nothing failed for
    /// good. A clean handover must never use up the window's attempts.
    Release {
        /// The wait before the next attempt.
        after: Duration,
    },
    /// Never try again: FAILED, not retryable.
    Permanent,
    /// Give up and ask a person: ABANDONED.
    Abandon,
}

/// A message delivery attempt, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempted<'a> {
    /// The message.
    pub seq: u32,
    /// Sends of the message not yet counted in the store (at-most-once
    /// sends are counted when they begin).
    pub tries: u32,
    /// A short status for `history`: `http 201`, `appended`, the error.
    pub status: &'a str,
}

/// A message still to deliver, with what earlier attempts left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMessage {
    /// The message as staged.
    pub message: StagedMessage,
    /// Sends recorded so far.
    pub attempts: u32,
    /// An at-most-once send began and its outcome was never recorded: the
    /// destination may or may not have it.
    pub in_flight: bool,
}

/// One staged message, as the guest produced it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StagedMessage {
    /// Position in the run, from 1.
    pub seq: u32,
    /// A destination name declared in the job's config.
    pub destination: String,
    /// `<window key>#<seq>`.
    pub idempotency_key: String,
    /// MIME type, for example `application/json`.
    pub content_type: String,
    /// The exact bytes to deliver.
    pub body: Vec<u8>,
}

/// A committed report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredReport {
    /// The report text.
    pub summary: String,
    /// The cursor proposed by the run, applied when it is DONE.
    pub cursor: Option<String>,
    /// What a language model is asked to describe of the run (the
    /// component's `describe` export), if anything.
    pub prompt: Option<String>,
    /// Whether `prompt` is the component's answer: false for runs
    /// committed before `describe` existed, and when `describe` failed
    /// (a replay then has nothing to compare it with).
    pub described: bool,
}

/// A run's row, as `history` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The window key.
    pub key: WindowKey,
    /// The job.
    pub job: String,
    /// Window bounds.
    pub window_start: Timestamp,
    /// Window bounds.
    pub window_end: Timestamp,
    /// The window's zone.
    pub timezone: String,
    /// Where the run stands.
    pub state: RunState,
    /// Current fence.
    pub fence: Fence,
    /// Attempts made.
    pub attempt: u32,
    /// Current or last owner.
    pub owner: String,
    /// Lease expiry.
    pub lease_until: Timestamp,
    /// After a retryable failure: the earliest next attempt.
    pub retry_at: Option<Timestamp>,
    /// `sha256:<hex>` of the component of the latest attempt.
    pub component: String,
    /// The committed report, once PREPARED.
    pub report: Option<StoredReport>,
    /// The last error, if any.
    pub error: Option<String>,
    /// Size of the stored (compressed) journal.
    pub journal_bytes: Option<u64>,
    /// Messages staged / delivered.
    pub messages: u32,
    /// Messages delivered so far.
    pub delivered: u32,
    /// When the row was created.
    pub created_at: Timestamp,
    /// When the row last changed.
    pub updated_at: Timestamp,
    /// What became of the run's digest, once one was asked for.
    pub digest: Option<DigestRecord>,
}

/// What the store knows of a run's digest: never the digest itself (that
/// is a cache on the host's disk, made again from the prompt), only where
/// to find it, why the last attempt failed, and whether its message went
/// out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestRecord {
    /// The cache entry of the newest digest made (sha256 hex of its model,
    /// settings and prompt).
    pub cache_key: Option<String>,
    /// The model that made it, or was asked.
    pub model: Option<String>,
    /// Why the last attempt failed, when it did.
    pub error: Option<String>,
    /// When the digest message was delivered, if it was.
    pub sent_at: Option<Timestamp>,
    /// When this record last changed.
    pub updated_at: Timestamp,
}

/// The outcome of one attempt at a run's digest, as recorded.
#[derive(Debug, Clone, Copy)]
pub struct DigestNote<'a> {
    /// The cache entry it made or found, when it has one.
    pub cache_key: Option<&'a str>,
    /// The model asked.
    pub model: &'a str,
    /// Why it failed, when it did (scrubbed of credentials).
    pub error: Option<&'a str>,
}

/// The error for a key the store already holds for another window: the
/// job's zone or window changed under the same name, and skipping would
/// silently leave the new window unreported.
pub fn window_mismatch(key: &WindowKey, start: Timestamp, end: Timestamp, zone: &str) -> Error {
    Error::input(format!(
        "window key `{key}` is already recorded for another window ({start} to {end} in {zone}); \
         the job's time zone or window changed, so give the job a new name"
    ))
}

/// Opens an existing store for reading, or `None` when there is none yet
/// (no file, or no jobhost tables in the database).
///
/// # Errors
///
/// As [`open_read_only`], but for a missing store.
pub fn open_if_exists(location: &StoreLocation) -> Result<Option<Box<dyn ClaimStore>>> {
    Ok(match location {
        StoreLocation::Sqlite(path) if !path.exists() => None,
        StoreLocation::Sqlite(path) => Some(Box::new(SqliteStore::open_read_only(path)?)),
        StoreLocation::Postgres(url) => {
            PostgresStore::open_if_exists(url)?.map(|s| Box::new(s) as Box<dyn ClaimStore>)
        }
    })
}

/// The durable claim store contract. Every method after `claim` is fenced.
pub trait ClaimStore {
    /// Whether opening the store created it (a new SQLite file, or
    /// jobhost's tables in a database that had none): nothing has ever run
    /// in it, which is worth saying, since a job that ran before then used
    /// another store.
    fn created(&self) -> bool;

    /// The run's current row, without claiming anything.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be read.
    fn peek(&mut self, key: &WindowKey) -> Result<Option<RunRecord>>;

    /// Claims the window atomically.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be written.
    fn claim(&mut self, req: &ClaimRequest<'_>) -> Result<Claim>;

    /// Commits the report, its staged messages and the run's journal:
    /// CLAIMED -> PREPARED, in one transaction.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches; `Error::Store`.
    fn prepare(
        &mut self,
        lease: &Lease,
        report: &StoredReport,
        messages: &[StagedMessage],
        journal: &[u8],
        now: Timestamp,
    ) -> Result<()>;

    /// The stored journal of a run, if it has one.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn journal(&mut self, key: &WindowKey) -> Result<Option<Vec<u8>>>;

    /// The messages of a PREPARED run that are not delivered yet, in order.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn pending_messages(&mut self, key: &WindowKey) -> Result<Vec<PendingMessage>>;

    /// Every message a PREPARED (or later) run staged, in order, whatever
    /// became of it.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn messages(&mut self, key: &WindowKey) -> Result<Vec<StagedMessage>>;

    /// The committed report of a run.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn report(&mut self, key: &WindowKey) -> Result<Option<StoredReport>>;

    /// Confirms, just before a send, that the claim is still ours, and
    /// returns how much of the lease is left on the store's clock (negative
    /// once it ran out). Reads only.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches; `Error::Store`.
    fn check_lease(&mut self, lease: &Lease, now: Timestamp) -> Result<SignedDuration>;

    /// Extends the lease of a PREPARED run to `lease` from now on the
    /// store's clock (never shortening it), fenced. With `in_flight`, also
    /// records in the same transaction that a send of that message begins
    /// (counting it), for at-most-once destinations.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches; `Error::Store`.
    fn renew(
        &mut self,
        lease: &Lease,
        for_: Duration,
        in_flight: Option<u32>,
        now: Timestamp,
    ) -> Result<()>;

    /// Records that a send of message `seq` certainly did not arrive (an
    /// at-most-once send refused before it was processed), clearing its
    /// in-flight mark so that a crash before the next send does not make it
    /// look uncertain.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches; `Error::Store`.
    fn not_sent(&mut self, lease: &Lease, seq: u32, status: &str, now: Timestamp) -> Result<()>;

    /// Records one message as delivered.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches; `Error::Store`.
    fn mark_delivered(&mut self, lease: &Lease, done: &Attempted<'_>, now: Timestamp)
    -> Result<()>;

    /// PREPARED -> DONE, moving the job's cursor in the same transaction.
    /// `last_delivery` records the final message's delivery in that same
    /// transaction, saving a commit (and its fsync) per run.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches or a message is
    /// still undelivered; `Error::Store`.
    fn finish(
        &mut self,
        lease: &Lease,
        last_delivery: Option<&Attempted<'_>>,
        now: Timestamp,
    ) -> Result<()>;

    /// Records a failed attempt of a CLAIMED or PREPARED run and lets the
    /// claim go. `message` is the delivery that failed, when one did.
    ///
    /// # Errors
    ///
    /// `Error::LeaseLost` when the fence no longer matches; `Error::Store`.
    fn fail(
        &mut self,
        lease: &Lease,
        error: &str,
        how: Failure,
        message: Option<&Attempted<'_>>,
        now: Timestamp,
    ) -> Result<()>;

    /// The cursor of the job's last DONE run.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn cursor(&mut self, job: &JobName) -> Result<Option<String>>;

    /// Every run, newest window first, optionally for one job.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn history(&mut self, job: Option<&str>) -> Result<Vec<RunRecord>>;

    /// `job`'s runs whose window starts at or after `from` (all of them
    /// for `None`), newest window first: what a plan needs, without
    /// reading the whole history at every wake-up.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn history_from(&mut self, job: &str, from: Option<Timestamp>) -> Result<Vec<RunRecord>>;

    /// `job`'s runs that are not finished, of any age: CLAIMED, PREPARED,
    /// or FAILED and waiting to be retried; newest window first.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn unfinished(&mut self, job: &str) -> Result<Vec<RunRecord>>;

    /// Records each of `skips` as SKIPPED with its reason, all in one
    /// transaction, unless the store already holds a row for the window (a
    /// run, or another scheduler's decision): the row that is there wins.
    /// Returns, in order, whether this call recorded each one.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn record_skips(
        &mut self,
        skips: &[Skip<'_>],
        owner: &str,
        now: Timestamp,
    ) -> Result<Vec<bool>>;

    /// The end of the newest window up to which a scheduler has decided
    /// (run or skipped) every window of `job`; `None` before the first.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn decided_until(&mut self, job: &JobName) -> Result<Option<Timestamp>>;

    /// Moves `job`'s [`ClaimStore::decided_until`] forward to `until`
    /// (never back).
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn set_decided_until(&mut self, job: &JobName, until: Timestamp, now: Timestamp) -> Result<()>;

    /// Records the outcome of an attempt at a DONE run's digest (keeping
    /// whether its message went out, and the last cache entry made when
    /// this attempt made none).
    ///
    /// # Errors
    ///
    /// `Error::Store`; `Error::Input` when the store has no such run.
    fn record_digest(
        &mut self,
        key: &WindowKey,
        note: &DigestNote<'_>,
        now: Timestamp,
    ) -> Result<()>;

    /// Records that the run's digest message was delivered.
    ///
    /// # Errors
    ///
    /// `Error::Store`; `Error::Input` when the store has no such run.
    fn digest_sent(&mut self, key: &WindowKey, now: Timestamp) -> Result<()>;
}

/// The error for a digest recorded for a run the store does not hold.
pub fn no_such_run(key: &WindowKey) -> Error {
    Error::input(format!(
        "no run `{key}` in the store; `jobhost history` lists the keys"
    ))
}

/// A window a scheduler decided not to run, and why.
#[derive(Debug, Clone, Copy)]
pub struct Skip<'a> {
    /// The window.
    pub window: &'a Window,
    /// Why, for a person: the catch-up policy that skipped it.
    pub reason: &'a str,
}

/// What a claim found in an existing row, read under the row's write lock,
/// with the lease and the retry time already judged on the store's clock.
#[derive(Debug, Clone)]
pub struct Existing {
    /// The row's state.
    pub state: RunState,
    /// Its fence.
    pub fence: i64,
    /// Attempts so far.
    pub attempt: u32,
    /// The current or last owner.
    pub owner: String,
    /// When its lease runs out.
    pub lease_until: Timestamp,
    /// Whether that is still ahead on the store's clock.
    pub lease_live: bool,
    /// The last error.
    pub error: Option<String>,
    /// Whether its failure may be retried.
    pub retryable: bool,
    /// The retry time, when it is still ahead on the store's clock.
    pub retry_pending: Option<Timestamp>,
    /// The window the row was claimed for: start, end, zone.
    pub bounds: (Timestamp, Timestamp, String),
}

/// What a claim must do with an existing row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Answer without writing.
    Answer(Claim),
    /// Write ABANDONED with this error, then answer `GaveUp`.
    Abandon(String),
    /// Take the row over with fence + 1 and attempt + 1: `resume` delivers
    /// the committed messages, otherwise the guest runs again.
    TakeOver {
        /// The report is committed: deliver it, never re-render.
        resume: bool,
    },
}

/// The claim decision for an existing row, shared by every backend.
///
/// # Errors
///
/// `Error::Input` when the row was claimed for another window under the
/// same key.
pub fn decide(existing: &Existing, req: &ClaimRequest<'_>) -> Result<Decision> {
    let key = req.window.key();
    let (start, end, zone) = &existing.bounds;
    if (*start, *end, zone.as_str()) != (req.window.start, req.window.end, req.window.zone.name()) {
        return Err(window_mismatch(&key, *start, *end, zone));
    }
    let fence = Fence(existing.fence);
    let attempts = existing.attempt;
    let error = existing.error.clone();
    let gave_up = || {
        Decision::Answer(Claim::GaveUp {
            fence,
            attempts,
            error: error.clone(),
            abandoned_now: false,
        })
    };
    Ok(match existing.state {
        RunState::Done => Decision::Answer(Claim::Done {
            attempt: attempts,
            fence,
        }),
        RunState::Claimed | RunState::Prepared if existing.lease_live => {
            Decision::Answer(Claim::Busy {
                owner: existing.owner.clone(),
                attempt: attempts,
                fence,
                lease_until: existing.lease_until,
            })
        }
        RunState::Abandoned => gave_up(),
        RunState::Skipped if !req.take_skipped => Decision::Answer(Claim::Skipped {
            reason: existing.error.clone(),
        }),
        RunState::Failed if !existing.retryable => gave_up(),
        _ if existing.retry_pending.is_some() => Decision::Answer(Claim::Wait {
            until: existing.retry_pending.unwrap_or(Timestamp::MAX),
            fence,
            attempts,
            error,
        }),
        // Out of attempts (each one failed, or died holding the claim):
        // give up loudly rather than leave the window looking as if it
        // might still finish.
        _ if attempts >= req.max_attempts => Decision::Abandon(format!(
            "abandoned after {attempts} attempt(s); last error: {}",
            error.as_deref().unwrap_or(
                "none recorded (the process died holding the claim; look at the host's logs)"
            )
        )),
        RunState::Prepared => Decision::TakeOver { resume: true },
        // A skip is a decision, not an effect: run on purpose, the window
        // runs (once, under the claim, as any other).
        RunState::Claimed | RunState::Failed | RunState::Skipped => {
            Decision::TakeOver { resume: false }
        }
    })
}

/// The answer to a claim once `decision` has been written.
pub fn decided(decision: Decision, req: &ClaimRequest<'_>, existing: &Existing) -> Claim {
    let lease = |resume| {
        Lease {
            key: req.window.key(),
            fence: Fence(existing.fence + 1),
            owner: req.owner.to_string(),
            attempt: existing.attempt + 1,
        }
        .into_claim(resume)
    };
    match decision {
        Decision::Answer(claim) => claim,
        Decision::Abandon(why) => Claim::GaveUp {
            fence: Fence(existing.fence),
            attempts: existing.attempt,
            error: Some(why),
            abandoned_now: true,
        },
        Decision::TakeOver { resume } => lease(resume),
    }
}

impl Lease {
    fn into_claim(self, resume: bool) -> Claim {
        if resume {
            Claim::Resume { lease: self }
        } else {
            Claim::Run {
                lease: self,
                takeover: true,
            }
        }
    }
}

/// The error for a fenced write that matched no row.
pub fn lease_lost(lease: &Lease) -> Error {
    Error::LeaseLost(format!(
        "lost the claim on `{}` (fence {}): another process took it over after the lease ran out; \
         stopping without writing or sending",
        lease.key, lease.fence
    ))
}

/// Fails with `LeaseLost` unless a fenced write changed exactly one row.
///
/// # Errors
///
/// `Error::LeaseLost`.
pub fn fenced(changed: u64, lease: &Lease) -> Result<()> {
    if changed == 1 {
        Ok(())
    } else {
        Err(lease_lost(lease))
    }
}

/// The error for finishing a run whose messages are not all delivered.
pub fn undelivered(lease: &Lease) -> Error {
    Error::Delivery(format!(
        "cannot mark `{}` done: some of its messages are not delivered yet",
        lease.key
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::window::{WindowKind, Zone};

    #[test]
    fn a_row_for_another_window_under_the_same_key_is_refused() {
        let job = JobName::new("j").unwrap();
        let now: Timestamp = "2026-11-09T00:05:00Z".parse().unwrap();
        let w = Window::last_closed(&job, WindowKind::Day, &Zone::utc(), now).unwrap();
        let existing = Existing {
            state: RunState::Done,
            fence: 1,
            attempt: 1,
            owner: "a".into(),
            lease_until: now,
            lease_live: false,
            error: None,
            retryable: false,
            retry_pending: None,
            bounds: (w.start, w.end, "Asia/Tokyo".into()),
        };
        let req = ClaimRequest {
            window: &w,
            owner: "b",
            component: "sha256:00",
            now,
            lease: Duration::from_secs(60),
            max_attempts: 3,
            take_skipped: true,
        };
        let err = decide(&existing, &req).unwrap_err();
        assert!(err.to_string().contains("give the job a new name"), "{err}");
    }
}
