//! The store's vocabulary: fences, run states, leases, what a claim asks
//! and answers, how an attempt fails, and the rows a run leaves (its
//! messages, report and record).

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;

use crate::core::window::{Window, WindowKey};

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

/// A window a scheduler decided not to run, and why.
#[derive(Debug, Clone, Copy)]
pub struct Skip<'a> {
    /// The window.
    pub window: &'a Window,
    /// Why, for a person: the catch-up policy that skipped it.
    pub reason: &'a str,
}
