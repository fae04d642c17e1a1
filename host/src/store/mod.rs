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

pub mod chain;
mod contract;
mod decide;
pub mod durable;
pub mod location;
pub mod notices;
pub mod postgres;
mod scripts;
mod sql;
pub mod sqlite;
mod types;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use crate::core::error::Result;
use crate::core::failpoint::Failpoints;

pub use contract::{ClaimStore, Ledger, Store};
pub use decide::{
    Decision, Existing, Transition, decide, decided, fenced, forget_detail, lease_lost, may_forget,
    no_such_run, undelivered, window_mismatch,
};
pub use location::{PostgresUrl, StoreLocation};
pub use notices::{Incident, NewNotification, Notices, Notification, Sent};
pub use postgres::PostgresStore;
pub use scripts::SqlStore;
pub use sqlite::SqliteStore;
pub use types::{
    Actor, Archived, Attempted, Attempts, AuditAction, AuditLine, Claim, ClaimRequest, DigestNote,
    DigestRecord, Failure, Fence, Forgotten, FreshClaims, Held, InputsRecord, Lease, LeasesOnly,
    LocalProcesses, MessageRecord, MessageState, OwnerProbe, Pause, PendingMessage, Pruned,
    Purpose, RangeQuery, Revision, RunHead, RunInputs, RunRecord, RunState, ShadowRun, Skip,
    StagedMessage, StaleMark, StoredReport, TakenFrom, Takeover, UpstreamUse, message_prefix,
};

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
pub fn open(location: &StoreLocation) -> Result<Box<dyn Store>> {
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
) -> Result<Box<dyn Store>> {
    Ok(match location {
        StoreLocation::Sqlite(path) => {
            Box::new(SqliteStore::open(path)?.with_failpoints(failpoints))
        }
        StoreLocation::Postgres(url) => {
            Box::new(PostgresStore::open(url)?.with_failpoints(failpoints))
        }
    })
}

/// Closes the SQLite connections this process kept for its next open of a
/// store (see `sqlite::Kept`): each file's WAL is checkpointed into it, so
/// a store is one file again when a command is done.
pub fn close_idle() {
    sqlite::close_idle();
}

/// Opens an existing store for reading: nothing is created or migrated.
///
/// # Errors
///
/// `Error::Input` when there is no jobhost store there; `Error::Store` when
/// it cannot be reached.
pub fn open_read_only(location: &StoreLocation) -> Result<Box<dyn Store>> {
    Ok(match location {
        StoreLocation::Sqlite(path) => Box::new(SqliteStore::open_read_only(path)?),
        StoreLocation::Postgres(url) => Box::new(PostgresStore::open_read_only(url)?),
    })
}

/// Opens an existing store for reading, or `None` when there is none yet
/// (no file, or no jobhost tables in the database).
///
/// # Errors
///
/// As [`open_read_only`], but for a missing store.
pub fn open_if_exists(location: &StoreLocation) -> Result<Option<Box<dyn Store>>> {
    Ok(match location {
        StoreLocation::Sqlite(path) if !path.exists() => None,
        StoreLocation::Sqlite(path) => Some(Box::new(SqliteStore::open_read_only(path)?)),
        StoreLocation::Postgres(url) => {
            PostgresStore::open_if_exists(url)?.map(|s| Box::new(s) as Box<dyn Store>)
        }
    })
}
