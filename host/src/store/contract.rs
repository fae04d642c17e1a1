//! The store's contract, in two traits: [`ClaimStore`], the claim protocol a
//! run follows (claim, commit, deliver, finish or fail, every write after
//! the claim fenced), and [`Ledger`], what the store records and tells
//! about runs for everyone else (a run's row, its journal and messages,
//! history, the scheduler's bookkeeping, digest notes). [`Store`] is both,
//! with the incidents and notifications of [`super::Notices`]: what a
//! backend is.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::chain::Link;
use super::verify::ChainRows;
use super::{
    Actor, Archived, Attempted, AuditLine, Claim, ClaimRequest, DigestNote, Failure, Forgotten,
    FreshClaims, InputsRecord, Lease, MessageRecord, Pause, PendingMessage, Pruned, RangeQuery,
    Revision, RunHead, RunInputs, RunRecord, RunState, ShadowRun, Skip, StagedMessage, StaleMark,
    StoredReport, UpstreamUse,
};
use crate::core::error::Result;
use crate::core::window::{JobName, Window, WindowKey};

/// The claim protocol of one run. Every method after `claim` is fenced: it
/// fails with `Error::LeaseLost` when another process took the run over.
pub trait ClaimStore {
    /// Whether opening the store created it (a new SQLite file, or
    /// jobhost's tables in a database that had none): nothing has ever run
    /// in it, which is worth saying, since a job that ran before then used
    /// another store.
    fn created(&self) -> bool;

    /// The hash of the last chain entry this store appended, if any (what
    /// a receipt names).
    fn last_entry(&self) -> Option<String> {
        None
    }

    /// Claims the window atomically.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be written.
    fn claim(&mut self, req: &ClaimRequest<'_>) -> Result<Claim>;

    /// Claims, in one transaction of a few statements, those of a job's
    /// windows that have no row yet (the first [`FreshClaims::MOST`]),
    /// each as a first attempt (a forgotten window goes on from its fence
    /// and revision); the leases granted, in the order of the windows. A
    /// window with a row, whatever its state, is left alone for
    /// [`ClaimStore::claim`] to decide; a paused job, or a store another
    /// process holds past the claim's wait, grants nothing.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be written.
    fn claim_fresh(&mut self, req: &FreshClaims<'_>) -> Result<Vec<Lease>>;

    /// Lets go of claims this process made and will not start (asked to
    /// stop with windows of a batch still to run): each window has no row
    /// again, as if never claimed, and its next claim takes the next fence.
    /// A lease another process took over meanwhile is left alone.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be written.
    fn release(&mut self, leases: &[Lease], now: Timestamp) -> Result<()>;

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
    ) -> Result<()> {
        self.prepare_using(lease, report, messages, journal, &RunInputs::default(), now)
    }

    /// [`ClaimStore::prepare`], recording in the same transaction what the
    /// run read: the upstream windows it used (`[[needs]]`), with the
    /// window's revision, and the fingerprint of its source's rows.
    ///
    /// # Errors
    ///
    /// As [`ClaimStore::prepare`].
    fn prepare_using(
        &mut self,
        lease: &Lease,
        report: &StoredReport,
        messages: &[StagedMessage],
        journal: &[u8],
        read: &RunInputs,
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

    /// The run's [`RunHead`], without claiming anything: a narrower read
    /// than [`Ledger::peek`] (one row of one table), for answering a run of
    /// a window already decided.
    ///
    /// # Errors
    ///
    /// `Error::Store` when the store cannot be read.
    fn peek_head(&mut self, key: &WindowKey) -> Result<Option<RunHead>>;

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

    /// The names of the jobs the store holds runs of, in order: one read
    /// of the job index, not of the history.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn jobs(&mut self) -> Result<Vec<String>>;

    /// Every run, newest window first, optionally for one job.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn history(&mut self, job: Option<&str>) -> Result<Vec<RunRecord>>;

    /// The newest `limit` rows of [`Ledger::history`] (`history --limit
    /// N`), read with a `LIMIT` instead of the whole history.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn newest(&mut self, job: Option<&str>, limit: u64) -> Result<Vec<RunRecord>>;

    /// `job`'s runs whose window starts at or after `from` (all of them
    /// for `None`), newest window first: what a plan needs, without
    /// reading the whole history at every wake-up.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn history_from(&mut self, job: &str, from: Option<Timestamp>) -> Result<Vec<RunRecord>>;

    /// The rows [`RangeQuery`] asks for: bounded by its limit and read
    /// through the `(job, window_start)` index, or with states through the
    /// `(job, state, window_start)` one, one bounded read per state.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn runs_in_range(&mut self, q: &RangeQuery<'_>) -> Result<Vec<RunRecord>>;

    /// How many of `job`'s rows whose window starts in `[from, until)`
    /// (either end open when `None`) are in each state; states with no row
    /// are left out. One indexed count per state, so a range costs the
    /// rows in it; SQLite answers the whole history (both ends open) from
    /// counts it keeps as rows change, at a cost that does not grow with
    /// the history.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn state_counts(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<Vec<(RunState, u64)>>;

    /// `job`'s runs that are not finished, of any age: CLAIMED, PREPARED,
    /// WAITING for an upstream, or FAILED and waiting to be retried; newest
    /// window first.
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

    /// Records that `window` waits for its upstream (`waits_for`, what it
    /// waits for, in words): a WAITING row where the window has none (a
    /// forgotten window's goes on from its fence and revision), or the
    /// text of a WAITING row already there brought up to date. A row in
    /// any other state is left as it is. Whether the window is WAITING now.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn record_waiting(
        &mut self,
        window: &Window,
        waits_for: &str,
        owner: &str,
        now: Timestamp,
    ) -> Result<bool>;

    /// The stale marks on the current revisions of `job`'s windows (every
    /// job's, with `None`; only `key`'s, with a key), newest window first,
    /// at most `limit`.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn stale(
        &mut self,
        job: Option<&str>,
        key: Option<&WindowKey>,
        limit: usize,
    ) -> Result<Vec<StaleMark>>;

    /// `job`'s DONE windows starting in `[from, until)` with what each
    /// recorded of its source's rows, oldest first, at most `limit`.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn inputs(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<InputsRecord>>;

    /// Marks revision `revision` of `key` stale for `cause` (about
    /// `about`: an upstream window's key, or `inputs`), if it is still the
    /// window's DONE revision; whether it did.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn mark_stale(
        &mut self,
        key: &WindowKey,
        revision: u32,
        about: &str,
        cause: &str,
        now: Timestamp,
    ) -> Result<bool>;

    /// Records a candidate component's run beside a live run (replacing
    /// one recorded for the same revision), if the window is still at that
    /// revision; whether it did.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn record_shadow(&mut self, run: &ShadowRun, now: Timestamp) -> Result<bool>;

    /// The shadow run of the current revision of `key`, if any.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn shadow(&mut self, key: &WindowKey) -> Result<Option<ShadowRun>>;

    /// How many of `job`'s shadow runs of current revisions ended each
    /// way (`agreed`, `differed`, `failed`), those with none left out.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn shadow_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>>;

    /// The upstream windows the current revision of `key` used, in the
    /// order its run read them.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn uses(&mut self, key: &WindowKey) -> Result<Vec<UpstreamUse>>;

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

    /// The cursor of `job`'s newest DONE window that ends by `start`: what
    /// a rerun of the window starting then is given.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn cursor_before(&mut self, job: &JobName, start: Timestamp) -> Result<Option<String>>;

    /// Every message of the run's current revision with what became of it.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn message_records(&mut self, key: &WindowKey) -> Result<Vec<MessageRecord>>;

    /// The window's earlier revisions, oldest first, with their messages.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn revisions(&mut self, key: &WindowKey) -> Result<Vec<Revision>>;

    /// An earlier revision's journal and staged messages, for a replay.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn archived(&mut self, key: &WindowKey, revision: u32) -> Result<Option<Archived>>;

    /// The job's pause, if it is paused.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn paused(&mut self, job: &str) -> Result<Option<Pause>>;

    /// Pauses `job` with `actor`'s note (replacing an earlier note), with
    /// an audit line; returns the pause it replaced.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn pause(&mut self, job: &str, actor: Actor<'_>, now: Timestamp) -> Result<Option<Pause>>;

    /// Ends `job`'s pause, with an audit line; returns the pause it ended
    /// (`None`: the job was not paused, and nothing is written).
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn resume(&mut self, job: &str, actor: Actor<'_>, now: Timestamp) -> Result<Option<Pause>>;

    /// Removes a FAILED, ABANDONED or SKIPPED window's row (and, with
    /// `force`, a PREPARED one whose lease ran out) so that it runs again
    /// as if new, in one transaction with an audit line; moves the job's
    /// `decided_until` back to the window's start. A run with a committed
    /// report is archived as a revision first, so the next run of the
    /// window is a new revision with new idempotency keys.
    ///
    /// # Errors
    ///
    /// `Error::Input` for no such window, a DONE one (that needs a rerun),
    /// a live claim, or PREPARED without `force`; `Error::Store`.
    fn forget(
        &mut self,
        key: &WindowKey,
        force: bool,
        actor: Actor<'_>,
        now: Timestamp,
    ) -> Result<Forgotten>;

    /// The audit lines, newest first, optionally of one job.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn audit(&mut self, job: Option<&str>) -> Result<Vec<AuditLine>>;

    /// Drops the journals (unless `keep_journals`) and delivered message
    /// bodies of DONE runs, and of archived revisions, whose window ended
    /// before `before`, keeping every row and its receipt fields; never
    /// touches anything unfinished. One audit line when anything was
    /// pruned.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn prune(
        &mut self,
        job: Option<&str>,
        before: Timestamp,
        keep_journals: bool,
        actor: Actor<'_>,
        now: Timestamp,
    ) -> Result<Pruned>;

    /// The jobs with a chain or rows, in name order (`*` holds what a
    /// prune of every job recorded); none on a store from before the
    /// chain.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn chain_jobs(&mut self) -> Result<Vec<String>>;

    /// Up to `limit` entries of `job`'s chain numbered after `after`, in
    /// order.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn chain(&mut self, job: &str, after: i64, limit: u64) -> Result<Vec<Link>>;

    /// The entries of `job`'s chain from the first about window `key`'s
    /// revision `revision` to the last about it, every entry between
    /// included (what an exported run carries).
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn chain_of(&mut self, key: &WindowKey, revision: u32) -> Result<Vec<Link>>;

    /// Everything of `job` that `jobhost verify` compares with its chain.
    ///
    /// # Errors
    ///
    /// `Error::Store`.
    fn chain_rows(&mut self, job: &str) -> Result<ChainRows>;
}

/// A claim store backend: the protocol and the ledger.
pub trait Store: ClaimStore + Ledger + super::Notices {}

impl<T: ClaimStore + Ledger + super::Notices> Store for T {}
