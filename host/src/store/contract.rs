//! The store's contract, in two traits: [`ClaimStore`], the claim protocol a
//! run follows (claim, commit, deliver, finish or fail, every write after
//! the claim fenced), and [`Ledger`], what the store records and tells
//! about runs for everyone else (a run's row, its journal and messages,
//! history, the scheduler's bookkeeping, digest notes). [`Store`] is both:
//! what a backend is.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::{
    Attempted, Claim, ClaimRequest, DigestNote, Failure, Lease, PendingMessage, RunRecord, Skip,
    StagedMessage, StoredReport,
};
use crate::core::error::Result;
use crate::core::window::{JobName, WindowKey};

/// The claim protocol of one run. Every method after `claim` is fenced: it
/// fails with `Error::LeaseLost` when another process took the run over.
pub trait ClaimStore {
    /// Whether opening the store created it (a new SQLite file, or
    /// jobhost's tables in a database that had none): nothing has ever run
    /// in it, which is worth saying, since a job that ran before then used
    /// another store.
    fn created(&self) -> bool;

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

    /// The messages of a PREPARED run that are not delivered yet, in order.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn pending_messages(&mut self, key: &WindowKey) -> Result<Vec<PendingMessage>>;

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
}

/// What the store records and tells about runs besides the claim protocol:
/// reads for people and replays, and the scheduler's and digests' notes.
pub trait Ledger {
    /// The run's current row, without claiming anything.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be read.
    fn peek(&mut self, key: &WindowKey) -> Result<Option<RunRecord>>;

    /// The stored journal of a run, if it has one.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn journal(&mut self, key: &WindowKey) -> Result<Option<Vec<u8>>>;

    /// Every message a PREPARED (or later) run staged, in order, whatever
    /// became of it.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn messages(&mut self, key: &WindowKey) -> Result<Vec<StagedMessage>>;

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

/// A claim store backend: the protocol and the ledger.
pub trait Store: ClaimStore + Ledger {}

impl<T: ClaimStore + Ledger> Store for T {}
