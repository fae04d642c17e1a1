//! The PostgreSQL claim store, for fleets: any number of hosts share one
//! database, and the claim outlives every one of them. It keeps the same
//! contract as the SQLite store, with two differences that are the point of
//! it:
//!
//! - Leases and retry times are measured on the database's clock (`now()`),
//!   never on a host's, so two hosts whose clocks disagree by minutes still
//!   agree on whether a lease is live. The `now` arguments of the contract
//!   are ignored here.
//! - Claims are plain rows: `INSERT ... ON CONFLICT DO NOTHING`, then the
//!   existing row read `FOR UPDATE` and every later write fenced by
//!   `WHERE key = $1 AND fence = $2`. No session state is kept between
//!   statements (no session advisory locks, no temporary tables), so a
//!   transaction pooler in front of the database is safe.
//!
//! Tables are prefixed `jobhost_` and live in the connection's current
//! schema (choose one with `options=-csearch_path%3Dname` in the URL);
//! `pg_schema` migrates them, `pg_connect` connects, and `pg_support` holds
//! the transactions, typed parameters and errors every statement uses.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use postgres::types::Type;
use postgres::{Client, Row};

use super::pg_schema::{check_version, latest, migrate, schema_version};
use super::pg_support::{Limits, Param, Tx, boolean, bytea, float8, int8, lock_timed_out, text};

use super::{
    Actor, Archived, Attempted, AuditLine, Claim, ClaimRequest, ClaimStore, Decision, DigestNote,
    DigestRecord, Existing, Failure, Fence, Forgotten, Lease, Ledger, MessageRecord, Pause,
    PendingMessage, PostgresUrl, Pruned, RangeQuery, Revision, RunRecord, RunState, Skip,
    StagedMessage, StoredReport, decide, decided, fenced, lease_lost, undelivered,
};
use crate::core::error::{Error, Result};
use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::window::{JobName, WindowKey};

/// Microseconds since the epoch of a `timestamptz` expression, exactly.
macro_rules! us {
    ($col:literal) => {
        concat!("(extract(epoch FROM ", $col, ") * 1000000)::int8")
    };
}

/// A claim store in a PostgreSQL database.
pub struct PostgresStore {
    client: Client,
    url: PostgresUrl,
    /// Whether opening it created jobhost's tables.
    created: bool,
    /// The schema version: the latest, or the one before when opened read
    /// only (see [`PostgresStore::open_read_only`]).
    version: i64,
    /// Test hooks inside the commit of a report.
    failpoints: Option<Arc<dyn Failpoints>>,
}

/// Every write transaction but a claim's: it waits [`super::WRITE_WAIT`]
/// for a row another session holds, then fails (retryable).
const WRITE: Limits = Limits {
    lock_wait: super::WRITE_WAIT,
    statement: Some(super::STATEMENT_TIMEOUT),
};

/// A read: it waits as long as a write for what another session holds.
const READ: Limits = WRITE;

/// A claim's transaction: it waits [`super::CLAIM_WAIT`] for the window's
/// row, then answers [`Claim::Locked`].
const CLAIM: Limits = Limits {
    lock_wait: super::CLAIM_WAIT,
    statement: Some(super::STATEMENT_TIMEOUT),
};

impl PostgresStore {
    /// Connects to the database at `url` and migrates its jobhost tables.
    ///
    /// # Errors
    ///
    /// `Error::Input` for a malformed URL or a database that holds tables of
    /// a newer jobhost; `Error::Store` when the database cannot be reached,
    /// refuses the login, or fails a statement.
    pub fn open(url: &PostgresUrl) -> Result<PostgresStore> {
        let mut store = PostgresStore::connect(url)?;
        store.created = match schema_version(&mut store.client, url)? {
            Some(v) if v == latest() => false,
            _ => migrate(&mut store.client, url)?,
        };
        Ok(store)
    }

    /// Connects without creating or migrating anything.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the database holds no jobhost store of this
    /// version; otherwise as [`PostgresStore::open`].
    pub fn open_read_only(url: &PostgresUrl) -> Result<PostgresStore> {
        PostgresStore::open_if_exists(url)?.ok_or_else(|| {
            Error::input(format!(
                "no jobhost store in `{url}`; run a job with it first, or check the database \
                 and search_path in the URL"
            ))
        })
    }

    /// [`PostgresStore::open_read_only`], or `None` when the database holds
    /// no jobhost tables yet.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::open_read_only`], but for a missing store.
    pub fn open_if_exists(url: &PostgresUrl) -> Result<Option<PostgresStore>> {
        let mut store = PostgresStore::connect(url)?;
        match schema_version(&mut store.client, url)? {
            None => Ok(None),
            Some(v) if v == latest() => Ok(Some(store)),
            // An older version is read as it is, what it lacks read as
            // empty: a monitor keeps working between a deploy and the first
            // run that migrates.
            Some(v) if (READABLE..latest()).contains(&v) => {
                store.version = v;
                Ok(Some(store))
            }
            Some(v) => {
                check_version(url, v)?;
                Err(Error::input(format!(
                    "store `{url}` has schema version {v}, older than this jobhost reads without \
                     upgrading it ({READABLE}); run `jobhost run` with it once to upgrade it"
                )))
            }
        }
    }

    fn connect(url: &PostgresUrl) -> Result<PostgresStore> {
        Ok(PostgresStore {
            client: super::pg_connect::connect(url)?,
            url: url.clone(),
            created: false,
            version: latest(),
            failpoints: None,
        })
    }

    /// The store's URL, as it may be shown.
    pub fn url(&self) -> &PostgresUrl {
        &self.url
    }

    /// Stops at [`Boundary::InPrepare`] inside the commit of every report
    /// (tests only).
    pub fn with_failpoints(mut self, failpoints: Option<Arc<dyn Failpoints>>) -> Self {
        self.failpoints = failpoints;
        self
    }

    /// The runs matching `condition` (over `jobhost_runs r`), newest
    /// window first.
    fn runs_where(&mut self, condition: &str, params: &[Param<'_>]) -> Result<Vec<RunRecord>> {
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE {condition}
             ORDER BY r.window_start DESC, r.key COLLATE \"C\"",
            self.run_columns()
        );
        let rows = self.read("read history", |tx| tx.query_typed(&sql, params))?;
        rows.iter().map(run_record).collect()
    }

    /// The columns [`run_record`] reads, for this store's schema.
    fn run_columns(&self) -> &'static str {
        if self.current() {
            RUN_COLUMNS
        } else {
            RUN_COLUMNS_PREVIOUS
        }
    }

    /// Whether the store has the tables of [`OPERATOR_SCHEMA`].
    fn current(&self) -> bool {
        self.version >= OPERATOR_SCHEMA
    }

    fn begin(&mut self, what: &str) -> Result<Tx<'_>> {
        Tx::begin(&mut self.client, &self.url, what, WRITE)
    }

    /// A read in a transaction of its own, so that it too waits a bounded
    /// time (a table another session holds for a migration or for
    /// maintenance, a server too busy to answer).
    fn read<T>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Tx<'_>) -> std::result::Result<T, postgres::Error>,
    ) -> Result<T> {
        let mut tx = Tx::begin(&mut self.client, &self.url, what, READ)?;
        let value = f(&mut tx).map_err(|e| tx.err(what, &e))?;
        tx.commit_named(what)?;
        Ok(value)
    }

    /// One write statement in a transaction of its own, so that it too is
    /// bounded in time; the rows it changed.
    fn write_one(&mut self, what: &str, sql: &str, params: &[Param<'_>]) -> Result<u64> {
        let mut tx = self.begin(what)?;
        let changed = tx
            .execute_typed(sql, params)
            .map_err(|e| tx.err(what, &e))?;
        tx.commit_named(what)?;
        Ok(changed)
    }
}

fn instant(us: i64) -> Result<Timestamp> {
    Timestamp::from_microsecond(us).map_err(|e| {
        Error::Store(format!(
            "the store holds an impossible instant ({us} µs): {e}"
        ))
    })
}

fn count(v: i64, what: &str) -> Result<u32> {
    u32::try_from(v)
        .map_err(|_| Error::Store(format!("the store holds an impossible {what} ({v})")))
}

fn state(s: &str) -> Result<RunState> {
    RunState::parse(s)
        .ok_or_else(|| Error::Store(format!("the store holds an unknown run state `{s}`")))
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn unix_seconds(ts: Timestamp) -> f64 {
    ts.as_second() as f64 + f64::from(ts.subsec_microsecond()) / 1e6
}

macro_rules! run_columns {
    ($($rest:tt)*) => {
        concat!(
    "r.key, r.job, ",
    us!("r.window_start"),
    ", ",
    us!("r.window_end"),
    ", r.timezone, r.state, r.fence, r.attempt, r.owner, ",
    us!("r.lease_expires_at"),
    ", r.component, r.report, r.report_cursor, r.error, ",
    us!("r.created_at"),
    ", ",
    us!("r.updated_at"),
    ", ",
    us!("r.retry_at"),
    ", octet_length(r.journal)::int8, ",
    "(SELECT count(*) FROM jobhost_outbox o WHERE o.key = r.key), ",
    "(SELECT count(*) FROM jobhost_outbox o WHERE o.key = r.key AND o.state = 'DELIVERED'), ",
    "r.digest_prompt, d.key IS NOT NULL, d.cache_key, d.model, d.error, ",
    us!("d.sent_at"),
    ", ",
    us!("d.updated_at"),
    ", r.described, ",
    $($rest)*
        )
    };
}

/// What [`run_record`] reads, over [`RUN_TABLES`].
const RUN_COLUMNS: &str = run_columns!(concat!("r.revision, r.reason, ", us!("r.pruned_at")));

/// [`RUN_COLUMNS`] of a store of the previous schema, which has no
/// revisions and was never pruned.
const RUN_COLUMNS_PREVIOUS: &str = run_columns!("1::int8, NULL::text, NULL::int8");

/// The schema whose tables and columns the latest reads and writes: v4.
/// Later ones add only ways to read it faster.
const OPERATOR_SCHEMA: i64 = 4;

/// The oldest schema read-only commands still read, treating what it lacks
/// as empty: the one before [`OPERATOR_SCHEMA`].
const READABLE: i64 = OPERATOR_SCHEMA - 1;

/// The first schema with the `jobhost_runs_by_state` index.
const STATE_INDEX_SCHEMA: i64 = 5;

/// `(state, count)` rows, as [`Ledger::state_counts`] returns them.
fn state_rows(rows: &[postgres::Row]) -> Vec<(RunState, u64)> {
    rows.iter()
        .filter_map(|r| {
            let state: String = r.get(0);
            let n: i64 = r.get(1);
            Some((RunState::parse(&state)?, u64::try_from(n).unwrap_or(0)))
        })
        .collect()
}

/// The tables [`RUN_COLUMNS`] reads.
const RUN_TABLES: &str = "jobhost_runs r LEFT JOIN jobhost_digests d ON d.key = r.key";

fn run_record(r: &Row) -> Result<RunRecord> {
    let report: Option<String> = r.get(11);
    Ok(RunRecord {
        key: WindowKey::from_stored(r.get(0)),
        job: r.get(1),
        window_start: instant(r.get(2))?,
        window_end: instant(r.get(3))?,
        timezone: r.get(4),
        state: state(r.get(5))?,
        fence: Fence(r.get(6)),
        attempt: count(r.get(7), "attempt")?,
        owner: r.get(8),
        lease_until: instant(r.get(9))?,
        component: r.get(10),
        report: report.map(|summary| StoredReport {
            summary,
            cursor: r.get(12),
            prompt: r.get(20),
            described: r.get(27),
        }),
        error: r.get(13),
        created_at: instant(r.get(14))?,
        updated_at: instant(r.get(15))?,
        retry_at: r.get::<_, Option<i64>>(16).map(instant).transpose()?,
        journal_bytes: r.get::<_, Option<i64>>(17).map(i64::unsigned_abs),
        messages: count(r.get(18), "message count")?,
        delivered: count(r.get(19), "message count")?,
        digest: if r.get::<_, bool>(21) {
            Some(DigestRecord {
                cache_key: r.get(22),
                model: r.get(23),
                error: r.get(24),
                sent_at: r.get::<_, Option<i64>>(25).map(instant).transpose()?,
                updated_at: instant(r.get(26))?,
            })
        } else {
            None
        },
        revision: count(r.get(28), "revision")?,
        reason: r.get(29),
        pruned_at: r.get::<_, Option<i64>>(30).map(instant).transpose()?,
    })
}

/// Inside a transaction: confirms the run is still ours and delivering.
fn still_delivering(tx: &mut Tx<'_>, lease: &Lease) -> Result<()> {
    let owned = tx
        .execute_typed(
            "UPDATE jobhost_runs SET updated_at = now()
             WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
            &[text(&lease.key.as_str()), int8(&lease.fence.0)],
        )
        .map_err(|e| tx.err("check the claim", &e))?;
    fenced(owned, lease)
}

fn record_delivery(tx: &mut Tx<'_>, lease: &Lease, done: &Attempted<'_>) -> Result<()> {
    still_delivering(tx, lease)?;
    tx.execute_typed(
        "UPDATE jobhost_outbox SET state = 'DELIVERED', in_flight = false,
            attempts = attempts + $3, last_status = $4, updated_at = now()
         WHERE key = $1 AND seq = $2",
        &[
            text(&lease.key.as_str()),
            int8(&i64::from(done.seq)),
            int8(&i64::from(done.tries)),
            text(&done.status),
        ],
    )
    .map_err(|e| tx.err("record a delivery", &e))?;
    Ok(())
}

/// Why a claim could not read the window's row.
enum Unread {
    /// Another session held it past the claim's lock wait.
    Locked,
    /// Anything else.
    Failed(Error),
}

impl From<Error> for Unread {
    fn from(e: Error) -> Unread {
        Unread::Failed(e)
    }
}

/// The window's row, read and locked (`FOR UPDATE`) for the claim.
fn read_existing(
    tx: &mut Tx<'_>,
    key: &WindowKey,
) -> std::result::Result<Option<Existing>, Unread> {
    let row = tx
        .query_typed_opt(
            concat!(
                "SELECT state, fence, attempt, owner, ",
                us!("lease_expires_at"),
                ", lease_expires_at > now(), error, retryable, ",
                us!("retry_at"),
                ", coalesce(retry_at > now(), false), ",
                us!("window_start"),
                ", ",
                us!("window_end"),
                ", timezone, revision, report IS NOT NULL, owner_process FROM jobhost_runs \
                 WHERE key = $1 FOR UPDATE"
            ),
            &[text(&key.as_str())],
        )
        .map_err(|e| {
            if lock_timed_out(&e) {
                Unread::Locked
            } else {
                Unread::Failed(tx.err("read the claim", &e))
            }
        })?;
    let Some(r) = row else { return Ok(None) };
    let retry_at: Option<i64> = r.get(8);
    let waiting: bool = r.get(9);
    Ok(Some(Existing {
        state: state(r.get(0))?,
        fence: r.get(1),
        attempt: count(r.get(2), "attempt")?,
        owner: r.get(3),
        owner_process: r.get(15),
        lease_until: instant(r.get(4))?,
        lease_live: r.get(5),
        error: r.get(6),
        retryable: r.get(7),
        retry_pending: match retry_at {
            Some(us) if waiting => Some(instant(us)?),
            _ => None,
        },
        bounds: (instant(r.get(10))?, instant(r.get(11))?, r.get(12)),
        revision: count(r.get(13), "revision")?,
        has_report: r.get(14),
    }))
}

/// Starts a new series of attempts at a FAILED or ABANDONED window (see
/// [`Decision::Restart`]), keeping its old error in an audit line.
fn restart(
    tx: &mut Tx<'_>,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    existing: &Existing,
    process: Option<&str>,
) -> Result<()> {
    audit(
        tx,
        &AuditRow {
            job: req.window.job.as_str(),
            key: Some(key.as_str()),
            action: "retry",
            old_state: Some(existing.state.as_str()),
            reason: req.purpose.reason().unwrap_or(""),
            detail: existing.error.as_deref(),
            actor: req.purpose.by().unwrap_or(req.owner),
        },
    )?;
    tx.execute_typed(
        "UPDATE jobhost_runs SET state = CASE WHEN report IS NULL THEN 'CLAIMED' ELSE 'PREPARED' END,
            fence = $3, owner = $4, lease_expires_at = now() + make_interval(secs => $5),
            attempt = 1, component = CASE WHEN report IS NULL THEN $6 ELSE component END,
            error = NULL, retryable = false, retry_at = NULL, updated_at = now(),
            owner_process = $7
         WHERE key = $1 AND fence = $2",
        &[
            text(&key.as_str()),
            int8(&existing.fence),
            int8(&(existing.fence + 1)),
            text(&req.owner),
            float8(&seconds(req.lease)),
            text(&req.component),
            text(&process),
        ],
    )
    .map_err(|e| tx.err("restart the window", &e))?;
    // Its undelivered messages are sent again, with their keys; one whose
    // at-most-once send may have arrived keeps its in-flight mark, so the
    // delivery abandons it again rather than risk a second copy.
    tx.execute_typed(
        "UPDATE jobhost_outbox SET state = 'PENDING', updated_at = now()
         WHERE key = $1 AND state <> 'DELIVERED'",
        &[text(&key.as_str())],
    )
    .map_err(|e| tx.err("restart the window's messages", &e))?;
    Ok(())
}

/// Archives a DONE window's row and messages as a revision and claims its
/// next revision afresh (see [`Decision::Rerun`]).
fn rerun(
    tx: &mut Tx<'_>,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    existing: &Existing,
    process: Option<&str>,
) -> Result<()> {
    let reason = req.purpose.reason().unwrap_or("");
    archive(tx, key)?;
    audit(
        tx,
        &AuditRow {
            job: req.window.job.as_str(),
            key: Some(key.as_str()),
            action: "rerun",
            old_state: Some(existing.state.as_str()),
            reason,
            detail: Some(&format!(
                "revision {} archived; revision {} claimed",
                existing.revision,
                existing.revision + 1
            )),
            actor: req.purpose.by().unwrap_or(req.owner),
        },
    )?;
    tx.execute_typed(
        "UPDATE jobhost_runs SET state = 'CLAIMED', revision = revision + 1, reason = $3,
            fence = $4, owner = $5, lease_expires_at = now() + make_interval(secs => $6),
            attempt = 1, component = $7, report = NULL, report_cursor = NULL, journal = NULL,
            error = NULL, retryable = false, retry_at = NULL, digest_prompt = NULL,
            described = false, pruned_at = NULL, created_at = now(), updated_at = now(),
            owner_process = $8
         WHERE key = $1 AND fence = $2",
        &[
            text(&key.as_str()),
            int8(&existing.fence),
            text(&reason),
            int8(&(existing.fence + 1)),
            text(&req.owner),
            float8(&seconds(req.lease)),
            text(&req.component),
            text(&process),
        ],
    )
    .map_err(|e| tx.err("claim the next revision", &e))?;
    Ok(())
}

/// Copies the window's row and messages into the revision tables and
/// removes its messages and digest note, inside a write transaction.
fn archive(tx: &mut Tx<'_>, key: &WindowKey) -> Result<()> {
    let k = key.as_str();
    for sql in [
        "INSERT INTO jobhost_revisions (key, revision, job, window_end, state, fence, attempt,
            owner, component, report, report_cursor, journal, error, reason, digest_prompt,
            described, created_at, updated_at, pruned_at)
         SELECT key, revision, job, window_end, state, fence, attempt, owner, component, report,
            report_cursor, journal, error, reason, digest_prompt, described, created_at,
            updated_at, pruned_at
         FROM jobhost_runs WHERE key = $1",
        "INSERT INTO jobhost_revision_messages (key, revision, seq, destination,
            idempotency_key, content_type, body, state, attempts, in_flight, last_status,
            updated_at)
         SELECT o.key, r.revision, o.seq, o.destination, o.idempotency_key, o.content_type,
            o.body, o.state, o.attempts, o.in_flight, o.last_status, o.updated_at
         FROM jobhost_outbox o JOIN jobhost_runs r ON r.key = o.key WHERE o.key = $1",
        "DELETE FROM jobhost_outbox WHERE key = $1",
        "DELETE FROM jobhost_digests WHERE key = $1",
    ] {
        tx.execute_typed(sql, &[text(&k)])
            .map_err(|e| tx.err("archive the revision", &e))?;
    }
    Ok(())
}

/// One audit line to write (at the database's `now()`).
struct AuditRow<'a> {
    job: &'a str,
    key: Option<&'a str>,
    action: &'a str,
    old_state: Option<&'a str>,
    reason: &'a str,
    detail: Option<&'a str>,
    actor: &'a str,
}

fn audit(tx: &mut Tx<'_>, row: &AuditRow<'_>) -> Result<()> {
    tx.execute_typed(
        "INSERT INTO jobhost_audit (at, job, key, action, old_state, reason, detail, actor)
         VALUES (now(), $1, $2, $3, $4, $5, $6, $7)",
        &[
            text(&row.job),
            text(&row.key),
            text(&row.action),
            text(&row.old_state),
            text(&row.reason),
            text(&row.detail),
            text(&row.actor),
        ],
    )
    .map_err(|e| tx.err("write the audit line", &e))?;
    Ok(())
}

/// One batch of `prune` over DONE runs: `$1` the bound (Unix seconds), `$2`
/// the job or NULL, `$3` keep journals; answers runs, journal bytes and
/// body bytes freed.
const PRUNE_RUNS: &str = "WITH picked AS (
                    SELECT key, octet_length(journal) AS journal_bytes FROM jobhost_runs
                    WHERE state = 'DONE' AND pruned_at IS NULL
                      AND window_end <= to_timestamp($1) AND ($2::text IS NULL OR job = $2)
                    LIMIT 500 FOR UPDATE),
                 bodies AS (
                    UPDATE jobhost_outbox o SET body = ''::bytea
                    FROM picked p WHERE o.key = p.key AND o.state = 'DELIVERED'
                    RETURNING octet_length(
                        (SELECT body FROM jobhost_outbox x WHERE x.key = o.key AND x.seq = o.seq))
                        AS freed),
                 rows AS (
                    UPDATE jobhost_runs r SET pruned_at = now(),
                        journal = CASE WHEN $3 THEN r.journal ELSE NULL END
                    FROM picked p WHERE r.key = p.key
                    RETURNING p.journal_bytes)
                 SELECT (SELECT count(*) FROM rows),
                    (SELECT coalesce(sum(journal_bytes), 0)::int8 FROM rows WHERE NOT $3),
                    (SELECT coalesce(sum(freed), 0)::int8 FROM bodies)";

/// One batch of `prune` over archived revisions, as [`PRUNE_RUNS`].
const PRUNE_REVISIONS: &str = "WITH picked AS (
                    SELECT key, revision, octet_length(journal) AS journal_bytes
                    FROM jobhost_revisions
                    WHERE pruned_at IS NULL AND window_end <= to_timestamp($1)
                      AND ($2::text IS NULL OR job = $2)
                    LIMIT 500 FOR UPDATE),
                 bodies AS (
                    UPDATE jobhost_revision_messages m SET body = ''::bytea
                    FROM picked p
                    WHERE m.key = p.key AND m.revision = p.revision AND m.state = 'DELIVERED'
                    RETURNING (SELECT octet_length(x.body) FROM jobhost_revision_messages x
                               WHERE x.key = m.key AND x.revision = m.revision
                                 AND x.seq = m.seq) AS freed),
                 rows AS (
                    UPDATE jobhost_revisions v SET pruned_at = now(),
                        journal = CASE WHEN $3 THEN v.journal ELSE NULL END
                    FROM picked p WHERE v.key = p.key AND v.revision = p.revision
                    RETURNING p.journal_bytes)
                 SELECT (SELECT count(*) FROM rows),
                    (SELECT coalesce(sum(journal_bytes), 0)::int8 FROM rows WHERE NOT $3),
                    (SELECT coalesce(sum(freed), 0)::int8 FROM bodies)";

/// The columns [`message_record`] reads.
const MESSAGE_COLUMNS: &str = "seq, destination, idempotency_key, content_type, \
     octet_length(body)::int8, state, attempts, last_status, in_flight";

fn message_record(r: &Row) -> Result<MessageRecord> {
    Ok(MessageRecord {
        seq: count(r.get(0), "message number")?,
        destination: r.get(1),
        idempotency_key: r.get(2),
        content_type: r.get(3),
        bytes: r.get::<_, i64>(4).unsigned_abs(),
        state: r.get(5),
        attempts: count(r.get(6), "attempt count")?,
        last_status: r.get(7),
        in_flight: r.get(8),
    })
}

fn pause_row(r: &Row) -> Result<Pause> {
    Ok(Pause {
        job: r.get(0),
        note: r.get(1),
        by: r.get(2),
        since: instant(r.get(3))?,
    })
}

fn staged(r: &Row) -> Result<StagedMessage> {
    Ok(StagedMessage {
        seq: count(r.get(0), "message number")?,
        destination: r.get(1),
        idempotency_key: r.get(2),
        content_type: r.get(3),
        body: r.get(4),
    })
}

impl ClaimStore for PostgresStore {
    fn created(&self) -> bool {
        self.created
    }

    fn claim(&mut self, req: &ClaimRequest<'_>) -> Result<Claim> {
        let key = req.window.key();
        let lease_s = seconds(req.lease);
        let process = req.probe.record(req.owner);
        let process = process.as_deref();
        // One transaction, which waits at most CLAIM_WAIT for the window's
        // row: a session holding it longer (a host paused in the middle of
        // a transaction) makes the window busy, not this process hang.
        let mut tx = Tx::begin(&mut self.client, &self.url, "claim", CLAIM)?;
        let locked = || Claim::Locked {
            held: super::Held::Row,
            waited: super::CLAIM_WAIT,
        };
        // A paused job claims nothing, on every host sharing the store.
        let paused = tx.query_typed_opt(
            concat!(
                "SELECT note, actor, ",
                us!("since"),
                " FROM jobhost_pauses WHERE job = $1"
            ),
            &[text(&req.window.job.as_str())],
        );
        match paused {
            Err(e) if lock_timed_out(&e) => return Ok(locked()),
            Err(e) => return Err(tx.err("read the job's pause", &e)),
            Ok(Some(r)) => {
                return Ok(Claim::Paused {
                    note: r.get(0),
                    by: r.get(1),
                    since: instant(r.get(2))?,
                });
            }
            Ok(None) => {}
        }
        // The common case, a window nobody has claimed, is one statement.
        // A forgotten window goes on from its fence and revision.
        let inserted = tx.query_typed(
            "INSERT INTO jobhost_runs (key, job, window_start, window_end, timezone, state,
                fence, owner, lease_expires_at, attempt, component, created_at, updated_at,
                revision, owner_process)
             VALUES ($1, $2, to_timestamp($3), to_timestamp($4), $5, 'CLAIMED',
                coalesce((SELECT next_fence FROM jobhost_forgotten WHERE key = $1), 1), $6,
                now() + make_interval(secs => $7), 1, $8, now(), now(),
                coalesce((SELECT next_revision FROM jobhost_forgotten WHERE key = $1), 1), $9)
             ON CONFLICT (key) DO NOTHING
             RETURNING revision, fence",
            &[
                text(&key.as_str()),
                text(&req.window.job.as_str()),
                float8(&unix_seconds(req.window.start)),
                float8(&unix_seconds(req.window.end)),
                text(&req.window.zone.name()),
                text(&req.owner),
                float8(&lease_s),
                text(&req.component),
                text(&process),
            ],
        );
        match inserted {
            Err(e) if lock_timed_out(&e) => return Ok(locked()),
            Err(e) => return Err(tx.err("insert the claim", &e)),
            Ok(rows) if rows.len() == 1 => {
                let (mut revision, mut fence): (i64, i64) = (rows[0].get(0), rows[0].get(1));
                // The insert may have waited for a `forget` of this key to
                // commit, with its subqueries read before that: a statement
                // of its own sees the forgotten fence and revision.
                let caught_up = tx
                    .query_typed_opt(
                        "UPDATE jobhost_runs r SET fence = f.next_fence,
                            revision = f.next_revision
                         FROM jobhost_forgotten f
                         WHERE r.key = $1 AND f.key = $1
                           AND (f.next_fence > r.fence OR f.next_revision > r.revision)
                         RETURNING r.revision, r.fence",
                        &[text(&key.as_str())],
                    )
                    .map_err(|e| tx.err("insert the claim", &e))?;
                if let Some(r) = caught_up {
                    (revision, fence) = (r.get(0), r.get(1));
                }
                let revision = count(revision, "revision")?;
                tx.commit_named("commit the claim")?;
                return Ok(Claim::Run {
                    lease: Lease {
                        key,
                        fence: Fence(fence),
                        owner: req.owner.to_string(),
                        attempt: 1,
                        revision,
                        taken_from: None,
                    },
                    takeover: false,
                });
            }
            Ok(_) => {}
        }
        let existing = match read_existing(&mut tx, &key) {
            Err(Unread::Locked) => return Ok(locked()),
            Err(Unread::Failed(e)) => return Err(e),
            Ok(None) => {
                // Deleted since the insert found it (a person removed the
                // row to run the window again): claim it afresh.
                drop(tx);
                return self.claim(req);
            }
            Ok(Some(existing)) => existing,
        };
        let decision = decide(&existing, req)?;
        match &decision {
            Decision::Answer(_) => {}
            Decision::Abandon(why) => {
                tx.execute_typed(
                    "UPDATE jobhost_runs SET state = 'ABANDONED', error = $3, updated_at = now()
                     WHERE key = $1 AND fence = $2",
                    &[text(&key.as_str()), int8(&existing.fence), text(why)],
                )
                .map_err(|e| tx.err("abandon the claim", &e))?;
            }
            Decision::TakeOver { .. } => {
                tx.execute_typed(
                    "UPDATE jobhost_runs SET
                        state = CASE state WHEN 'PREPARED' THEN 'PREPARED' ELSE 'CLAIMED' END,
                        fence = $3, owner = $4, lease_expires_at = now() + make_interval(secs => $5),
                        attempt = $6,
                        component = CASE state WHEN 'PREPARED' THEN component ELSE $7 END,
                        error = CASE state WHEN 'SKIPPED' THEN NULL ELSE error END,
                        retry_at = NULL, updated_at = now(), owner_process = $8
                     WHERE key = $1 AND fence = $2",
                    &[text(&key.as_str()), int8(&existing.fence), int8(&(existing.fence + 1)), text(&req.owner), float8(&lease_s), int8(&i64::from(existing.attempt + 1)), text(&req.component), text(&process)],
                )
                .map_err(|e| tx.err("take over the claim", &e))?;
            }
            Decision::Restart { .. } => restart(&mut tx, &key, req, &existing, process)?,
            Decision::Rerun => rerun(&mut tx, &key, req, &existing, process)?,
        }
        tx.commit_named("commit the claim")?;
        Ok(decided(decision, req, &existing))
    }

    fn prepare(
        &mut self,
        lease: &Lease,
        report: &StoredReport,
        messages: &[StagedMessage],
        journal: &[u8],
        _now: Timestamp,
    ) -> Result<()> {
        let failpoints = self.failpoints.clone();
        let mut tx = self.begin("commit the report")?;
        let changed = tx
            .execute_typed(
                "UPDATE jobhost_runs SET state = 'PREPARED', report = $3, report_cursor = $4,
                    journal = $5, digest_prompt = $6, described = $7, error = NULL,
                    updated_at = now()
                 WHERE key = $1 AND fence = $2 AND state = 'CLAIMED'",
                &[
                    text(&lease.key.as_str()),
                    int8(&lease.fence.0),
                    text(&report.summary),
                    text(&report.cursor),
                    bytea(&journal),
                    text(&report.prompt),
                    boolean(&report.described),
                ],
            )
            .map_err(|e| tx.err("commit the report", &e))?;
        fenced(changed, lease)?;
        if !messages.is_empty() {
            // All of a run's messages in one statement (one round trip).
            let seqs: Vec<i64> = messages.iter().map(|m| i64::from(m.seq)).collect();
            let dests: Vec<&str> = messages.iter().map(|m| m.destination.as_str()).collect();
            let keys: Vec<&str> = messages
                .iter()
                .map(|m| m.idempotency_key.as_str())
                .collect();
            let types: Vec<&str> = messages.iter().map(|m| m.content_type.as_str()).collect();
            let bodies: Vec<&[u8]> = messages.iter().map(|m| m.body.as_slice()).collect();
            tx.execute_typed(
                "INSERT INTO jobhost_outbox (key, seq, destination, idempotency_key,
                    content_type, body, state, updated_at)
                 SELECT $1, m.seq, m.destination, m.idempotency_key, m.content_type, m.body,
                    'PENDING', now()
                 FROM unnest($2, $3, $4, $5, $6)
                    AS m (seq, destination, idempotency_key, content_type, body)",
                &[
                    text(&lease.key.as_str()),
                    (&seqs, Type::INT8_ARRAY),
                    (&dests, Type::TEXT_ARRAY),
                    (&keys, Type::TEXT_ARRAY),
                    (&types, Type::TEXT_ARRAY),
                    (&bodies, Type::BYTEA_ARRAY),
                ],
            )
            .map_err(|e| tx.err("stage messages", &e))?;
        }
        if let Some(f) = &failpoints {
            f.reached(Boundary::InPrepare);
        }
        tx.commit_named("commit the report")
    }

    fn pending_messages(&mut self, key: &WindowKey) -> Result<Vec<PendingMessage>> {
        let rows = self.read("read staged messages", |tx| {
            tx.query_typed(
                "SELECT seq, destination, idempotency_key, content_type, body, attempts, in_flight
                 FROM jobhost_outbox WHERE key = $1 AND state = 'PENDING' ORDER BY seq",
                &[text(&key.as_str())],
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(PendingMessage {
                    message: staged(r)?,
                    attempts: count(r.get(5), "attempt count")?,
                    in_flight: r.get(6),
                })
            })
            .collect()
    }

    fn report(&mut self, key: &WindowKey) -> Result<Option<StoredReport>> {
        let row = self.read("read the report", |tx| {
            tx.query_typed_opt(
                "SELECT report, report_cursor, digest_prompt, described FROM jobhost_runs
                 WHERE key = $1 AND report IS NOT NULL",
                &[text(&key.as_str())],
            )
        })?;
        Ok(row.map(|r| StoredReport {
            summary: r.get(0),
            cursor: r.get(1),
            prompt: r.get(2),
            described: r.get(3),
        }))
    }

    fn check_lease(&mut self, lease: &Lease, _now: Timestamp) -> Result<SignedDuration> {
        let row = self.read("check the claim", |tx| {
            tx.query_typed_opt(
                "SELECT (extract(epoch FROM lease_expires_at - now()) * 1000000)::int8
                 FROM jobhost_runs WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
                &[text(&lease.key.as_str()), int8(&lease.fence.0)],
            )
        })?;
        match row {
            Some(r) => Ok(SignedDuration::from_micros(r.get(0))),
            None => Err(lease_lost(lease)),
        }
    }

    fn renew(
        &mut self,
        lease: &Lease,
        for_: Duration,
        in_flight: Option<u32>,
        _now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.begin("renew the claim")?;
        let changed = tx
            .execute_typed(
                "UPDATE jobhost_runs SET updated_at = now(),
                    lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => $3))
                 WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
                &[
                    text(&lease.key.as_str()),
                    int8(&lease.fence.0),
                    float8(&seconds(for_)),
                ],
            )
            .map_err(|e| tx.err("renew the claim", &e))?;
        fenced(changed, lease)?;
        if let Some(seq) = in_flight {
            tx.execute_typed(
                "UPDATE jobhost_outbox SET in_flight = true, attempts = attempts + 1,
                    updated_at = now()
                 WHERE key = $1 AND seq = $2 AND state = 'PENDING'",
                &[text(&lease.key.as_str()), int8(&i64::from(seq))],
            )
            .map_err(|e| tx.err("record a send", &e))?;
        }
        tx.commit_named("renew the claim")
    }

    fn not_sent(&mut self, lease: &Lease, seq: u32, status: &str, _now: Timestamp) -> Result<()> {
        let mut tx = self.begin("record a send")?;
        still_delivering(&mut tx, lease)?;
        tx.execute_typed(
            "UPDATE jobhost_outbox SET in_flight = false, last_status = $3, updated_at = now()
             WHERE key = $1 AND seq = $2 AND state = 'PENDING'",
            &[
                text(&lease.key.as_str()),
                int8(&i64::from(seq)),
                text(&status),
            ],
        )
        .map_err(|e| tx.err("record a send", &e))?;
        tx.commit_named("record a send")
    }

    fn mark_delivered(
        &mut self,
        lease: &Lease,
        done: &Attempted<'_>,
        _now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.begin("record a delivery")?;
        record_delivery(&mut tx, lease, done)?;
        tx.commit_named("record a delivery")
    }

    fn finish(
        &mut self,
        lease: &Lease,
        last_delivery: Option<&Attempted<'_>>,
        _now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.begin("mark the run done")?;
        if let Some(done) = last_delivery {
            record_delivery(&mut tx, lease, done)?;
        }
        let changed = tx
            .execute_typed(
                "UPDATE jobhost_runs SET state = 'DONE', error = NULL, retry_at = NULL,
                    updated_at = now()
                 WHERE key = $1 AND fence = $2 AND state = 'PREPARED'
                   AND NOT EXISTS (SELECT 1 FROM jobhost_outbox o
                                   WHERE o.key = $1 AND o.state <> 'DELIVERED')",
                &[text(&lease.key.as_str()), int8(&lease.fence.0)],
            )
            .map_err(|e| tx.err("mark the run done", &e))?;
        if changed == 0 {
            let still_ours = tx
                .query_typed_opt(
                    "SELECT 1 FROM jobhost_runs WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
                    &[text(&lease.key.as_str()), int8(&lease.fence.0)],
                )
                .map_err(|e| tx.err("mark the run done", &e))?;
            if still_ours.is_some() {
                return Err(undelivered(lease));
            }
        }
        fenced(changed, lease)?;
        // The cursor moves only with DONE, and never backwards.
        tx.execute_typed(
            "INSERT INTO jobhost_cursors (job, cursor, key, window_end, updated_at)
             SELECT job, report_cursor, key, window_end, now() FROM jobhost_runs
             WHERE key = $1 AND report_cursor IS NOT NULL
             ON CONFLICT (job) DO UPDATE SET cursor = excluded.cursor, key = excluded.key,
                window_end = excluded.window_end, updated_at = excluded.updated_at
             WHERE excluded.window_end >= jobhost_cursors.window_end",
            &[text(&lease.key.as_str())],
        )
        .map_err(|e| tx.err("move the cursor", &e))?;
        tx.commit_named("mark the run done")
    }

    fn fail(
        &mut self,
        lease: &Lease,
        error: &str,
        how: Failure,
        message: Option<&Attempted<'_>>,
        _now: Timestamp,
    ) -> Result<()> {
        let t = how.transition();
        let retry_after = t.retry_after.map(seconds);
        let run_state = t.run_state.map(RunState::as_str);
        let message_state = t.message_state;
        let uncounted = i64::from(!t.counted);
        let mut tx = self.begin("record the failure")?;
        let changed = tx
            .execute_typed(
                "UPDATE jobhost_runs SET
                    state = coalesce($3, CASE state WHEN 'CLAIMED' THEN 'FAILED' ELSE state END),
                    retryable = $4,
                    retry_at = now() + make_interval(secs => $5),
                    error = $6, updated_at = now(),
                    lease_expires_at = least(lease_expires_at, now()),
                    attempt = greatest(attempt - $7, 0)
                 WHERE key = $1 AND fence = $2 AND state IN ('CLAIMED', 'PREPARED')",
                &[
                    text(&lease.key.as_str()),
                    int8(&lease.fence.0),
                    text(&run_state),
                    boolean(&retry_after.is_some()),
                    float8(&retry_after),
                    text(&error),
                    int8(&uncounted),
                ],
            )
            .map_err(|e| tx.err("record the failure", &e))?;
        fenced(changed, lease)?;
        if let Some(m) = message {
            tx.execute_typed(
                "UPDATE jobhost_outbox SET state = $3, in_flight = false,
                    attempts = attempts + $4, last_status = $5, updated_at = now()
                 WHERE key = $1 AND seq = $2 AND state = 'PENDING'",
                &[
                    text(&lease.key.as_str()),
                    int8(&i64::from(m.seq)),
                    text(&message_state),
                    int8(&i64::from(m.tries)),
                    text(&m.status),
                ],
            )
            .map_err(|e| tx.err("record the failed delivery", &e))?;
        }
        tx.commit_named("record the failure")
    }

    fn cursor(&mut self, job: &JobName) -> Result<Option<String>> {
        let row = self.read("read the cursor", |tx| {
            tx.query_typed_opt(
                "SELECT cursor FROM jobhost_cursors WHERE job = $1",
                &[text(&job.as_str())],
            )
        })?;
        Ok(row.and_then(|r| r.get(0)))
    }
}

impl Ledger for PostgresStore {
    fn peek(&mut self, key: &WindowKey) -> Result<Option<RunRecord>> {
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE r.key = $1",
            self.run_columns()
        );
        let row = self.read("read a run", |tx| {
            tx.query_typed_opt(&sql, &[text(&key.as_str())])
        })?;
        row.as_ref().map(run_record).transpose()
    }

    fn journal(&mut self, key: &WindowKey) -> Result<Option<Vec<u8>>> {
        let row = self.read("read the journal", |tx| {
            tx.query_typed_opt(
                "SELECT journal FROM jobhost_runs WHERE key = $1",
                &[text(&key.as_str())],
            )
        })?;
        Ok(row.and_then(|r| r.get(0)))
    }

    fn messages(&mut self, key: &WindowKey) -> Result<Vec<StagedMessage>> {
        let rows = self.read("read staged messages", |tx| {
            tx.query_typed(
                "SELECT seq, destination, idempotency_key, content_type, body
                 FROM jobhost_outbox WHERE key = $1 ORDER BY seq",
                &[text(&key.as_str())],
            )
        })?;
        rows.iter().map(staged).collect()
    }

    fn jobs(&mut self) -> Result<Vec<String>> {
        let rows = self.read("list the jobs", |tx| {
            tx.query_typed(
                "SELECT DISTINCT job COLLATE \"C\" FROM jobhost_runs ORDER BY 1",
                &[],
            )
        })?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn history(&mut self, job: Option<&str>) -> Result<Vec<RunRecord>> {
        self.runs_where("$1::text IS NULL OR r.job = $1", &[text(&job)])
    }

    fn history_from(&mut self, job: &str, from: Option<Timestamp>) -> Result<Vec<RunRecord>> {
        match from {
            Some(t) => self.runs_where(
                "r.job = $1 AND r.window_start >= to_timestamp($2)",
                &[text(&job), float8(&unix_seconds(t))],
            ),
            None => self.runs_where("r.job = $1", &[text(&job)]),
        }
    }

    fn runs_in_range(&mut self, q: &RangeQuery<'_>) -> Result<Vec<RunRecord>> {
        let range = "job = $1
               AND ($2::float8 IS NULL OR window_start >= to_timestamp($2))
               AND ($3::float8 IS NULL OR window_start < to_timestamp($3))";
        // With states, the rows are looked up by key from what each
        // state's read found (see the SQLite store).
        let tables = match q.keys_by_state("jobhost_runs", range, "$4", " COLLATE \"C\"") {
            Some(keys) => format!(
                "({keys}) AS k JOIN jobhost_runs r ON r.key = k.key
                 LEFT JOIN jobhost_digests d ON d.key = r.key"
            ),
            None => format!(
                "{RUN_TABLES} WHERE r.job = $1
                   AND ($2::float8 IS NULL OR r.window_start >= to_timestamp($2))
                   AND ($3::float8 IS NULL OR r.window_start < to_timestamp($3))"
            ),
        };
        let sql = format!(
            "SELECT {} FROM {tables}
             ORDER BY r.window_start {order}, r.key COLLATE \"C\" LIMIT $4",
            self.run_columns(),
            order = q.order()
        );
        let from = q.from.map(unix_seconds);
        let until = q.until.map(unix_seconds);
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        let rows = self.read("read history", |tx| {
            tx.query_typed(
                &sql,
                &[text(&q.job), float8(&from), float8(&until), int8(&limit)],
            )
        })?;
        rows.iter().map(run_record).collect()
    }

    fn state_counts(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<Vec<(RunState, u64)>> {
        let from = from.map(unix_seconds);
        let until = until.map(unix_seconds);
        let filter = "job = $1
                   AND ($2::float8 IS NULL OR window_start >= to_timestamp($2))
                   AND ($3::float8 IS NULL OR window_start < to_timestamp($3))";
        let sql = if self.version >= STATE_INDEX_SCHEMA {
            RunState::counts_sql("jobhost_runs", filter)
        } else {
            format!("SELECT state, count(*) FROM jobhost_runs WHERE {filter} GROUP BY state")
        };
        let rows = self.read("count windows", |tx| {
            tx.query_typed(&sql, &[text(&job), float8(&from), float8(&until)])
        })?;
        Ok(state_rows(&rows))
    }

    fn unfinished(&mut self, job: &str) -> Result<Vec<RunRecord>> {
        self.runs_where(
            "r.job = $1 AND (r.state IN ('CLAIMED', 'PREPARED')
                OR (r.state = 'FAILED' AND r.retry_at IS NOT NULL))",
            &[text(&job)],
        )
    }

    fn record_skips(
        &mut self,
        skips: &[Skip<'_>],
        owner: &str,
        _now: Timestamp,
    ) -> Result<Vec<bool>> {
        if skips.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = skips.iter().map(|s| s.window.key().to_string()).collect();
        let jobs: Vec<&str> = skips.iter().map(|s| s.window.job.as_str()).collect();
        let starts: Vec<f64> = skips.iter().map(|s| unix_seconds(s.window.start)).collect();
        let ends: Vec<f64> = skips.iter().map(|s| unix_seconds(s.window.end)).collect();
        let zones: Vec<&str> = skips.iter().map(|s| s.window.zone.name()).collect();
        let reasons: Vec<&str> = skips.iter().map(|s| s.reason).collect();
        // One statement for all of them, in a bounded transaction; the
        // keys it inserted come back, the others were already there.
        let mut tx = self.begin("record skipped windows")?;
        let rows = tx
            .query_typed(
                "INSERT INTO jobhost_runs (key, job, window_start, window_end, timezone, state,
                    fence, owner, lease_expires_at, attempt, component, error, created_at,
                    updated_at, revision)
                 SELECT s.key, s.job, to_timestamp(s.window_start), to_timestamp(s.window_end),
                    s.timezone, 'SKIPPED', coalesce(f.next_fence - 1, 0), $7, now(), 0, '',
                    s.reason, now(), now(), coalesce(f.next_revision, 1)
                 FROM unnest($1, $2, $3, $4, $5, $6)
                    AS s (key, job, window_start, window_end, timezone, reason)
                    LEFT JOIN jobhost_forgotten f ON f.key = s.key
                 ON CONFLICT (key) DO NOTHING
                 RETURNING key",
                &[
                    (&keys, Type::TEXT_ARRAY),
                    (&jobs, Type::TEXT_ARRAY),
                    (&starts, Type::FLOAT8_ARRAY),
                    (&ends, Type::FLOAT8_ARRAY),
                    (&zones, Type::TEXT_ARRAY),
                    (&reasons, Type::TEXT_ARRAY),
                    text(&owner),
                ],
            )
            .map_err(|e| tx.err("record skipped windows", &e))?;
        // As in a claim: a skip that waited for a `forget` of its key goes
        // on from the forgotten fence and revision.
        tx.execute_typed(
            "UPDATE jobhost_runs r SET fence = f.next_fence - 1, revision = f.next_revision
             FROM jobhost_forgotten f
             WHERE r.key = ANY($1) AND f.key = r.key AND r.state = 'SKIPPED'
               AND (r.fence < f.next_fence - 1 OR r.revision < f.next_revision)",
            &[(&keys, Type::TEXT_ARRAY)],
        )
        .map_err(|e| tx.err("record skipped windows", &e))?;
        tx.commit_named("record skipped windows")?;
        let inserted: std::collections::HashSet<String> =
            rows.iter().map(|r| r.get::<_, String>(0)).collect();
        Ok(keys.iter().map(|k| inserted.contains(k)).collect())
    }

    fn decided_until(&mut self, job: &JobName) -> Result<Option<Timestamp>> {
        let row = self.read("read the schedule", |tx| {
            tx.query_typed_opt(
                concat!(
                    "SELECT ",
                    us!("decided_until"),
                    " FROM jobhost_schedule WHERE job = $1"
                ),
                &[text(&job.as_str())],
            )
        })?;
        row.map(|r| instant(r.get(0))).transpose()
    }

    fn set_decided_until(
        &mut self,
        job: &JobName,
        until: Timestamp,
        _now: Timestamp,
    ) -> Result<()> {
        self.write_one(
            "record the schedule",
            // Never past a forgotten window that has no row again: it is
            // still to be decided, whatever a plan read before the forget.
            "INSERT INTO jobhost_schedule (job, decided_until, updated_at)
             VALUES ($1, least(to_timestamp($2), (SELECT min(f.window_start)
                 FROM jobhost_forgotten f WHERE f.job = $1
                   AND NOT EXISTS (SELECT 1 FROM jobhost_runs r WHERE r.key = f.key))), now())
             ON CONFLICT (job) DO UPDATE SET
                decided_until = greatest(jobhost_schedule.decided_until, excluded.decided_until),
                updated_at = excluded.updated_at",
            &[text(&job.as_str()), float8(&unix_seconds(until))],
        )
        .map(drop)
    }

    fn record_digest(
        &mut self,
        key: &WindowKey,
        note: &DigestNote<'_>,
        _now: Timestamp,
    ) -> Result<()> {
        let changed = self.write_one(
            "record the digest",
            "INSERT INTO jobhost_digests (key, cache_key, model, error, updated_at)
             SELECT key, $2, $3, $4, now() FROM jobhost_runs WHERE key = $1
             ON CONFLICT (key) DO UPDATE SET
                cache_key = coalesce(excluded.cache_key, jobhost_digests.cache_key),
                model = excluded.model, error = excluded.error,
                updated_at = excluded.updated_at",
            &[
                text(&key.as_str()),
                text(&note.cache_key),
                text(&note.model),
                text(&note.error),
            ],
        )?;
        if changed == 0 {
            return Err(super::no_such_run(key));
        }
        Ok(())
    }

    fn digest_sent(&mut self, key: &WindowKey, _now: Timestamp) -> Result<()> {
        let changed = self.write_one(
            "record the digest message",
            "INSERT INTO jobhost_digests (key, sent_at, updated_at)
             SELECT key, now(), now() FROM jobhost_runs WHERE key = $1
             ON CONFLICT (key) DO UPDATE SET sent_at = excluded.sent_at,
                updated_at = excluded.updated_at",
            &[text(&key.as_str())],
        )?;
        if changed == 0 {
            return Err(super::no_such_run(key));
        }
        Ok(())
    }

    fn cursor_before(&mut self, job: &JobName, start: Timestamp) -> Result<Option<String>> {
        let row = self.read("read the cursor", |tx| {
            tx.query_typed_opt(
                "SELECT report_cursor FROM jobhost_runs
                 WHERE job = $1 AND state = 'DONE' AND window_end <= to_timestamp($2)
                 ORDER BY window_end DESC LIMIT 1",
                &[text(&job.as_str()), float8(&unix_seconds(start))],
            )
        })?;
        Ok(row.and_then(|r| r.get(0)))
    }

    fn message_records(&mut self, key: &WindowKey) -> Result<Vec<MessageRecord>> {
        let sql =
            format!("SELECT {MESSAGE_COLUMNS} FROM jobhost_outbox WHERE key = $1 ORDER BY seq");
        let rows = self.read("read messages", |tx| {
            tx.query_typed(&sql, &[text(&key.as_str())])
        })?;
        rows.iter().map(message_record).collect()
    }

    fn revisions(&mut self, key: &WindowKey) -> Result<Vec<Revision>> {
        if !self.current() {
            return Ok(Vec::new());
        }
        let msql = format!(
            "SELECT {MESSAGE_COLUMNS}, revision FROM jobhost_revision_messages
             WHERE key = $1 ORDER BY revision, seq"
        );
        let (rows, messages) = self.read("read revisions", |tx| {
            let rows = tx.query_typed(
                concat!(
                    "SELECT revision, state, fence, attempt, owner, component, report, ",
                    "report_cursor, digest_prompt, described, error, reason, ",
                    "octet_length(journal)::int8, ",
                    us!("created_at"),
                    ", ",
                    us!("updated_at"),
                    ", ",
                    us!("pruned_at"),
                    " FROM jobhost_revisions WHERE key = $1 ORDER BY revision"
                ),
                &[text(&key.as_str())],
            )?;
            let messages = tx.query_typed(&msql, &[text(&key.as_str())])?;
            Ok((rows, messages))
        })?;
        let mut revisions = rows
            .iter()
            .map(|r| {
                let report: Option<String> = r.get(6);
                Ok(Revision {
                    revision: count(r.get(0), "revision")?,
                    state: state(r.get(1))?,
                    fence: Fence(r.get(2)),
                    attempt: count(r.get(3), "attempt")?,
                    owner: r.get(4),
                    component: r.get(5),
                    report: report.map(|summary| StoredReport {
                        summary,
                        cursor: r.get(7),
                        prompt: r.get(8),
                        described: r.get(9),
                    }),
                    error: r.get(10),
                    reason: r.get(11),
                    journal_bytes: r.get::<_, Option<i64>>(12).map(i64::unsigned_abs),
                    created_at: instant(r.get(13))?,
                    updated_at: instant(r.get(14))?,
                    pruned_at: r.get::<_, Option<i64>>(15).map(instant).transpose()?,
                    messages: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for m in &messages {
            let revision = count(m.get(9), "revision")?;
            if let Some(r) = revisions.iter_mut().find(|r| r.revision == revision) {
                r.messages.push(message_record(m)?);
            }
        }
        Ok(revisions)
    }

    fn archived(&mut self, key: &WindowKey, revision: u32) -> Result<Option<Archived>> {
        if !self.current() {
            return Ok(None);
        }
        let rev = i64::from(revision);
        let (journal, messages) = self.read("read a revision", |tx| {
            let journal = tx.query_typed_opt(
                "SELECT journal FROM jobhost_revisions WHERE key = $1 AND revision = $2",
                &[text(&key.as_str()), int8(&rev)],
            )?;
            let messages = tx.query_typed(
                "SELECT seq, destination, idempotency_key, content_type, body
                 FROM jobhost_revision_messages WHERE key = $1 AND revision = $2 ORDER BY seq",
                &[text(&key.as_str()), int8(&rev)],
            )?;
            Ok((journal, messages))
        })?;
        let Some(journal) = journal else {
            return Ok(None);
        };
        Ok(Some(Archived {
            journal: journal.get(0),
            messages: messages.iter().map(staged).collect::<Result<Vec<_>>>()?,
        }))
    }

    fn paused(&mut self, job: &str) -> Result<Option<Pause>> {
        if !self.current() {
            return Ok(None);
        }
        let row = self.read("read the job's pause", |tx| {
            tx.query_typed_opt(
                concat!(
                    "SELECT job, note, actor, ",
                    us!("since"),
                    " FROM jobhost_pauses WHERE job = $1"
                ),
                &[text(&job)],
            )
        })?;
        row.as_ref().map(pause_row).transpose()
    }

    fn pause(&mut self, job: &str, actor: Actor<'_>, _now: Timestamp) -> Result<Option<Pause>> {
        let mut tx = self.begin("pause the job")?;
        // Read under the pause's own row lock (taken by locking the job's
        // existing pause, if any), in the same transaction as the write.
        let before = tx
            .query_typed_opt(
                concat!(
                    "SELECT job, note, actor, ",
                    us!("since"),
                    " FROM jobhost_pauses WHERE job = $1 FOR UPDATE"
                ),
                &[text(&job)],
            )
            .map_err(|e| tx.err("pause the job", &e))?
            .as_ref()
            .map(pause_row)
            .transpose()?;
        tx.execute_typed(
            "INSERT INTO jobhost_pauses (job, note, actor, since) VALUES ($1, $2, $3, now())
             ON CONFLICT (job) DO UPDATE SET note = excluded.note, actor = excluded.actor",
            &[text(&job), text(&actor.reason), text(&actor.by)],
        )
        .map_err(|e| tx.err("pause the job", &e))?;
        audit(
            &mut tx,
            &AuditRow {
                job,
                key: None,
                action: "pause",
                old_state: None,
                reason: actor.reason,
                detail: None,
                actor: actor.by,
            },
        )?;
        tx.commit_named("pause the job")?;
        Ok(before)
    }

    fn resume(&mut self, job: &str, actor: Actor<'_>, _now: Timestamp) -> Result<Option<Pause>> {
        let mut tx = self.begin("resume the job")?;
        let row = tx
            .query_typed_opt(
                concat!(
                    "DELETE FROM jobhost_pauses WHERE job = $1 RETURNING job, note, actor, ",
                    us!("since")
                ),
                &[text(&job)],
            )
            .map_err(|e| tx.err("resume the job", &e))?;
        let ended = row.as_ref().map(pause_row).transpose()?;
        if let Some(p) = &ended {
            audit(
                &mut tx,
                &AuditRow {
                    job,
                    key: None,
                    action: "resume",
                    old_state: None,
                    reason: actor.reason,
                    detail: Some(&format!("paused since {} by {}: {}", p.since, p.by, p.note)),
                    actor: actor.by,
                },
            )?;
        }
        tx.commit_named("resume the job")?;
        Ok(ended)
    }

    fn forget(
        &mut self,
        key: &WindowKey,
        force: bool,
        actor: Actor<'_>,
        _now: Timestamp,
    ) -> Result<Forgotten> {
        let what = "forget the window";
        let mut tx = self.begin(what)?;
        let k = key.as_str();
        let row = tx
            .query_typed_opt(
                concat!(
                    "SELECT state, job, ",
                    us!("window_start"),
                    ", lease_expires_at > now(), error, report IS NOT NULL, ",
                    "(SELECT count(*) FROM jobhost_outbox o WHERE o.key = r.key ",
                    "AND o.state <> 'DELIVERED'), fence, revision ",
                    "FROM jobhost_runs r WHERE key = $1 FOR UPDATE"
                ),
                &[text(&k)],
            )
            .map_err(|e| tx.err(what, &e))?;
        let Some(r) = row else {
            return Err(super::no_such_run(key));
        };
        let old = state(r.get(0))?;
        let job: String = r.get(1);
        let start = instant(r.get(2))?;
        let (live, error, has_report): (bool, Option<String>, bool) =
            (r.get(3), r.get(4), r.get(5));
        let undelivered = count(r.get(6), "message count")?;
        let (fence, revision): (i64, i64) = (r.get(7), r.get(8));
        super::may_forget(key, old, live, force)?;
        if has_report {
            archive(&mut tx, key)?;
        }
        let detail = super::forget_detail(old, error.as_deref(), undelivered);
        audit(
            &mut tx,
            &AuditRow {
                job: &job,
                key: Some(k),
                action: "forget",
                old_state: Some(old.as_str()),
                reason: actor.reason,
                detail: detail.as_deref(),
                actor: actor.by,
            },
        )?;
        for sql in [
            "DELETE FROM jobhost_outbox WHERE key = $1",
            "DELETE FROM jobhost_digests WHERE key = $1",
            "DELETE FROM jobhost_runs WHERE key = $1",
        ] {
            tx.execute_typed(sql, &[text(&k)])
                .map_err(|e| tx.err(what, &e))?;
        }
        tx.execute_typed(
            "INSERT INTO jobhost_forgotten (key, job, window_start, next_revision, next_fence, at)
             VALUES ($1, $2, to_timestamp($3), $4, $5, now())
             ON CONFLICT (key) DO UPDATE SET
                next_revision = greatest(jobhost_forgotten.next_revision, excluded.next_revision),
                next_fence = greatest(jobhost_forgotten.next_fence, excluded.next_fence),
                at = excluded.at",
            &[
                text(&k),
                text(&job),
                float8(&unix_seconds(start)),
                int8(&(revision + i64::from(has_report))),
                int8(&(fence + 1)),
            ],
        )
        .map_err(|e| tx.err(what, &e))?;
        let moved = tx
            .execute_typed(
                "UPDATE jobhost_schedule SET decided_until = to_timestamp($2), updated_at = now()
                 WHERE job = $1 AND decided_until > to_timestamp($2)",
                &[text(&job), float8(&unix_seconds(start))],
            )
            .map_err(|e| tx.err(what, &e))?;
        tx.commit_named(what)?;
        Ok(Forgotten {
            old_state: old,
            undelivered: if old == RunState::Prepared {
                undelivered
            } else {
                0
            },
            decided_until: (moved > 0).then_some(start),
            archived: has_report,
        })
    }

    fn audit(&mut self, job: Option<&str>) -> Result<Vec<AuditLine>> {
        if !self.current() {
            return Ok(Vec::new());
        }
        let rows = self.read("read the audit lines", |tx| {
            tx.query_typed(
                concat!(
                    "SELECT ",
                    us!("at"),
                    ", job, key, action, old_state, reason, detail, actor FROM jobhost_audit ",
                    "WHERE $1::text IS NULL OR job = $1 OR job = '*' ORDER BY at DESC, id DESC"
                ),
                &[text(&job)],
            )
        })?;
        rows.iter()
            .map(|r| {
                Ok(AuditLine {
                    at: instant(r.get(0))?,
                    job: r.get(1),
                    key: r.get(2),
                    action: r.get(3),
                    old_state: r.get(4),
                    reason: r.get(5),
                    detail: r.get(6),
                    by: r.get(7),
                })
            })
            .collect()
    }

    fn prune(
        &mut self,
        job: Option<&str>,
        before: Timestamp,
        keep_journals: bool,
        actor: Actor<'_>,
        _now: Timestamp,
    ) -> Result<Pruned> {
        let what = "prune";
        let b = unix_seconds(before);
        let mut pruned = Pruned::default();
        // Rows of DONE runs (never anything unfinished), then archived
        // revisions (which never run again), whose window ended by
        // `before`, at most 500 a transaction so that a first prune of a
        // long history holds no row for long and no statement runs into
        // the statement timeout; sizes are read (the statement's snapshot)
        // before the bytes are dropped.
        for sql in [PRUNE_RUNS, PRUNE_REVISIONS] {
            loop {
                let mut tx = self.begin(what)?;
                let r = tx
                    .query_typed_one(sql, &[float8(&b), text(&job), boolean(&keep_journals)])
                    .map_err(|e| tx.err(what, &e))?;
                tx.commit_named(what)?;
                let batch = Pruned {
                    runs: r.get::<_, i64>(0).unsigned_abs(),
                    journal_bytes: r.get::<_, i64>(1).unsigned_abs(),
                    body_bytes: r.get::<_, i64>(2).unsigned_abs(),
                };
                if batch.runs == 0 {
                    break;
                }
                pruned.add(batch);
            }
        }
        if pruned.runs > 0 {
            let detail = format!(
                "{} run(s) ending by {before}: {} journal byte(s), {} message byte(s)",
                pruned.runs, pruned.journal_bytes, pruned.body_bytes
            );
            let mut tx = self.begin(what)?;
            audit(
                &mut tx,
                &AuditRow {
                    job: job.unwrap_or("*"),
                    key: None,
                    action: "prune",
                    old_state: None,
                    reason: actor.reason,
                    detail: Some(&detail),
                    actor: actor.by,
                },
            )?;
            tx.commit_named(what)?;
        }
        Ok(pruned)
    }
}
