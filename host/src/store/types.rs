//! The store's vocabulary: fences, run states, leases, what a claim asks
//! and answers, how an attempt fails, and the rows a run leaves (its
//! messages, report and record).

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;

use crate::core::window::{JobName, Window, WindowKey};

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
    /// policy); `skip_reason` holds why. Nothing ran and nothing was sent,
    /// so a run asked for on purpose may still claim it.
    Skipped,
    /// The window is due, but an upstream window it needs (`[[needs]]`) is
    /// not DONE yet; `skip_reason` holds what it waits for. Nothing ran and
    /// nothing is held: any run of the window may claim it once its needs
    /// are met, and the daemon looks at it again until then.
    Waiting,
}

impl RunState {
    /// Every state.
    pub const ALL: [RunState; 7] = [
        RunState::Claimed,
        RunState::Prepared,
        RunState::Done,
        RunState::Failed,
        RunState::Abandoned,
        RunState::Skipped,
        RunState::Waiting,
    ];

    /// One count per state of the rows of `table` that match `filter`, as
    /// `(state, n)` rows with `n > 0`: each a range of the `(job, state,
    /// window_start)` index, so that counting a range costs the rows in it
    /// and not the job's whole history (one `GROUP BY` would walk the
    /// index from the job's first row, or fetch each row's state).
    pub(crate) fn counts_sql(table: &str, filter: &str) -> String {
        let counts: Vec<String> = RunState::ALL
            .iter()
            .map(|s| {
                let s = s.as_str();
                format!(
                    "SELECT '{s}' AS state, count(*) AS n FROM {table} \
                     WHERE {filter} AND state = '{s}'"
                )
            })
            .collect();
        format!(
            "SELECT state, n FROM ({}) AS c WHERE n > 0",
            counts.join(" UNION ALL ")
        )
    }

    /// The state's name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Claimed => "CLAIMED",
            RunState::Prepared => "PREPARED",
            RunState::Done => "DONE",
            RunState::Failed => "FAILED",
            RunState::Abandoned => "ABANDONED",
            RunState::Skipped => "SKIPPED",
            RunState::Waiting => "WAITING",
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
            "WAITING" => RunState::Waiting,
            _ => return None,
        })
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state is written as stored (`"DONE"`), in every output.
impl serde::Serialize for RunState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An enum stored as one of a few names: the names as stored, parsed back
/// (an unknown name is `None`: written by a newer jobhost or by hand), shown
/// and serialized as they are stored.
macro_rules! stored_names {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $stored:literal,)*
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $stored)] $variant,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: &[$name] = &[$($name::$variant),*];

            /// The name as stored.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $stored,)*
                }
            }

            /// Parses a stored name.
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($stored => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }
    };
}

stored_names! {
    /// What became of one staged message.
    pub enum MessageState {
        /// Not delivered yet: sent by this run or a later attempt.
        Pending = "PENDING",
        /// The destination took it.
        Delivered = "DELIVERED",
        /// The destination refused it for good.
        Failed = "FAILED",
        /// The host gave up on it (an at-most-once send whose outcome is
        /// unknown, or the run's attempts spent).
        Abandoned = "ABANDONED",
    }
}

stored_names! {
    /// What a person did on purpose, as an audit line records it.
    pub enum AuditAction {
        Forget = "forget",
        Rerun = "rerun",
        Retry = "retry",
        Pause = "pause",
        Resume = "resume",
        Prune = "prune",
        Run = "run",
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
    /// Which revision of the window this run is, from 1: a rerun (or a
    /// window forgotten after its report was committed) makes the next.
    pub revision: u32,
    /// The claim this one ended, when it took over from an owner that
    /// stopped without letting go (its lease ran out, or its process is
    /// gone).
    pub taken_from: Option<TakenFrom>,
}

/// An owner whose claim was taken over: it stopped without letting go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenFrom {
    /// Its owner string (`<host>:<pid>:<tag>`).
    pub owner: String,
    /// Its fence.
    pub fence: Fence,
    /// Why its claim could be taken.
    pub because: Takeover,
}

/// Why a claim on a CLAIMED or PREPARED window could take it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takeover {
    /// The owner's lease ran out.
    LeaseExpired,
    /// The owner's lease had not run out, but its process is gone: it ran
    /// on this machine (same boot, same pid namespace) and its pid is free
    /// or another process's.
    OwnerGone,
}

impl Takeover {
    /// `lease-expired` or `owner-gone`.
    pub fn as_str(self) -> &'static str {
        match self {
            Takeover::LeaseExpired => "lease-expired",
            Takeover::OwnerGone => "owner-gone",
        }
    }
}

/// Tells a claim whether the process holding a window's live lease has
/// certainly ended, so that a claim on the machine it ran on need not wait
/// for its lease. The store writes [`OwnerProbe::record`] with every claim
/// and hands it back, with the owner, to [`OwnerProbe::gone`]; the shared
/// decision ([`decide`](super::decide)) asks.
pub trait OwnerProbe: fmt::Debug + Sync {
    /// What the store records of this process with a claim made as
    /// `owner`; `None` records nothing.
    fn record(&self, owner: &str) -> Option<String>;

    /// Whether `owner`, which recorded `record` with its claim, has
    /// certainly ended. Anything uncertain (another machine, an older
    /// jobhost's claim without a record) is `false`: the lease decides.
    fn gone(&self, owner: &str, record: Option<&str>) -> bool;
}

/// The processes of this machine, seen through `/proc`
/// ([`crate::core::process`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProcesses;

impl OwnerProbe for LocalProcesses {
    fn record(&self, owner: &str) -> Option<String> {
        crate::core::process::ProcessRecord::current(owner).map(|r| r.to_text())
    }

    fn gone(&self, owner: &str, record: Option<&str>) -> bool {
        crate::core::process::owner_gone(owner, record)
    }
}

/// A probe that records nothing and knows no owner to be gone: leases
/// alone decide.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeasesOnly;

impl OwnerProbe for LeasesOnly {
    fn record(&self, _: &str) -> Option<String> {
        None
    }

    fn gone(&self, _: &str, _: Option<&str>) -> bool {
        false
    }
}

impl Lease {
    /// The prefix of this run's idempotency keys: the window key for the
    /// first revision, `<key>~r<N>` for revision N > 1, so that downstream
    /// sees a rerun's messages as new, not as retries of the earlier ones.
    pub fn message_prefix(&self) -> String {
        message_prefix(&self.key, self.revision)
    }
}

/// See [`Lease::message_prefix`].
pub fn message_prefix(key: &WindowKey, revision: u32) -> String {
    if revision <= 1 {
        key.to_string()
    } else {
        format!("{key}~r{revision}")
    }
}

/// Why a claim is made, which decides what it may take over besides a new
/// window, a dead owner's claim and a retry that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose<'a> {
    /// The scheduler's own run: a window it skipped stays skipped.
    Scheduled,
    /// A run a person asked for (`run`, `run --for`, `backfill --only
    /// missing`): a window a scheduler skipped is run.
    Asked,
    /// As [`Purpose::Asked`], for a window a person named (`run --for`, a
    /// backfill, the dashboard): a claim it is granted writes an audit line
    /// `run` saying who asked.
    Named {
        /// Who asked (user and host, or a dashboard token's name).
        by: &'a str,
    },
    /// `backfill --only failed`: also a FAILED or ABANDONED window, as a
    /// new series of attempts (the old error kept in the audit lines).
    Retry {
        /// Why, for the audit line.
        reason: &'a str,
        /// Who asked (user and host).
        by: &'a str,
    },
    /// `rerun` and `backfill --only all`: also a DONE window, as its next
    /// revision (the DONE one archived with its messages).
    Rerun {
        /// Why, stored with the revision and in the audit line.
        reason: &'a str,
        /// Only this revision is rerun: a claim that finds a newer one
        /// (somebody reran it meanwhile) answers `Done`.
        of_revision: Option<u32>,
        /// Who asked (user and host).
        by: &'a str,
    },
}

impl<'a> Purpose<'a> {
    /// Whether a SKIPPED window is run.
    pub fn takes_skipped(self) -> bool {
        !matches!(self, Purpose::Scheduled)
    }

    /// Whether FAILED and ABANDONED windows start a new attempt series.
    pub fn restarts_failed(self) -> bool {
        matches!(self, Purpose::Retry { .. } | Purpose::Rerun { .. })
    }

    /// The reason stored in audit lines, if a person gave one.
    pub fn reason(self) -> Option<&'a str> {
        match self {
            Purpose::Retry { reason, .. } | Purpose::Rerun { reason, .. } => Some(reason),
            Purpose::Scheduled | Purpose::Asked | Purpose::Named { .. } => None,
        }
    }

    /// Who asked, for audit lines.
    pub fn by(self) -> Option<&'a str> {
        match self {
            Purpose::Retry { by, .. } | Purpose::Rerun { by, .. } | Purpose::Named { by } => {
                Some(by)
            }
            Purpose::Scheduled | Purpose::Asked => None,
        }
    }
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
    /// Why the claim is made: what it may take over.
    pub purpose: Purpose<'a>,
    /// Whether the holder of a live lease is gone ([`LocalProcesses`] for
    /// a run; [`LeasesOnly`] to wait for every lease).
    pub probe: &'a dyn OwnerProbe,
}

/// Claims of one job's windows that nobody has claimed yet, made in one
/// transaction: a daemon working through a job's backlog claims the
/// windows it will start next in one statement instead of one each (see
/// [`super::ClaimStore::claim_fresh`]).
pub struct FreshClaims<'a> {
    /// The job all the windows are of.
    pub job: &'a JobName,
    /// The windows, in the order they will run; at most
    /// [`FreshClaims::MOST`] are claimed.
    pub windows: &'a [Window],
    /// The claiming process.
    pub owner: &'a str,
    /// `sha256:<hex>` of the component that will run.
    pub component: &'a str,
    /// The host's lease clock reading (SQLite measures the lease on it).
    pub now: Timestamp,
    /// How long each lease lasts if not renewed.
    pub lease: Duration,
    /// What records this process with its claims.
    pub probe: &'a dyn OwnerProbe,
}

impl FreshClaims<'_> {
    /// The most windows one batch claims: its statement's parameters stay
    /// within what both backends bind.
    pub const MOST: usize = 16;
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
    /// The job is paused (`jobhost pause`): nothing of it is claimed
    /// until it is resumed.
    Paused {
        /// The note given with the pause.
        note: String,
        /// Who paused it, and when.
        by: String,
        /// When.
        since: Timestamp,
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

/// How many attempts a window gets and how long each waits after a
/// failure: the wait doubles with each attempt, from `retry_delay` up to
/// `max_retry_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts {
    /// Attempts at a window before it is abandoned.
    pub max_attempts: u32,
    /// The wait after the first failed attempt.
    pub retry_delay: Duration,
    /// The longest wait between two attempts.
    pub max_retry_delay: Duration,
}

impl Attempts {
    /// How a failure of attempt `attempt` (from 1) ends: retried after a
    /// backoff that doubles with each attempt, or abandoned when it was the
    /// last attempt.
    pub fn after_failure(&self, attempt: u32) -> Failure {
        if attempt >= self.max_attempts {
            return Failure::Abandon;
        }
        let exp = attempt.saturating_sub(1).min(30);
        let delay = self
            .retry_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_retry_delay);
        Failure::Retry { after: delay }
    }
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
    /// The hash of the chain entry that committed it (none in a store from
    /// before the chain).
    pub entry: Option<String>,
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
    /// Why the scheduler skipped the window, when it is SKIPPED.
    pub skip_reason: Option<String>,
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
    /// The revision, from 1 (see [`Lease::revision`]).
    pub revision: u32,
    /// Why this revision was made, for a rerun.
    pub reason: Option<String>,
    /// When `jobhost prune` dropped the run's journal and delivered
    /// message bodies.
    pub pruned_at: Option<Timestamp>,
}

/// The part of a run's row that says whether its window is decided, and
/// by what: all [`crate::store::Ledger::peek_head`] reads, so that a run of
/// a window already done (most runs of a scheduled job) is answered
/// without reading the rest of the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHead {
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
    /// `sha256:<hex>` of the component of the latest attempt.
    pub component: String,
    /// Why the scheduler skipped the window, when it is SKIPPED.
    pub skip_reason: Option<String>,
}

impl RunRecord {
    /// The row's [`RunHead`].
    pub fn head(&self) -> RunHead {
        RunHead {
            window_start: self.window_start,
            window_end: self.window_end,
            timezone: self.timezone.clone(),
            state: self.state,
            fence: self.fence,
            attempt: self.attempt,
            component: self.component.clone(),
            skip_reason: self.skip_reason.clone(),
        }
    }
}

/// A bounded read of one job's rows: windows starting in `[from, until)`
/// (either end open when `None`), in one of `states` (any when empty),
/// newest window first (oldest first with `oldest_first`), at most `limit`.
/// It reads the `(job, window_start)` index, or with states the
/// `(job, state, window_start)` one, so it costs what it returns, however
/// long the job's history.
#[derive(Debug, Clone, Copy)]
pub struct RangeQuery<'a> {
    /// The job.
    pub job: &'a str,
    /// The first window start included.
    pub from: Option<Timestamp>,
    /// The first window start excluded.
    pub until: Option<Timestamp>,
    /// The states wanted (any when empty).
    pub states: &'a [RunState],
    /// Oldest window first instead of newest first.
    pub oldest_first: bool,
    /// The most rows returned.
    pub limit: usize,
}

impl RangeQuery<'_> {
    /// When states are wanted, a query of the keys of the rows wanted (a
    /// column `key`): one read per state through the `(job, state,
    /// window_start)` index, each bounded by the limit, so that a state
    /// with few rows costs what it returns however many rows the job has in
    /// others. `filter` is the job and range condition over `table`,
    /// `limit` the limit's parameter; the state names are the store's own
    /// constants, never text from outside. `None` when any state will do.
    pub(crate) fn keys_by_state(
        &self,
        table: &str,
        filter: &str,
        limit: &str,
        collate: &str,
    ) -> Option<String> {
        if self.states.is_empty() {
            return None;
        }
        let order = self.order();
        let reads: Vec<String> = self
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "SELECT key FROM (SELECT key FROM {table} WHERE {filter} AND state = '{}' \
                     ORDER BY window_start {order}, key{collate} LIMIT {limit}) AS s{i}",
                    s.as_str()
                )
            })
            .collect();
        Some(reads.join(" UNION ALL "))
    }

    /// The `ORDER BY` of the read.
    pub(crate) fn order(&self) -> &'static str {
        if self.oldest_first { "ASC" } else { "DESC" }
    }
}

/// A job paused by a person, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    /// The job.
    pub job: String,
    /// The note given.
    pub note: String,
    /// Who paused it (user and host).
    pub by: String,
    /// When.
    pub since: Timestamp,
}

/// One thing a person did to the store on purpose (forget, rerun, retry,
/// pause, resume, prune), as kept for `history --all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    /// When.
    pub at: Timestamp,
    /// The job.
    pub job: String,
    /// The window key, when the action was on one window.
    pub key: Option<String>,
    /// What was done.
    pub action: AuditAction,
    /// The window's state before, when it had one.
    pub old_state: Option<String>,
    /// The reason or note the person gave.
    pub reason: String,
    /// What else is worth knowing (the old error, what was not delivered).
    pub detail: Option<String>,
    /// Who (user and host).
    pub by: String,
}

/// A person's action, as [`AuditLine`] records it.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// Who (user and host).
    pub by: &'a str,
    /// Why.
    pub reason: &'a str,
}

/// One message of a run, with what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRecord {
    /// Position in the run, from 1.
    pub seq: u32,
    /// The destination name.
    pub destination: String,
    /// Its idempotency key.
    pub idempotency_key: String,
    /// Its content type.
    pub content_type: String,
    /// Its size in bytes (0 once pruned).
    pub bytes: u64,
    /// What became of it.
    pub state: MessageState,
    /// Sends recorded.
    pub attempts: u32,
    /// The last send's status (`http 201`, an error).
    pub last_status: Option<String>,
    /// A send began and its outcome was never recorded.
    pub in_flight: bool,
}

/// An earlier revision of a window, archived when the next was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// The revision, from 1.
    pub revision: u32,
    /// Its final state.
    pub state: RunState,
    /// Its last fence.
    pub fence: Fence,
    /// Attempts it took.
    pub attempt: u32,
    /// Its last owner.
    pub owner: String,
    /// `sha256:<hex>` of its component.
    pub component: String,
    /// Its committed report, if any.
    pub report: Option<StoredReport>,
    /// Its last error.
    pub error: Option<String>,
    /// Why it was made (for a rerun).
    pub reason: Option<String>,
    /// Size of its stored journal.
    pub journal_bytes: Option<u64>,
    /// When it was claimed first.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it was pruned.
    pub pruned_at: Option<Timestamp>,
    /// Its messages.
    pub messages: Vec<MessageRecord>,
}

/// What an earlier revision left to replay: its journal (unless pruned)
/// and its staged messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archived {
    /// The stored journal, `None` once pruned.
    pub journal: Option<Vec<u8>>,
    /// The messages it staged, in order.
    pub messages: Vec<StagedMessage>,
}

/// An upstream window a run used (`[[needs]]`), as its run records it
/// with its report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamUse {
    /// The upstream window's key.
    pub key: String,
    /// Its revision, DONE, when the run read it.
    pub revision: u32,
    /// `sha256:<hex>` of its report as the run read it.
    pub report_digest: String,
}

/// What a run read besides its report, recorded with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunInputs {
    /// The upstream windows it used (`[[needs]]`).
    pub uses: Vec<UpstreamUse>,
    /// What it read from its source: the rows' fingerprint and the
    /// query's digest, as `jobhost check` compares them.
    pub fingerprint: Option<String>,
}

/// A DONE window's record of what it read from its source, for `jobhost
/// check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputsRecord {
    /// The window.
    pub key: WindowKey,
    /// Its current revision.
    pub revision: u32,
    /// Its bounds.
    pub window_start: Timestamp,
    /// Its bounds.
    pub window_end: Timestamp,
    /// The fingerprint recorded with its report (`None`: a run before
    /// fingerprints, or with no source).
    pub fingerprint: Option<String>,
    /// Whether its journal was pruned.
    pub pruned: bool,
}

/// A candidate component's run beside a window's live run (`[shadow]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowRun {
    /// The window.
    pub key: WindowKey,
    /// The live run's revision.
    pub revision: u32,
    /// `sha256:<hex>` of the candidate.
    pub component: String,
    /// `agreed`, `differed` or `failed`.
    pub verdict: String,
    /// Its report (`None` when it failed, or once pruned).
    pub report: Option<String>,
    /// Its messages as JSON (`None` when it failed, or once pruned).
    pub messages: Option<String>,
    /// What differs from the live run, as `replay` says it.
    pub differences: Vec<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it ran.
    pub at: Timestamp,
}

/// A mark on a DONE window whose answer may be wrong now: an upstream
/// window it used got a new revision. It goes when the window gets one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleMark {
    /// The window.
    pub key: WindowKey,
    /// Its job.
    pub job: String,
    /// Its revision that was found stale.
    pub revision: u32,
    /// The upstream window the cause is about.
    pub about: String,
    /// Why, in words.
    pub cause: String,
    /// When it was marked.
    pub since: Timestamp,
}

/// What `forget` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forgotten {
    /// The state the window was in.
    pub old_state: RunState,
    /// Messages of a forced PREPARED run that will now never be delivered.
    pub undelivered: u32,
    /// Where the job's `decided_until` moved back to, if it did.
    pub decided_until: Option<Timestamp>,
    /// Whether the run's report was archived as a revision (the next run
    /// of the window is then a new revision, with new idempotency keys).
    pub archived: bool,
}

/// What `prune` freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Runs (and archived revisions) it pruned.
    pub runs: u64,
    /// Bytes of journals dropped.
    pub journal_bytes: u64,
    /// Bytes of delivered message bodies dropped.
    pub body_bytes: u64,
}

impl Pruned {
    /// Adds what another batch freed.
    pub fn add(&mut self, other: Pruned) {
        self.runs += other.runs;
        self.journal_bytes += other.journal_bytes;
        self.body_bytes += other.body_bytes;
    }
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

/// A window a scheduler decided not to run, and why.
#[derive(Debug, Clone, Copy)]
pub struct Skip<'a> {
    /// The window.
    pub window: &'a Window,
    /// Why, for a person: the catch-up policy that skipped it.
    pub reason: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempts(max: u32, first: u64, longest: u64) -> Attempts {
        Attempts {
            max_attempts: max,
            retry_delay: Duration::from_secs(first),
            max_retry_delay: Duration::from_secs(longest),
        }
    }

    fn wait(a: &Attempts, attempt: u32) -> Option<u64> {
        match a.after_failure(attempt) {
            Failure::Retry { after } => Some(after.as_secs()),
            Failure::Abandon => None,
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }

    #[test]
    fn the_wait_doubles_from_the_first_delay_up_to_the_longest() {
        let a = attempts(8, 60, 600);
        let waits: Vec<_> = (1..=8).map(|n| wait(&a, n)).collect();
        assert_eq!(
            waits,
            [
                Some(60),
                Some(120),
                Some(240),
                Some(480),
                Some(600),
                Some(600),
                Some(600),
                None
            ]
        );
    }

    #[test]
    fn the_last_attempt_abandons_and_one_attempt_means_no_retry() {
        assert_eq!(attempts(3, 1, 10).after_failure(3), Failure::Abandon);
        // An attempt past the limit abandons too.
        assert_eq!(attempts(3, 1, 10).after_failure(4), Failure::Abandon);
        assert_eq!(attempts(1, 1, 10).after_failure(1), Failure::Abandon);
    }

    #[test]
    fn huge_attempt_counts_and_delays_saturate_instead_of_overflowing() {
        let a = Attempts {
            max_attempts: u32::MAX,
            retry_delay: Duration::MAX,
            max_retry_delay: Duration::MAX,
        };
        assert_eq!(
            a.after_failure(u32::MAX - 1),
            Failure::Retry {
                after: Duration::MAX
            }
        );
        let b = attempts(u32::MAX, 1, u64::MAX);
        // 2^30 s at most: the exponent stops at 30.
        assert_eq!(wait(&b, 1_000_000), Some(1 << 30));
    }
}
