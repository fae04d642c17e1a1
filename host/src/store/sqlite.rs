//! The SQLite claim store: one file, WAL mode, `synchronous=FULL`, every
//! write in a `BEGIN IMMEDIATE` transaction. The schema is versioned by
//! `PRAGMA user_version` and migrated in one exclusive transaction. Two rules
//! for migrations: never remove or edit one that has shipped, and keep the
//! data an older version wrote as it was. An older host refuses a store a
//! newer one has migrated (it cannot know what the new states mean).

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::{
    Actor, Archived, Attempted, AuditLine, Claim, ClaimRequest, ClaimStore, Decision, DigestNote,
    DigestRecord, Existing, Failure, Fence, Forgotten, Lease, Ledger, MessageRecord, Pause,
    PendingMessage, Pruned, RangeQuery, Revision, RunRecord, RunState, Skip, StagedMessage,
    StoredReport, decide, decided,
};
use crate::core::error::{Error, Result};
use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::window::{JobName, WindowKey};

/// Migrations, applied in order; `user_version` counts those applied.
const MIGRATIONS: &[&str] = &[
    // v1: the run table, the outbox and the cursors (see "The store's state machine" in ARCHITECTURE.md).
    "CREATE TABLE runs (
        key              TEXT PRIMARY KEY,
        job              TEXT NOT NULL,
        window_start     INTEGER NOT NULL,  -- unix seconds, UTC
        window_end       INTEGER NOT NULL,  -- unix seconds, UTC, exclusive
        timezone         TEXT NOT NULL,
        state            TEXT NOT NULL CHECK (state IN
                             ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED')),
        fence            INTEGER NOT NULL,
        owner            TEXT NOT NULL,
        lease_expires_at INTEGER NOT NULL,  -- unix seconds, UTC
        attempt          INTEGER NOT NULL,
        component        TEXT NOT NULL,     -- sha256:<hex> of the .wasm
        report           TEXT,
        report_cursor    TEXT,
        journal          BLOB,
        error            TEXT,
        retryable        INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX runs_by_job ON runs (job, window_start);
    CREATE TABLE outbox (
        key              TEXT NOT NULL REFERENCES runs (key),
        seq              INTEGER NOT NULL,
        destination      TEXT NOT NULL,
        idempotency_key  TEXT NOT NULL UNIQUE,
        content_type     TEXT NOT NULL,
        body             BLOB NOT NULL,
        state            TEXT NOT NULL CHECK (state IN
                             ('PENDING', 'DELIVERED', 'FAILED', 'ABANDONED')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        last_status      TEXT,
        updated_at       INTEGER NOT NULL,
        PRIMARY KEY (key, seq)
    ) STRICT;
    CREATE TABLE cursors (
        job              TEXT PRIMARY KEY,
        cursor           TEXT,
        key              TEXT NOT NULL,
        window_end       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL
    ) STRICT;",
    // v2: backoff between attempts, and at-most-once sends in flight.
    "ALTER TABLE runs ADD COLUMN retry_at INTEGER;  -- unix seconds, UTC; no attempt before
    ALTER TABLE outbox ADD COLUMN in_flight INTEGER NOT NULL DEFAULT 0;",
    // v3: windows the scheduler skipped (a state the CHECK must allow, and
    // SQLite cannot alter a CHECK: the table is rebuilt, foreign keys off),
    // and how far each job's windows have all been decided.
    "CREATE TABLE runs_v3 (
        key              TEXT PRIMARY KEY,
        job              TEXT NOT NULL,
        window_start     INTEGER NOT NULL,  -- unix seconds, UTC
        window_end       INTEGER NOT NULL,  -- unix seconds, UTC, exclusive
        timezone         TEXT NOT NULL,
        state            TEXT NOT NULL CHECK (state IN
                             ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED', 'SKIPPED')),
        fence            INTEGER NOT NULL,
        owner            TEXT NOT NULL,
        lease_expires_at INTEGER NOT NULL,  -- unix seconds, UTC
        attempt          INTEGER NOT NULL,
        component        TEXT NOT NULL,     -- sha256:<hex> of the .wasm; empty when skipped
        report           TEXT,
        report_cursor    TEXT,
        journal          BLOB,
        error            TEXT,              -- the last error; the reason, when skipped
        retryable        INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        retry_at         INTEGER            -- unix seconds, UTC; no attempt before
    ) STRICT;
    -- Messages of runs a person deleted by hand (with foreign keys off, as
    -- the sqlite3 shell has them): they can never be sent or read.
    DELETE FROM outbox WHERE key NOT IN (SELECT key FROM runs);
    INSERT INTO runs_v3 (key, job, window_start, window_end, timezone, state, fence, owner,
        lease_expires_at, attempt, component, report, report_cursor, journal, error, retryable,
        created_at, updated_at, retry_at)
    SELECT key, job, window_start, window_end, timezone, state, fence, owner,
        lease_expires_at, attempt, component, report, report_cursor, journal, error, retryable,
        created_at, updated_at, retry_at
    FROM runs;
    DROP TABLE runs;
    ALTER TABLE runs_v3 RENAME TO runs;
    CREATE INDEX runs_by_job ON runs (job, window_start);
    CREATE TABLE schedule (
        job              TEXT PRIMARY KEY,
        decided_until    INTEGER NOT NULL,  -- unix seconds, UTC: every window ending by then is decided
        updated_at       INTEGER NOT NULL
    ) STRICT;",
    // v4: what a language model is asked to describe of a run, and what
    // became of its digest (the digest itself is a cache on the host).
    "ALTER TABLE runs ADD COLUMN digest_prompt TEXT;
    ALTER TABLE runs ADD COLUMN described INTEGER NOT NULL DEFAULT 0;  -- digest_prompt is describe's answer
    CREATE TABLE digests (
        key              TEXT PRIMARY KEY REFERENCES runs (key),
        cache_key        TEXT,              -- sha256 hex of model, settings and prompt
        model            TEXT,
        error            TEXT,              -- why the last attempt failed
        sent_at          INTEGER,           -- unix seconds, UTC: the digest message delivered
        updated_at       INTEGER NOT NULL
    ) STRICT;
    -- A wake-up reads the rows after a point and the unfinished ones; with
    -- these it costs the same however long the history.
    CREATE INDEX runs_unfinished ON runs (job, window_start) WHERE state IN ('CLAIMED', 'PREPARED')
        OR (state = 'FAILED' AND retry_at IS NOT NULL);",
    // v5: what a person does on purpose. A window's revisions (a rerun
    // archives the DONE row and its messages, then runs the next), the
    // audit lines of forget, rerun, retry, pause and prune, paused jobs,
    // and when a run's journal and delivered bodies were pruned.
    "ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE runs ADD COLUMN reason TEXT;      -- why this revision was made (a rerun)
    ALTER TABLE runs ADD COLUMN pruned_at INTEGER; -- unix seconds, UTC
    CREATE TABLE revisions (
        key              TEXT NOT NULL,
        revision         INTEGER NOT NULL,
        job              TEXT NOT NULL,
        window_end       INTEGER NOT NULL,  -- unix seconds, UTC, exclusive
        state            TEXT NOT NULL,
        fence            INTEGER NOT NULL,
        attempt          INTEGER NOT NULL,
        owner            TEXT NOT NULL,
        component        TEXT NOT NULL,
        report           TEXT,
        report_cursor    TEXT,
        journal          BLOB,
        error            TEXT,
        reason           TEXT,
        digest_prompt    TEXT,
        described        INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        pruned_at        INTEGER,
        PRIMARY KEY (key, revision)
    ) STRICT;
    CREATE TABLE revision_messages (
        key              TEXT NOT NULL,
        revision         INTEGER NOT NULL,
        seq              INTEGER NOT NULL,
        destination      TEXT NOT NULL,
        idempotency_key  TEXT NOT NULL,
        content_type     TEXT NOT NULL,
        body             BLOB NOT NULL,
        state            TEXT NOT NULL,
        attempts         INTEGER NOT NULL,
        in_flight        INTEGER NOT NULL,
        last_status      TEXT,
        updated_at       INTEGER NOT NULL,
        PRIMARY KEY (key, revision, seq)
    ) STRICT;
    CREATE TABLE audit (
        id               INTEGER PRIMARY KEY,
        at               INTEGER NOT NULL,  -- unix seconds, UTC
        job              TEXT NOT NULL,
        key              TEXT,
        action           TEXT NOT NULL,     -- forget, rerun, retry, pause, resume, prune
        old_state        TEXT,
        reason           TEXT NOT NULL,
        detail           TEXT,
        actor            TEXT NOT NULL      -- user@host
    ) STRICT;
    CREATE INDEX audit_by_job ON audit (job, at);
    CREATE TABLE pauses (
        job              TEXT PRIMARY KEY,
        note             TEXT NOT NULL,
        actor            TEXT NOT NULL,
        since            INTEGER NOT NULL   -- unix seconds, UTC
    ) STRICT;
    -- What prune looks for, without reading the whole history.
    CREATE INDEX runs_prunable ON runs (window_end) WHERE state = 'DONE' AND pruned_at IS NULL;
    -- Windows a person forgot: the row that comes next for the key goes on
    -- from the forgotten one's fence and revision (a stale owner's fence
    -- never matches it, its messages never reuse a key that may have been
    -- delivered), and no scheduler records a window decided past one that
    -- has no row again.
    CREATE TABLE forgotten (
        key              TEXT PRIMARY KEY,
        job              TEXT NOT NULL,
        window_start     INTEGER NOT NULL,  -- unix seconds, UTC
        next_revision    INTEGER NOT NULL,
        next_fence       INTEGER NOT NULL,
        at               INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX forgotten_by_job ON forgotten (job, window_start);",
    // v6: what `status` and the dashboard read of a long history at a cost
    // that does not grow with it: a job's newest rows in one state (an
    // index), and how many rows it has in each state (counts the triggers
    // keep in the same transaction as the change; a migration that rebuilds
    // `runs` must create them again).
    "CREATE INDEX runs_by_state ON runs (job, state, window_start);
    CREATE TABLE run_counts (
        job              TEXT NOT NULL,
        state            TEXT NOT NULL,
        n                INTEGER NOT NULL,
        PRIMARY KEY (job, state)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO run_counts (job, state, n) SELECT job, state, count(*) FROM runs GROUP BY job, state;
    CREATE TRIGGER runs_counted_insert AFTER INSERT ON runs BEGIN
        INSERT INTO run_counts (job, state, n) VALUES (new.job, new.state, 1)
            ON CONFLICT (job, state) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER runs_counted_delete AFTER DELETE ON runs BEGIN
        UPDATE run_counts SET n = n - 1 WHERE job = old.job AND state = old.state;
    END;
    CREATE TRIGGER runs_counted_update AFTER UPDATE OF job, state ON runs
        WHEN old.state IS NOT new.state OR old.job IS NOT new.job BEGIN
        UPDATE run_counts SET n = n - 1 WHERE job = old.job AND state = old.state;
        INSERT INTO run_counts (job, state, n) VALUES (new.job, new.state, 1)
            ON CONFLICT (job, state) DO UPDATE SET n = n + 1;
    END;",
    // v7: what a claim's owner recorded of its process (one line of JSON:
    // host, pid, start time, boot id, pid namespace), so that a claim on
    // the same machine can tell that the owner of a live lease is gone.
    // NULL from a host that records nothing: its lease decides.
    "ALTER TABLE runs ADD COLUMN owner_process TEXT;",
];

/// The schema whose tables and columns the latest reads and writes: v5.
/// Later ones add only ways to read it faster.
const OPERATOR_SCHEMA: i64 = 5;

/// The oldest schema read-only commands still read, treating what it lacks
/// as empty (a monitor keeps working between a deploy and the first run
/// that migrates): the one before [`OPERATOR_SCHEMA`].
const READABLE: i64 = OPERATOR_SCHEMA - 1;

/// The first schema with `run_counts` and the `runs_by_state` index.
const COUNTED_SCHEMA: i64 = 6;

/// How many runs one transaction of `prune` takes on.
const PRUNE_BATCH: i64 = 500;

/// How long a writer waits for another process's write lock.
const BUSY_TIMEOUT: Duration = super::WRITE_WAIT;

/// A claim store in one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// Whether opening it created the file.
    created: bool,
    /// The schema version: the latest, or down to [`READABLE`] when
    /// opened read only.
    version: i64,
    /// Test hooks inside the commit of a report.
    failpoints: Option<Arc<dyn Failpoints>>,
}

impl SqliteStore {
    /// Opens the store at `path`, creating it (and missing parent folders)
    /// with owner-only permissions, and migrates its schema.
    ///
    /// # Errors
    ///
    /// `Error::Input` when the path cannot be created or is not a jobhost
    /// SQLite store; `Error::Store` for other database failures.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let shown = path.display();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::input(format!(
                    "cannot create store folder `{}`: {e}; choose another --store path",
                    parent.display()
                ))
            })?;
        }
        if path.is_dir() {
            return Err(Error::input(format!(
                "store `{shown}` is a directory; give --store a file path such as `{shown}/jobhost.db`"
            )));
        }
        // Created here rather than by SQLite so the file is owner-only from
        // its first byte: it holds report bodies. SQLite gives its -wal and
        // -shm files the same permissions. Of several processes racing to
        // create it, one does, and says so.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Error::input(format!(
                    "cannot create store `{shown}`: {e}; choose another --store path"
                )));
            }
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(path, e))?;
        // SQLite opens a file it may not write read-only without a word;
        // every claim is a write, so say it now, naming the fix.
        if conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(|e| open_error(path, e))?
        {
            return Err(Error::input(format!(
                "store `{shown}` is read-only for this user (its permissions, an immutable \
                 flag or a read-only mount); jobhost writes every claim there: make it \
                 writable, or choose another --store"
            )));
        }
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| open_error(path, e))?;
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            created: false,
            version: MIGRATIONS.len() as i64,
            failpoints: None,
        };
        // Before anything writes: never convert somebody else's database.
        let schema = refuse_foreign(&store.conn, path)?;
        check_version(path, schema.version)?;
        let current = schema.version == MIGRATIONS.len() as i64;
        if schema.version == 0 && !schema.wal {
            // Only an empty file takes this, and only before anything is
            // written to it (switching to WAL writes its first page):
            // `prune` can then give freed pages back a few at a time
            // (`incremental_vacuum`) instead of a VACUUM that locks a live
            // store while it rewrites the file. Older stores keep their
            // freed pages for reuse.
            store
                .conn
                .execute_batch("PRAGMA auto_vacuum = INCREMENTAL")
                .map_err(|e| open_error(path, e))?;
        }
        if !schema.wal {
            store.enable_wal()?;
        }
        // FULL, not NORMAL: NORMAL may lose the last commit on power loss,
        // and a lost DONE is a second delivery.
        store
            .conn
            .execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(|e| open_error(path, e))?;
        if !current {
            store.created = store.migrate()?;
        }
        Ok(store)
    }

    /// The store's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops at [`Boundary::InPrepare`] inside the commit of every report
    /// (tests only).
    pub fn with_failpoints(mut self, failpoints: Option<Arc<dyn Failpoints>>) -> Self {
        self.failpoints = failpoints;
        self
    }

    /// Switches to WAL once. On a brand-new file several processes racing to
    /// switch get SQLITE_BUSY at once (the busy handler does not cover it), so
    /// retry for as long as a normal lock wait would take.
    fn enable_wal(&mut self) -> Result<()> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        loop {
            let attempt = self
                .conn
                .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
                .and_then(|mode| {
                    if mode.eq_ignore_ascii_case("wal") {
                        Ok(mode)
                    } else {
                        self.conn
                            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
                    }
                });
            match attempt {
                Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
                Ok(mode) => {
                    return Err(Error::Store(format!(
                        "cannot switch store `{}` to WAL mode (it stays `{mode}`); \
                         put the store on a local filesystem",
                        self.path.display()
                    )));
                }
                Err(e) if is_busy(&e) && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(open_error(&self.path, e)),
            }
        }
    }

    /// Migrates the schema; returns whether it found none (this process
    /// created the store, whether or not it created the file).
    fn migrate(&mut self) -> Result<bool> {
        let latest = MIGRATIONS.len() as i64;
        let version = self.user_version()?;
        if version == latest {
            return Ok(false);
        }

        // A migration may rebuild a table that others reference; SQLite
        // ignores this pragma inside a transaction, so it is set around it,
        // and the references are checked before the commit instead.
        let path = self.path.clone();
        self.conn
            .execute_batch("PRAGMA foreign_keys = OFF")
            .map_err(|e| open_error(&path, e))?;
        let migrated = self.migrate_in_transaction();
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON")
            .map_err(|e| open_error(&path, e))?;
        migrated
    }

    fn migrate_in_transaction(&mut self) -> Result<bool> {
        let latest = MIGRATIONS.len() as i64;
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| open_error(&path, e))?;
        // Re-read under the write lock: another process may have migrated.
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| open_error(&path, e))?;
        check_version(&path, version)?;
        if version == 0 {
            refuse_foreign(&tx, &path)?;
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql).map_err(|e| {
                Error::Store(format!(
                    "cannot migrate store `{}` to version {}: {}",
                    path.display(),
                    i + 1,
                    cause(&path, &e).unwrap_or_else(|| e.to_string())
                ))
            })?;
        }
        let dangling: Option<String> = tx
            .query_row(
                "SELECT \"table\" FROM pragma_foreign_key_check LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| open_error(&path, e))?;
        if let Some(table) = dangling {
            return Err(Error::Store(format!(
                "cannot migrate store `{}`: table `{table}` would refer to rows that do not \
                 exist; the store is left as it was",
                path.display()
            )));
        }
        tx.pragma_update(None, "user_version", latest)
            .map_err(|e| open_error(&path, e))?;
        tx.commit().map_err(|e| open_error(&path, e))?;
        Ok(version == 0)
    }

    fn user_version(&self) -> Result<i64> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| open_error(&self.path, e))?;
        check_version(&self.path, version)?;
        Ok(version)
    }

    /// A database without a jobhost schema version must be empty: jobhost
    /// never adds its tables to somebody else's database (for example the
    /// job's data source given as `--store` by mistake). Version and tables
    /// are read in one statement, so a concurrent migration (tables and
    /// version committed together) is never seen half done.
    fn refuse_foreign_database(&self) -> Result<()> {
        refuse_foreign(&self.conn, &self.path).map(drop)
    }

    /// Opens an existing store for reading only: no folder or file is
    /// created, nothing is migrated or switched to WAL.
    ///
    /// # Errors
    ///
    /// `Error::Input` when there is no store at `path` or it is not a
    /// jobhost store.
    pub fn open_read_only(path: &Path) -> Result<SqliteStore> {
        if !path.is_file() {
            return Err(Error::input(format!(
                "no store at `{}`; run a job first or pass --store",
                path.display()
            )));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| open_error(path, e))?;
        let mut store = SqliteStore {
            conn,
            path: path.to_path_buf(),
            created: false,
            version: MIGRATIONS.len() as i64,
            failpoints: None,
        };
        store.refuse_foreign_database()?;
        let version = store.user_version()?;
        if version < READABLE {
            return Err(Error::input(format!(
                "store `{}` has schema version {version}, older than this jobhost reads without \
                 upgrading it ({READABLE}); run `jobhost run` with it once to upgrade it",
                path.display()
            )));
        }
        store.version = version;
        Ok(store)
    }

    /// One write statement in a transaction of its own; the rows it
    /// changed.
    fn write_one(&mut self, what: &str, sql: &str, args: impl rusqlite::Params) -> Result<usize> {
        let tx = immediate(&mut self.conn, &self.path)?;
        let changed = tx
            .execute(sql, args)
            .map_err(|e| failed(&self.path, what, e))?;
        tx.commit().map_err(|e| failed(&self.path, what, e))?;
        Ok(changed)
    }

    /// The columns [`run_record`] reads, for this store's schema.
    fn run_columns(&self) -> &'static str {
        if self.version < OPERATOR_SCHEMA {
            RUN_COLUMNS_PREVIOUS
        } else {
            RUN_COLUMNS
        }
    }

    /// Whether the store has the tables of [`OPERATOR_SCHEMA`] (a store
    /// of an older one, opened read only, has not).
    fn current(&self) -> bool {
        self.version >= OPERATOR_SCHEMA
    }

    /// The statement of [`Ledger::runs_in_range`] for `q`, with the job,
    /// the range's ends and the limit as `?1` to `?4`.
    fn range_sql(&self, q: &RangeQuery<'_>) -> String {
        let range = "job = ?1 AND window_start >= ?2 AND window_start < ?3";
        // With states, each state's read is held to the state index, and
        // the rows are looked up by key from what they found, in that order
        // (CROSS JOIN): given the choice, the planner walks the job's rows
        // in window order to spare itself a sort, which for a state with no
        // row is every row.
        let by_state = if self.version >= COUNTED_SCHEMA {
            "runs INDEXED BY runs_by_state"
        } else {
            "runs"
        };
        let tables = match q.keys_by_state(by_state, range, "?4", "") {
            Some(keys) => format!(
                "({keys}) AS k CROSS JOIN runs r ON r.key = k.key
                 LEFT JOIN digests d ON d.key = r.key"
            ),
            None => format!(
                "{RUN_TABLES} WHERE r.job = ?1 AND r.window_start >= ?2 AND r.window_start < ?3"
            ),
        };
        format!(
            "SELECT {} FROM {tables} ORDER BY r.window_start {order}, r.key LIMIT ?4",
            self.run_columns(),
            order = q.order()
        )
    }

    /// One batch of [`Ledger::prune`] over DONE runs; `None` when nothing
    /// was left to prune.
    fn prune_runs(
        &mut self,
        job: Option<&str>,
        before: Timestamp,
        keep_journals: bool,
        now: Timestamp,
    ) -> Result<Option<Pruned>> {
        let at = |e| failed(&self.path, "prune", e);
        let tx = immediate(&mut self.conn, &self.path)?;
        tx.execute_batch(
            "CREATE TEMP TABLE IF NOT EXISTS prune_keys (key TEXT PRIMARY KEY);
             DELETE FROM prune_keys;",
        )
        .map_err(at)?;
        let runs = tx
            .execute(
                "INSERT INTO prune_keys (key) SELECT key FROM runs
                 WHERE state = 'DONE' AND pruned_at IS NULL AND window_end <= ?1
                   AND (?2 IS NULL OR job = ?2)
                 LIMIT ?3",
                params![secs(before), job, PRUNE_BATCH],
            )
            .map_err(at)?;
        if runs == 0 {
            return Ok(None);
        }
        let (journal_bytes, body_bytes): (Option<i64>, Option<i64>) = tx
            .query_row(
                "SELECT (SELECT sum(length(journal)) FROM runs WHERE key IN prune_keys AND ?1 = 0),
                    (SELECT sum(length(body)) FROM outbox
                     WHERE key IN prune_keys AND state = 'DELIVERED')",
                [keep_journals],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(at)?;
        tx.execute(
            "UPDATE runs SET pruned_at = ?1, journal = CASE WHEN ?2 THEN journal ELSE NULL END
             WHERE key IN prune_keys",
            params![secs(now), keep_journals],
        )
        .map_err(at)?;
        tx.execute(
            "UPDATE outbox SET body = x'' WHERE key IN prune_keys AND state = 'DELIVERED'",
            [],
        )
        .map_err(at)?;
        tx.execute_batch("DELETE FROM prune_keys").map_err(at)?;
        tx.commit().map_err(at)?;
        Ok(Some(Pruned {
            runs: runs as u64,
            journal_bytes: journal_bytes.unwrap_or(0).unsigned_abs(),
            body_bytes: body_bytes.unwrap_or(0).unsigned_abs(),
        }))
    }

    /// One batch of [`Ledger::prune`] over archived revisions (which never
    /// run again); `None` when nothing was left to prune.
    fn prune_revisions(
        &mut self,
        job: Option<&str>,
        before: Timestamp,
        keep_journals: bool,
        now: Timestamp,
    ) -> Result<Option<Pruned>> {
        let at = |e| failed(&self.path, "prune", e);
        let tx = immediate(&mut self.conn, &self.path)?;
        tx.execute_batch(
            "CREATE TEMP TABLE IF NOT EXISTS prune_revs
                (key TEXT NOT NULL, revision INTEGER NOT NULL, PRIMARY KEY (key, revision));
             DELETE FROM prune_revs;",
        )
        .map_err(at)?;
        let runs = tx
            .execute(
                "INSERT INTO prune_revs (key, revision) SELECT key, revision FROM revisions
                 WHERE pruned_at IS NULL AND window_end <= ?1 AND (?2 IS NULL OR job = ?2)
                 LIMIT ?3",
                params![secs(before), job, PRUNE_BATCH],
            )
            .map_err(at)?;
        if runs == 0 {
            return Ok(None);
        }
        let (journal_bytes, body_bytes): (Option<i64>, Option<i64>) = tx
            .query_row(
                "SELECT (SELECT sum(length(v.journal)) FROM revisions v JOIN prune_revs p
                        ON p.key = v.key AND p.revision = v.revision WHERE ?1 = 0),
                    (SELECT sum(length(m.body)) FROM revision_messages m JOIN prune_revs p
                        ON p.key = m.key AND p.revision = m.revision
                     WHERE m.state = 'DELIVERED')",
                [keep_journals],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(at)?;
        tx.execute(
            "UPDATE revision_messages SET body = x''
             WHERE state = 'DELIVERED' AND (key, revision) IN (SELECT key, revision FROM prune_revs)",
            [],
        )
        .map_err(at)?;
        tx.execute(
            "UPDATE revisions SET pruned_at = ?1, journal = CASE WHEN ?2 THEN journal ELSE NULL END
             WHERE (key, revision) IN (SELECT key, revision FROM prune_revs)",
            params![secs(now), keep_journals],
        )
        .map_err(at)?;
        tx.execute_batch("DELETE FROM prune_revs").map_err(at)?;
        tx.commit().map_err(at)?;
        Ok(Some(Pruned {
            runs: runs as u64,
            journal_bytes: journal_bytes.unwrap_or(0).unsigned_abs(),
            body_bytes: body_bytes.unwrap_or(0).unsigned_abs(),
        }))
    }

    /// The runs matching `condition` (over `runs r`), newest window first.
    fn runs_where(
        &mut self,
        condition: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<RunRecord>> {
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE {condition}
             ORDER BY r.window_start DESC, r.key",
            self.run_columns()
        );
        let mut stmt = self
            .conn
            .prepare(&sql)
            .map_err(|e| failed(&self.path, "read history", e))?;
        let rows = stmt
            .query_map(args, run_record)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        rows.map_err(|e| failed(&self.path, "read history", e))
    }
}

/// `BEGIN IMMEDIATE`, waiting at most `wait` for another process's write
/// lock.
fn begin_immediate(
    conn: &mut Connection,
    wait: Duration,
) -> rusqlite::Result<rusqlite::Transaction<'_>> {
    conn.busy_timeout(wait)?;
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// A write transaction on the store, which waits at most [`BUSY_TIMEOUT`]
/// for another process's write lock.
fn immediate<'c>(conn: &'c mut Connection, path: &Path) -> Result<rusqlite::Transaction<'c>> {
    begin_immediate(conn, BUSY_TIMEOUT).map_err(|e| {
        if is_busy(&e) {
            Error::Store(format!(
                "cannot lock store `{}`: another process held its write lock for more than \
                     {} s (a process paused or stuck in the middle of a write); nothing was \
                     written, and a later invocation tries again",
                path.display(),
                BUSY_TIMEOUT.as_secs()
            ))
        } else {
            failed(path, "lock the store", e)
        }
    })
}

/// A failed statement, as a person reads it: what was attempted, in which
/// store, and why. A full disk and a store that became read-only are said
/// in those words, with the fix.
fn failed(path: &Path, what: &str, e: rusqlite::Error) -> Error {
    let why = cause(path, &e).unwrap_or_else(|| e.to_string());
    Error::Store(format!(
        "cannot {what} in store `{}`: {why}",
        path.display()
    ))
}

/// What a full disk or a read-only store mean for the store at `path`, when
/// `e` is one of them.
fn cause(path: &Path, e: &rusqlite::Error) -> Option<String> {
    let rusqlite::Error::SqliteFailure(f, _) = e else {
        return None;
    };
    let folder = store_folder(path);
    let full = f.code == ErrorCode::DiskFull
        || (f.code == ErrorCode::SystemIoFailure && super::durable::no_space_left(&folder));
    if full {
        return Some(format!(
            "no space left on device (the filesystem of `{}` is full); nothing was written: \
             free space there, or move the store, and run again",
            folder.display()
        ));
    }
    (f.code == ErrorCode::ReadOnly).then(|| {
        format!(
            "the store is read-only ({e}); jobhost writes every claim there: make the file and \
             its folder `{}` writable for this user, or choose another --store",
            folder.display()
        )
    })
}

/// The folder a store file lives in (where SQLite keeps its `-wal` and
/// `-shm` files too).
fn store_folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Refuses a non-empty database without a jobhost schema version, and
/// returns the schema version.
fn refuse_foreign(conn: &Connection, path: &Path) -> Result<Schema> {
    let (version, tables, has_runs, journal): (i64, i64, bool, String) = conn
        .query_row(
            "SELECT p.user_version, (SELECT count(*) FROM sqlite_schema),
                    EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'runs'),
                    j.journal_mode
             FROM pragma_user_version p, pragma_journal_mode j",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .map_err(|e| open_error(path, e))?;
    if (version == 0 && tables > 0) || (version > 0 && !has_runs) {
        return Err(Error::input(format!(
            "`{}` is a SQLite database but not a jobhost store; point --store at a \
             jobhost store or a new path",
            path.display()
        )));
    }
    Ok(Schema {
        version,
        wal: journal.eq_ignore_ascii_case("wal"),
    })
}

/// What opening a store needs to know of its schema.
struct Schema {
    version: i64,
    wal: bool,
}

/// Refuses a store written by a newer jobhost.
fn check_version(path: &Path, version: i64) -> Result<()> {
    let latest = MIGRATIONS.len() as i64;
    if version > latest {
        return Err(Error::input(format!(
            "store `{}` has schema version {version}, newer than this jobhost \
             understands ({latest}); upgrade jobhost",
            path.display()
        )));
    }
    Ok(())
}

/// True for SQLITE_BUSY and SQLITE_LOCKED.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK =>
        {
            Error::input(format!(
                "store `{}` was left half-written by a process that died in the middle of a \
                 write (its rollback journal is still there); the next `jobhost run` or `jobhost \
                 daemon` with it repairs it, after which it reads again",
                path.display()
            ))
        }
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::NotADatabase => {
            Error::input(format!(
                "store `{}` is not a SQLite database; point --store at a jobhost store or a new path",
                path.display()
            ))
        }
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly
            ) =>
        {
            Error::input(format!("cannot open store `{}`: {e}", path.display()))
        }
        _ => Error::Store(format!(
            "cannot open store `{}`: {}",
            path.display(),
            cause(path, &e).unwrap_or_else(|| e.to_string())
        )),
    }
}

fn secs(ts: Timestamp) -> i64 {
    ts.as_second()
}

/// An instant read back from the store; out-of-range values are a damaged
/// store, reported as such rather than replaced by a default.
fn stored_instant(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Timestamp> {
    let s: i64 = r.get(i)?;
    Timestamp::from_second(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Integer, e.into())
    })
}

/// A run state read back from the store.
fn stored_state(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<RunState> {
    let state: String = r.get(i)?;
    RunState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            format!("unknown run state `{state}`").into(),
        )
    })
}

macro_rules! run_columns {
    ($rest:literal) => {
        concat!(
            "r.key, r.job, r.window_start, r.window_end, r.timezone, r.state, \
             r.fence, r.attempt, r.owner, r.lease_expires_at, r.component, r.report, \
             r.report_cursor, r.error, r.created_at, r.updated_at, r.retry_at, length(r.journal), \
             (SELECT count(*) FROM outbox o WHERE o.key = r.key), \
             (SELECT count(*) FROM outbox o WHERE o.key = r.key AND o.state = 'DELIVERED'), \
             r.digest_prompt, d.key IS NOT NULL, d.cache_key, d.model, d.error, d.sent_at, \
             d.updated_at, r.described, ",
            $rest
        )
    };
}

/// What [`run_record`] reads, over [`RUN_TABLES`].
const RUN_COLUMNS: &str = run_columns!("r.revision, r.reason, r.pruned_at");

/// [`RUN_COLUMNS`] of a store of the previous schema, which has no
/// revisions and was never pruned.
const RUN_COLUMNS_PREVIOUS: &str = run_columns!("1, NULL, NULL");

/// The tables [`RUN_COLUMNS`] reads.
const RUN_TABLES: &str = "runs r LEFT JOIN digests d ON d.key = r.key";

fn run_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    let report: Option<String> = r.get(11)?;
    Ok(RunRecord {
        key: WindowKey::from_stored(r.get(0)?),
        job: r.get(1)?,
        window_start: stored_instant(r, 2)?,
        window_end: stored_instant(r, 3)?,
        timezone: r.get(4)?,
        state: stored_state(r, 5)?,
        fence: Fence(r.get(6)?),
        attempt: r.get(7)?,
        owner: r.get(8)?,
        lease_until: stored_instant(r, 9)?,
        component: r.get(10)?,
        report: match report {
            Some(summary) => Some(StoredReport {
                summary,
                cursor: r.get(12)?,
                prompt: r.get(20)?,
                described: r.get(27)?,
            }),
            None => None,
        },
        error: r.get(13)?,
        created_at: stored_instant(r, 14)?,
        updated_at: stored_instant(r, 15)?,
        retry_at: match r.get::<_, Option<i64>>(16)? {
            Some(_) => Some(stored_instant(r, 16)?),
            None => None,
        },
        journal_bytes: r.get::<_, Option<i64>>(17)?.map(|n| n.unsigned_abs()),
        messages: r.get(18)?,
        delivered: r.get(19)?,
        digest: if r.get::<_, bool>(21)? {
            Some(DigestRecord {
                cache_key: r.get(22)?,
                model: r.get(23)?,
                error: r.get(24)?,
                sent_at: match r.get::<_, Option<i64>>(25)? {
                    Some(_) => Some(stored_instant(r, 25)?),
                    None => None,
                },
                updated_at: stored_instant(r, 26)?,
            })
        } else {
            None
        },
        revision: r.get(28)?,
        reason: r.get(29)?,
        pruned_at: match r.get::<_, Option<i64>>(30)? {
            Some(_) => Some(stored_instant(r, 30)?),
            None => None,
        },
    })
}

/// Fails with `LeaseLost` when a fenced write touched no row.
fn fenced(changed: usize, lease: &Lease) -> Result<()> {
    super::fenced(changed as u64, lease)
}

/// `now + d` on the host's lease clock, in the store's whole seconds.
fn secs_after(now: Timestamp, d: Duration) -> i64 {
    secs(crate::core::clock::after(now, d))
}

impl ClaimStore for SqliteStore {
    fn created(&self) -> bool {
        self.created
    }

    fn claim(&mut self, req: &ClaimRequest<'_>) -> Result<Claim> {
        let key = req.window.key();
        let now = secs(req.now);
        let until = secs_after(req.now, req.lease);
        // The write lock is the whole store's: a process holding it longer
        // than any write takes is paused or stuck mid-write, and the window
        // is answered busy rather than failed.
        let tx = match begin_immediate(&mut self.conn, BUSY_TIMEOUT) {
            Ok(tx) => tx,
            Err(e) if is_busy(&e) => {
                return Ok(Claim::Locked {
                    held: super::Held::Store,
                    waited: BUSY_TIMEOUT,
                });
            }
            Err(e) => return Err(failed(&self.path, "lock the store", e)),
        };
        // A paused job claims nothing, on every host sharing the store.
        let paused = tx
            .query_row(
                "SELECT note, actor, since FROM pauses WHERE job = ?1",
                [req.window.job.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?, stored_instant(r, 2)?)),
            )
            .optional()
            .map_err(|e| failed(&self.path, "read the job's pause", e))?;
        if let Some((note, by, since)) = paused {
            return Ok(Claim::Paused { note, by, since });
        }
        let process = req.probe.record(req.owner);
        let existing = tx
            .query_row(
                "SELECT state, fence, attempt, owner, lease_expires_at, error, retryable,
                    window_start, window_end, timezone, retry_at, revision, report IS NOT NULL,
                    owner_process
                 FROM runs WHERE key = ?1",
                [key.as_str()],
                |r| {
                    let expires: i64 = r.get(4)?;
                    let retry_at: Option<i64> = r.get(10)?;
                    Ok(Existing {
                        state: stored_state(r, 0)?,
                        fence: r.get(1)?,
                        attempt: r.get(2)?,
                        owner: r.get(3)?,
                        owner_process: r.get(13)?,
                        lease_until: stored_instant(r, 4)?,
                        lease_live: expires > now,
                        error: r.get(5)?,
                        retryable: r.get(6)?,
                        retry_pending: match retry_at {
                            Some(at) if at > now => Some(stored_instant(r, 10)?),
                            _ => None,
                        },
                        bounds: (stored_instant(r, 7)?, stored_instant(r, 8)?, r.get(9)?),
                        revision: r.get(11)?,
                        has_report: r.get(12)?,
                    })
                },
            )
            .optional()
            .map_err(|e| failed(&self.path, "read the claim", e))?;
        let claim = match existing {
            None => {
                // A forgotten window goes on from its fence and revision.
                let (revision, fence): (u32, i64) = tx
                    .query_row(
                        "INSERT INTO runs (key, job, window_start, window_end, timezone, state,
                            fence, owner, lease_expires_at, attempt, component, created_at,
                            updated_at, revision, owner_process)
                         VALUES (?1, ?2, ?3, ?4, ?5, 'CLAIMED',
                            coalesce((SELECT next_fence FROM forgotten WHERE key = ?1), 1),
                            ?6, ?7, 1, ?8, ?9, ?9,
                            coalesce((SELECT next_revision FROM forgotten WHERE key = ?1), 1),
                            ?10)
                         RETURNING revision, fence",
                        params![
                            key.as_str(),
                            req.window.job.as_str(),
                            secs(req.window.start),
                            secs(req.window.end),
                            req.window.zone.name(),
                            req.owner,
                            until,
                            req.component,
                            now,
                            process
                        ],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map_err(|e| failed(&self.path, "insert the claim", e))?;
                Claim::Run {
                    lease: Lease {
                        key: key.clone(),
                        fence: Fence(fence),
                        owner: req.owner.to_string(),
                        attempt: 1,
                        revision,
                        taken_from: None,
                    },
                    takeover: false,
                }
            }
            Some(existing) => {
                let decision = decide(&existing, req)?;
                match &decision {
                    Decision::Answer(_) => {}
                    Decision::Abandon(why) => {
                        tx.execute(
                            "UPDATE runs SET state = 'ABANDONED', error = ?3, updated_at = ?4
                             WHERE key = ?1 AND fence = ?2",
                            params![key.as_str(), existing.fence, why, now],
                        )
                        .map_err(|e| failed(&self.path, "abandon the claim", e))?;
                    }
                    Decision::TakeOver { .. } => {
                        take_over(
                            &tx,
                            &self.path,
                            &key,
                            req,
                            existing.fence,
                            existing.attempt + 1,
                            process.as_deref(),
                        )?;
                    }
                    Decision::Restart { .. } => {
                        restart(&tx, &self.path, &key, req, &existing, process.as_deref())?;
                    }
                    Decision::Rerun => {
                        rerun(&tx, &self.path, &key, req, &existing, process.as_deref())?;
                    }
                }
                decided(decision, req, &existing)
            }
        };
        tx.commit()
            .map_err(|e| failed(&self.path, "commit the claim", e))?;
        Ok(claim)
    }

    fn prepare(
        &mut self,
        lease: &Lease,
        report: &StoredReport,
        messages: &[StagedMessage],
        journal: &[u8],
        now: Timestamp,
    ) -> Result<()> {
        let tx = immediate(&mut self.conn, &self.path)?;
        let changed = tx
            .execute(
                "UPDATE runs SET state = 'PREPARED', report = ?3, report_cursor = ?4,
                    journal = ?6, digest_prompt = ?7, described = ?8, error = NULL,
                    updated_at = ?5
                 WHERE key = ?1 AND fence = ?2 AND state = 'CLAIMED'",
                params![
                    lease.key.as_str(),
                    lease.fence.0,
                    report.summary,
                    report.cursor,
                    secs(now),
                    journal,
                    report.prompt,
                    report.described
                ],
            )
            .map_err(|e| failed(&self.path, "commit the report", e))?;
        fenced(changed, lease)?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO outbox (key, seq, destination, idempotency_key, content_type,
                        body, state, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'PENDING', ?7)",
                )
                .map_err(|e| failed(&self.path, "stage messages", e))?;
            for m in messages {
                insert
                    .execute(params![
                        lease.key.as_str(),
                        m.seq,
                        m.destination,
                        m.idempotency_key,
                        m.content_type,
                        m.body,
                        secs(now)
                    ])
                    .map_err(|e| failed(&self.path, "stage messages", e))?;
            }
        }
        if let Some(f) = &self.failpoints {
            f.reached(Boundary::InPrepare);
        }
        tx.commit()
            .map_err(|e| failed(&self.path, "commit the report", e))
    }

    fn pending_messages(&mut self, key: &WindowKey) -> Result<Vec<PendingMessage>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, destination, idempotency_key, content_type, body, attempts, in_flight
                 FROM outbox WHERE key = ?1 AND state = 'PENDING' ORDER BY seq",
            )
            .map_err(|e| failed(&self.path, "read staged messages", e))?;
        let rows = stmt
            .query_map([key.as_str()], |r| {
                Ok(PendingMessage {
                    message: StagedMessage {
                        seq: r.get(0)?,
                        destination: r.get(1)?,
                        idempotency_key: r.get(2)?,
                        content_type: r.get(3)?,
                        body: r.get(4)?,
                    },
                    attempts: r.get(5)?,
                    in_flight: r.get(6)?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| failed(&self.path, "read staged messages", e))?;
        Ok(rows)
    }

    fn report(&mut self, key: &WindowKey) -> Result<Option<StoredReport>> {
        self.conn
            .query_row(
                "SELECT report, report_cursor, digest_prompt, described FROM runs
                 WHERE key = ?1 AND report IS NOT NULL",
                [key.as_str()],
                |r| {
                    Ok(StoredReport {
                        summary: r.get(0)?,
                        cursor: r.get(1)?,
                        prompt: r.get(2)?,
                        described: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(|e| failed(&self.path, "read the report", e))
    }

    fn check_lease(&mut self, lease: &Lease, now: Timestamp) -> Result<SignedDuration> {
        let expires: Option<i64> = self
            .conn
            .query_row(
                "SELECT lease_expires_at FROM runs
                 WHERE key = ?1 AND fence = ?2 AND state = 'PREPARED'",
                params![lease.key.as_str(), lease.fence.0],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| failed(&self.path, "check the claim", e))?;
        match expires {
            Some(s) => Ok(SignedDuration::from_secs(s.saturating_sub(secs(now)))),
            None => Err(super::lease_lost(lease)),
        }
    }

    fn renew(
        &mut self,
        lease: &Lease,
        for_: Duration,
        in_flight: Option<u32>,
        now: Timestamp,
    ) -> Result<()> {
        let until = secs_after(now, for_);
        let tx = immediate(&mut self.conn, &self.path)?;
        let changed = tx
            .execute(
                "UPDATE runs SET lease_expires_at = max(lease_expires_at, ?3), updated_at = ?4
                 WHERE key = ?1 AND fence = ?2 AND state = 'PREPARED'",
                params![lease.key.as_str(), lease.fence.0, until, secs(now)],
            )
            .map_err(|e| failed(&self.path, "renew the claim", e))?;
        fenced(changed, lease)?;
        if let Some(seq) = in_flight {
            tx.execute(
                "UPDATE outbox SET in_flight = 1, attempts = attempts + 1, updated_at = ?3
                 WHERE key = ?1 AND seq = ?2 AND state = 'PENDING'",
                params![lease.key.as_str(), seq, secs(now)],
            )
            .map_err(|e| failed(&self.path, "record a send", e))?;
        }
        tx.commit()
            .map_err(|e| failed(&self.path, "renew the claim", e))
    }

    fn not_sent(&mut self, lease: &Lease, seq: u32, status: &str, now: Timestamp) -> Result<()> {
        let tx = immediate(&mut self.conn, &self.path)?;
        still_delivering(&tx, &self.path, lease, now)?;
        tx.execute(
            "UPDATE outbox SET in_flight = 0, last_status = ?3, updated_at = ?4
             WHERE key = ?1 AND seq = ?2 AND state = 'PENDING'",
            params![lease.key.as_str(), seq, status, secs(now)],
        )
        .map_err(|e| failed(&self.path, "record a send", e))?;
        tx.commit()
            .map_err(|e| failed(&self.path, "record a send", e))
    }

    fn mark_delivered(
        &mut self,
        lease: &Lease,
        done: &Attempted<'_>,
        now: Timestamp,
    ) -> Result<()> {
        let tx = immediate(&mut self.conn, &self.path)?;
        record_delivery(&tx, &self.path, lease, done, now)?;
        tx.commit()
            .map_err(|e| failed(&self.path, "record a delivery", e))
    }

    fn finish(
        &mut self,
        lease: &Lease,
        last_delivery: Option<&Attempted<'_>>,
        now: Timestamp,
    ) -> Result<()> {
        let tx = immediate(&mut self.conn, &self.path)?;
        if let Some(done) = last_delivery {
            record_delivery(&tx, &self.path, lease, done, now)?;
        }
        let changed = tx
            .execute(
                "UPDATE runs SET state = 'DONE', error = NULL, retry_at = NULL, updated_at = ?3
                 WHERE key = ?1 AND fence = ?2 AND state = 'PREPARED'
                   AND NOT EXISTS (SELECT 1 FROM outbox
                                   WHERE outbox.key = ?1 AND outbox.state <> 'DELIVERED')",
                params![lease.key.as_str(), lease.fence.0, secs(now)],
            )
            .map_err(|e| failed(&self.path, "mark the run done", e))?;
        if changed == 0 {
            let still_ours = tx
                .query_row(
                    "SELECT 1 FROM runs WHERE key = ?1 AND fence = ?2 AND state = 'PREPARED'",
                    params![lease.key.as_str(), lease.fence.0],
                    |_| Ok(()),
                )
                .optional()
                .map_err(|e| failed(&self.path, "mark the run done", e))?;
            if still_ours.is_some() {
                return Err(super::undelivered(lease));
            }
        }
        fenced(changed, lease)?;
        // The cursor moves only with DONE, and never backwards: a late
        // catch-up of an older window keeps the newer window's cursor.
        tx.execute(
            "INSERT INTO cursors (job, cursor, key, window_end, updated_at)
             SELECT job, report_cursor, key, window_end, ?2 FROM runs
             WHERE key = ?1 AND report_cursor IS NOT NULL
             ON CONFLICT (job) DO UPDATE SET cursor = excluded.cursor, key = excluded.key,
                window_end = excluded.window_end, updated_at = excluded.updated_at
             WHERE excluded.window_end >= cursors.window_end",
            params![lease.key.as_str(), secs(now)],
        )
        .map_err(|e| failed(&self.path, "move the cursor", e))?;
        tx.commit()
            .map_err(|e| failed(&self.path, "mark the run done", e))
    }

    fn fail(
        &mut self,
        lease: &Lease,
        error: &str,
        how: Failure,
        message: Option<&Attempted<'_>>,
        now: Timestamp,
    ) -> Result<()> {
        let tx = immediate(&mut self.conn, &self.path)?;
        // A PREPARED run that will be retried keeps its state (its report
        // and messages are committed) and only lets its lease go.
        let t = how.transition();
        let retry_at = t.retry_after.map(|after| secs_after(now, after));
        let run_state = t.run_state.map(RunState::as_str);
        let message_state = t.message_state;
        let uncounted = i64::from(!t.counted);
        let changed = tx
            .execute(
                "UPDATE runs SET
                    state = coalesce(?3, CASE state WHEN 'CLAIMED' THEN 'FAILED' ELSE state END),
                    retryable = ?4, retry_at = ?5, error = ?6, updated_at = ?7,
                    lease_expires_at = min(lease_expires_at, ?7),
                    attempt = max(attempt - ?8, 0)
                 WHERE key = ?1 AND fence = ?2 AND state IN ('CLAIMED', 'PREPARED')",
                params![
                    lease.key.as_str(),
                    lease.fence.0,
                    run_state,
                    retry_at.is_some(),
                    retry_at,
                    error,
                    secs(now),
                    uncounted
                ],
            )
            .map_err(|e| failed(&self.path, "record the failure", e))?;
        fenced(changed, lease)?;
        if let Some(m) = message {
            tx.execute(
                "UPDATE outbox SET state = ?3, in_flight = 0, attempts = attempts + ?4,
                    last_status = ?5, updated_at = ?6
                 WHERE key = ?1 AND seq = ?2 AND state = 'PENDING'",
                params![
                    lease.key.as_str(),
                    m.seq,
                    message_state,
                    m.tries,
                    m.status,
                    secs(now)
                ],
            )
            .map_err(|e| failed(&self.path, "record the failed delivery", e))?;
        }
        tx.commit()
            .map_err(|e| failed(&self.path, "record the failure", e))
    }

    fn cursor(&mut self, job: &JobName) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT cursor FROM cursors WHERE job = ?1",
                [job.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| failed(&self.path, "read the cursor", e))
    }
}

impl Ledger for SqliteStore {
    fn peek(&mut self, key: &WindowKey) -> Result<Option<RunRecord>> {
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE r.key = ?1",
            self.run_columns()
        );
        self.conn
            .query_row(&sql, [key.as_str()], run_record)
            .optional()
            .map_err(|e| failed(&self.path, "read a run", e))
    }

    fn messages(&mut self, key: &WindowKey) -> Result<Vec<StagedMessage>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, destination, idempotency_key, content_type, body
                 FROM outbox WHERE key = ?1 ORDER BY seq",
            )
            .map_err(|e| failed(&self.path, "read staged messages", e))?;
        stmt.query_map([key.as_str()], |r| {
            Ok(StagedMessage {
                seq: r.get(0)?,
                destination: r.get(1)?,
                idempotency_key: r.get(2)?,
                content_type: r.get(3)?,
                body: r.get(4)?,
            })
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(|e| failed(&self.path, "read staged messages", e))
    }

    fn journal(&mut self, key: &WindowKey) -> Result<Option<Vec<u8>>> {
        self.conn
            .query_row(
                "SELECT journal FROM runs WHERE key = ?1",
                [key.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| failed(&self.path, "read the journal", e))
    }

    fn jobs(&mut self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT job FROM runs ORDER BY job")
            .map_err(|e| failed(&self.path, "list the jobs", e))?;
        let rows = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>());
        rows.map_err(|e| failed(&self.path, "list the jobs", e))
    }

    fn history(&mut self, job: Option<&str>) -> Result<Vec<RunRecord>> {
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE ?1 IS NULL OR r.job = ?1
             ORDER BY r.window_start DESC, r.key",
            self.run_columns()
        );
        let mut stmt = self
            .conn
            .prepare(&sql)
            .map_err(|e| failed(&self.path, "read history", e))?;
        let rows = stmt
            .query_map([job], run_record)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        rows.map_err(|e| failed(&self.path, "read history", e))
    }

    fn history_from(&mut self, job: &str, from: Option<Timestamp>) -> Result<Vec<RunRecord>> {
        match from {
            Some(t) => {
                self.runs_where("r.job = ?1 AND r.window_start >= ?2", params![job, secs(t)])
            }
            None => self.runs_where("r.job = ?1", params![job]),
        }
    }

    fn runs_in_range(&mut self, q: &RangeQuery<'_>) -> Result<Vec<RunRecord>> {
        let sql = self.range_sql(q);
        let from = q.from.map_or(i64::MIN, secs);
        let until = q.until.map_or(i64::MAX, secs);
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(|e| failed(&self.path, "read history", e))?;
        let rows = stmt
            .query_map(params![q.job, from, until, limit], run_record)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>());
        rows.map_err(|e| failed(&self.path, "read history", e))
    }

    fn state_counts(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<Vec<(RunState, u64)>> {
        let fail = |e| failed(&self.path, "count windows", e);
        let whole = from.is_none() && until.is_none();
        let from = from.map_or(i64::MIN, secs);
        let until = until.map_or(i64::MAX, secs);
        let range = "job = ?1 AND window_start >= ?2 AND window_start < ?3";
        // The whole history's counts are kept as it changes; a range's are
        // counted over the index.
        let (sql, args): (String, Vec<&dyn rusqlite::ToSql>) = if self.version < COUNTED_SCHEMA {
            (
                format!("SELECT state, count(*) FROM runs WHERE {range} GROUP BY state"),
                vec![&job, &from, &until],
            )
        } else if whole {
            (
                "SELECT state, n FROM run_counts WHERE job = ?1 AND n > 0".to_string(),
                vec![&job],
            )
        } else {
            (
                RunState::counts_sql("runs", range),
                vec![&job, &from, &until],
            )
        };
        let mut stmt = self.conn.prepare_cached(&sql).map_err(fail)?;
        let rows = stmt
            .query_map(args.as_slice(), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(fail)?;
        Ok(rows
            .into_iter()
            .filter_map(|(s, n)| Some((RunState::parse(&s)?, u64::try_from(n).unwrap_or(0))))
            .collect())
    }

    fn unfinished(&mut self, job: &str) -> Result<Vec<RunRecord>> {
        self.runs_where(
            "r.job = ?1 AND (r.state IN ('CLAIMED', 'PREPARED')
                OR (r.state = 'FAILED' AND r.retry_at IS NOT NULL))",
            params![job],
        )
    }

    fn record_skips(
        &mut self,
        skips: &[Skip<'_>],
        owner: &str,
        now: Timestamp,
    ) -> Result<Vec<bool>> {
        if skips.is_empty() {
            return Ok(Vec::new());
        }
        let now = secs(now);
        let tx = immediate(&mut self.conn, &self.path)?;
        let mut recorded = Vec::with_capacity(skips.len());
        {
            // Only a row already there is passed over; any other violation
            // is an error (`INSERT OR IGNORE` would hide it).
            let mut insert = tx
                .prepare(
                    "INSERT INTO runs (key, job, window_start, window_end, timezone, state,
                        fence, owner, lease_expires_at, attempt, component, error,
                        created_at, updated_at, revision)
                     VALUES (?1, ?2, ?3, ?4, ?5, 'SKIPPED',
                        coalesce((SELECT next_fence - 1 FROM forgotten WHERE key = ?1), 0),
                        ?6, ?7, 0, '', ?8, ?7, ?7,
                        coalesce((SELECT next_revision FROM forgotten WHERE key = ?1), 1))
                     ON CONFLICT (key) DO NOTHING",
                )
                .map_err(|e| failed(&self.path, "record skipped windows", e))?;
            for skip in skips {
                let w = skip.window;
                let n = insert
                    .execute(params![
                        w.key().as_str(),
                        w.job.as_str(),
                        secs(w.start),
                        secs(w.end),
                        w.zone.name(),
                        owner,
                        now,
                        skip.reason
                    ])
                    .map_err(|e| failed(&self.path, "record a skipped window", e))?;
                recorded.push(n == 1);
            }
        }
        tx.commit()
            .map_err(|e| failed(&self.path, "record skipped windows", e))?;
        Ok(recorded)
    }

    fn decided_until(&mut self, job: &JobName) -> Result<Option<Timestamp>> {
        self.conn
            .query_row(
                "SELECT decided_until FROM schedule WHERE job = ?1",
                [job.as_str()],
                |r| stored_instant(r, 0),
            )
            .optional()
            .map_err(|e| failed(&self.path, "read the schedule", e))
    }

    fn set_decided_until(&mut self, job: &JobName, until: Timestamp, now: Timestamp) -> Result<()> {
        self.write_one(
            "record the schedule",
            // Never past a forgotten window that has no row again: it is
            // still to be decided, whatever a plan read before the forget.
            "INSERT INTO schedule (job, decided_until, updated_at)
             VALUES (?1, min(?2, coalesce((SELECT min(f.window_start) FROM forgotten f
                 WHERE f.job = ?1 AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.key = f.key)), ?2)),
                 ?3)
             ON CONFLICT (job) DO UPDATE SET
                decided_until = max(decided_until, excluded.decided_until),
                updated_at = excluded.updated_at",
            params![job.as_str(), secs(until), secs(now)],
        )
        .map(drop)
    }

    fn record_digest(
        &mut self,
        key: &WindowKey,
        note: &DigestNote<'_>,
        now: Timestamp,
    ) -> Result<()> {
        let changed = self.write_one(
            "record the digest",
            "INSERT INTO digests (key, cache_key, model, error, updated_at)
             SELECT key, ?2, ?3, ?4, ?5 FROM runs WHERE key = ?1
             ON CONFLICT (key) DO UPDATE SET cache_key = coalesce(excluded.cache_key, cache_key),
                model = excluded.model, error = excluded.error,
                updated_at = excluded.updated_at",
            params![
                key.as_str(),
                note.cache_key,
                note.model,
                note.error,
                secs(now)
            ],
        )?;
        match changed {
            0 => Err(super::no_such_run(key)),
            _ => Ok(()),
        }
    }

    fn digest_sent(&mut self, key: &WindowKey, now: Timestamp) -> Result<()> {
        let changed = self.write_one(
            "record the digest message",
            "INSERT INTO digests (key, sent_at, updated_at)
             SELECT key, ?2, ?2 FROM runs WHERE key = ?1
             ON CONFLICT (key) DO UPDATE SET sent_at = excluded.sent_at,
                updated_at = excluded.updated_at",
            params![key.as_str(), secs(now)],
        )?;
        match changed {
            0 => Err(super::no_such_run(key)),
            _ => Ok(()),
        }
    }

    fn cursor_before(&mut self, job: &JobName, start: Timestamp) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT report_cursor FROM runs
                 WHERE job = ?1 AND state = 'DONE' AND window_end <= ?2
                 ORDER BY window_end DESC LIMIT 1",
                params![job.as_str(), secs(start)],
                |r| r.get(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| failed(&self.path, "read the cursor", e))
    }

    fn message_records(&mut self, key: &WindowKey) -> Result<Vec<MessageRecord>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, destination, idempotency_key, content_type, length(body), state,
                    attempts, last_status, in_flight
                 FROM outbox WHERE key = ?1 ORDER BY seq",
            )
            .map_err(|e| failed(&self.path, "read messages", e))?;
        stmt.query_map([key.as_str()], message_record)
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| failed(&self.path, "read messages", e))
    }

    fn revisions(&mut self, key: &WindowKey) -> Result<Vec<Revision>> {
        if !self.current() {
            return Ok(Vec::new());
        }
        let at = |e| failed(&self.path, "read revisions", e);
        let mut revisions = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT revision, state, fence, attempt, owner, component, report,
                        report_cursor, digest_prompt, described, error, reason, length(journal),
                        created_at, updated_at, pruned_at
                     FROM revisions WHERE key = ?1 ORDER BY revision",
                )
                .map_err(at)?;
            stmt.query_map([key.as_str()], |r| {
                let report: Option<String> = r.get(6)?;
                Ok(Revision {
                    revision: r.get(0)?,
                    state: stored_state(r, 1)?,
                    fence: Fence(r.get(2)?),
                    attempt: r.get(3)?,
                    owner: r.get(4)?,
                    component: r.get(5)?,
                    report: match report {
                        Some(summary) => Some(StoredReport {
                            summary,
                            cursor: r.get(7)?,
                            prompt: r.get(8)?,
                            described: r.get(9)?,
                        }),
                        None => None,
                    },
                    error: r.get(10)?,
                    reason: r.get(11)?,
                    journal_bytes: r.get::<_, Option<i64>>(12)?.map(|n| n.unsigned_abs()),
                    created_at: stored_instant(r, 13)?,
                    updated_at: stored_instant(r, 14)?,
                    pruned_at: match r.get::<_, Option<i64>>(15)? {
                        Some(_) => Some(stored_instant(r, 15)?),
                        None => None,
                    },
                    messages: Vec::new(),
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(at)?
        };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT seq, destination, idempotency_key, content_type, length(body), state,
                    attempts, last_status, in_flight, revision
                 FROM revision_messages WHERE key = ?1 ORDER BY revision, seq",
            )
            .map_err(at)?;
        let messages = stmt
            .query_map([key.as_str()], |r| {
                Ok((r.get::<_, u32>(9)?, message_record(r)?))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(at)?;
        for (revision, m) in messages {
            if let Some(r) = revisions.iter_mut().find(|r| r.revision == revision) {
                r.messages.push(m);
            }
        }
        Ok(revisions)
    }

    fn archived(&mut self, key: &WindowKey, revision: u32) -> Result<Option<Archived>> {
        if !self.current() {
            return Ok(None);
        }
        let at = |e| failed(&self.path, "read a revision", e);
        let journal: Option<Option<Vec<u8>>> = self
            .conn
            .query_row(
                "SELECT journal FROM revisions WHERE key = ?1 AND revision = ?2",
                params![key.as_str(), revision],
                |r| r.get(0),
            )
            .optional()
            .map_err(at)?;
        let Some(journal) = journal else {
            return Ok(None);
        };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT seq, destination, idempotency_key, content_type, body
                 FROM revision_messages WHERE key = ?1 AND revision = ?2 ORDER BY seq",
            )
            .map_err(at)?;
        let messages = stmt
            .query_map(params![key.as_str(), revision], |r| {
                Ok(StagedMessage {
                    seq: r.get(0)?,
                    destination: r.get(1)?,
                    idempotency_key: r.get(2)?,
                    content_type: r.get(3)?,
                    body: r.get(4)?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(at)?;
        Ok(Some(Archived { journal, messages }))
    }

    fn paused(&mut self, job: &str) -> Result<Option<Pause>> {
        if !self.current() {
            return Ok(None);
        }
        self.conn
            .query_row(
                "SELECT job, note, actor, since FROM pauses WHERE job = ?1",
                [job],
                pause_row,
            )
            .optional()
            .map_err(|e| failed(&self.path, "read the job's pause", e))
    }

    fn pause(&mut self, job: &str, actor: Actor<'_>, now: Timestamp) -> Result<Option<Pause>> {
        let tx = immediate(&mut self.conn, &self.path)?;
        let before = tx
            .query_row(
                "SELECT job, note, actor, since FROM pauses WHERE job = ?1",
                [job],
                pause_row,
            )
            .optional()
            .map_err(|e| failed(&self.path, "read the job's pause", e))?;
        tx.execute(
            "INSERT INTO pauses (job, note, actor, since) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (job) DO UPDATE SET note = excluded.note, actor = excluded.actor",
            params![job, actor.reason, actor.by, secs(now)],
        )
        .map_err(|e| failed(&self.path, "pause the job", e))?;
        audit(
            &tx,
            &self.path,
            &AuditRow {
                at: secs(now),
                job,
                key: None,
                action: "pause",
                old_state: None,
                reason: actor.reason,
                detail: None,
                actor: actor.by,
            },
        )?;
        tx.commit()
            .map_err(|e| failed(&self.path, "pause the job", e))?;
        Ok(before)
    }

    fn resume(&mut self, job: &str, actor: Actor<'_>, now: Timestamp) -> Result<Option<Pause>> {
        let tx = immediate(&mut self.conn, &self.path)?;
        let ended = tx
            .query_row(
                "DELETE FROM pauses WHERE job = ?1 RETURNING job, note, actor, since",
                [job],
                pause_row,
            )
            .optional()
            .map_err(|e| failed(&self.path, "resume the job", e))?;
        if let Some(p) = &ended {
            audit(
                &tx,
                &self.path,
                &AuditRow {
                    at: secs(now),
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
        tx.commit()
            .map_err(|e| failed(&self.path, "resume the job", e))?;
        Ok(ended)
    }

    fn forget(
        &mut self,
        key: &WindowKey,
        force: bool,
        actor: Actor<'_>,
        now: Timestamp,
    ) -> Result<Forgotten> {
        let tx = immediate(&mut self.conn, &self.path)?;
        let at = |e| failed(&self.path, "forget the window", e);
        let row = tx
            .query_row(
                "SELECT state, job, window_start, lease_expires_at > ?2, error,
                    report IS NOT NULL,
                    (SELECT count(*) FROM outbox o WHERE o.key = runs.key
                        AND o.state <> 'DELIVERED'),
                    fence, revision
                 FROM runs WHERE key = ?1",
                params![key.as_str(), secs(now)],
                |r| {
                    Ok((
                        stored_state(r, 0)?,
                        r.get::<_, String>(1)?,
                        stored_instant(r, 2)?,
                        r.get::<_, bool>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, bool>(5)?,
                        r.get::<_, u32>(6)?,
                        (r.get::<_, i64>(7)?, r.get::<_, u32>(8)?),
                    ))
                },
            )
            .optional()
            .map_err(at)?;
        let Some((state, job, start, live, error, has_report, undelivered, (fence, revision))) =
            row
        else {
            return Err(super::no_such_run(key));
        };
        super::may_forget(key, state, live, force)?;
        if has_report {
            archive(&tx, &self.path, key)?;
        }
        let detail = super::forget_detail(state, error.as_deref(), undelivered);
        audit(
            &tx,
            &self.path,
            &AuditRow {
                at: secs(now),
                job: &job,
                key: Some(key.as_str()),
                action: "forget",
                old_state: Some(state.as_str()),
                reason: actor.reason,
                detail: detail.as_deref(),
                actor: actor.by,
            },
        )?;
        tx.execute("DELETE FROM outbox WHERE key = ?1", [key.as_str()])
            .map_err(at)?;
        tx.execute("DELETE FROM digests WHERE key = ?1", [key.as_str()])
            .map_err(at)?;
        tx.execute("DELETE FROM runs WHERE key = ?1", [key.as_str()])
            .map_err(at)?;
        tx.execute(
            "INSERT INTO forgotten (key, job, window_start, next_revision, next_fence, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (key) DO UPDATE SET
                next_revision = max(next_revision, excluded.next_revision),
                next_fence = max(next_fence, excluded.next_fence), at = excluded.at",
            params![
                key.as_str(),
                job,
                secs(start),
                revision + u32::from(has_report),
                fence + 1,
                secs(now)
            ],
        )
        .map_err(at)?;
        let moved = tx
            .execute(
                "UPDATE schedule SET decided_until = ?2, updated_at = ?3
                 WHERE job = ?1 AND decided_until > ?2",
                params![job, secs(start), secs(now)],
            )
            .map_err(at)?;
        tx.commit().map_err(at)?;
        Ok(Forgotten {
            old_state: state,
            undelivered: if state == RunState::Prepared {
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
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT at, job, key, action, old_state, reason, detail, actor FROM audit
                 WHERE ?1 IS NULL OR job = ?1 OR job = '*' ORDER BY at DESC, id DESC",
            )
            .map_err(|e| failed(&self.path, "read the audit lines", e))?;
        stmt.query_map([job], |r| {
            Ok(AuditLine {
                at: stored_instant(r, 0)?,
                job: r.get(1)?,
                key: r.get(2)?,
                action: r.get(3)?,
                old_state: r.get(4)?,
                reason: r.get(5)?,
                detail: r.get(6)?,
                by: r.get(7)?,
            })
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(|e| failed(&self.path, "read the audit lines", e))
    }

    fn prune(
        &mut self,
        job: Option<&str>,
        before: Timestamp,
        keep_journals: bool,
        actor: Actor<'_>,
        now: Timestamp,
    ) -> Result<Pruned> {
        let mut pruned = Pruned::default();
        // In batches, each a short transaction of its own, so that a first
        // prune of a long history never holds the write lock for long.
        while let Some(batch) = self.prune_runs(job, before, keep_journals, now)? {
            pruned.add(batch);
        }
        while let Some(batch) = self.prune_revisions(job, before, keep_journals, now)? {
            pruned.add(batch);
        }
        if pruned.runs > 0 {
            let detail = format!(
                "{} run(s) ending by {before}: {} journal byte(s), {} message byte(s)",
                pruned.runs, pruned.journal_bytes, pruned.body_bytes
            );
            let tx = immediate(&mut self.conn, &self.path)?;
            audit(
                &tx,
                &self.path,
                &AuditRow {
                    at: secs(now),
                    job: job.unwrap_or("*"),
                    key: None,
                    action: "prune",
                    old_state: None,
                    reason: actor.reason,
                    detail: Some(&detail),
                    actor: actor.by,
                },
            )?;
            tx.commit().map_err(|e| failed(&self.path, "prune", e))?;
        }
        // Freed pages go back to the filesystem a few at a time, each step
        // a short write, in a store created with incremental auto-vacuum
        // (older stores keep them for reuse).
        // What was pruned is committed: a busy store here only leaves the
        // pages for later reuse, and is not an error.
        let incremental = self
            .conn
            .query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0))
            .unwrap_or(0);
        if incremental == 2 {
            let free = self
                .conn
                .query_row("PRAGMA freelist_count", [], |r| r.get::<_, i64>(0))
                .unwrap_or(0);
            for _ in 0..=free / 256 {
                if self
                    .conn
                    .execute_batch("PRAGMA incremental_vacuum(256)")
                    .is_err()
                {
                    break;
                }
            }
        }
        Ok(pruned)
    }
}

/// Inside a write transaction: confirms the run is still ours and
/// delivering (PREPARED under our fence), and stamps it.
///
/// # Errors
///
/// `Error::LeaseLost` when it is not; `Error::Store`.
fn still_delivering(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    lease: &Lease,
    now: Timestamp,
) -> Result<()> {
    let owned = tx
        .execute(
            "UPDATE runs SET updated_at = ?3 WHERE key = ?1 AND fence = ?2 AND state = 'PREPARED'",
            params![lease.key.as_str(), lease.fence.0, secs(now)],
        )
        .map_err(|e| failed(path, "check the claim", e))?;
    fenced(owned, lease)
}

/// Marks a message delivered, inside a transaction that still holds the
/// claim (fenced on the run row).
fn record_delivery(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    lease: &Lease,
    done: &Attempted<'_>,
    now: Timestamp,
) -> Result<()> {
    still_delivering(tx, path, lease, now)?;
    tx.execute(
        "UPDATE outbox SET state = 'DELIVERED', in_flight = 0, attempts = attempts + ?3,
            last_status = ?4, updated_at = ?5
         WHERE key = ?1 AND seq = ?2",
        params![
            lease.key.as_str(),
            done.seq,
            done.tries,
            done.status,
            secs(now)
        ],
    )
    .map_err(|e| failed(path, "record a delivery", e))?;
    Ok(())
}

fn take_over(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    fence: i64,
    attempt: u32,
    process: Option<&str>,
) -> Result<()> {
    tx.execute(
        "UPDATE runs SET state = CASE state WHEN 'PREPARED' THEN 'PREPARED' ELSE 'CLAIMED' END,
            fence = ?3, owner = ?4, lease_expires_at = ?5, attempt = ?6,
            component = CASE state WHEN 'PREPARED' THEN component ELSE ?7 END,
            error = CASE state WHEN 'SKIPPED' THEN NULL ELSE error END,
            retry_at = NULL, updated_at = ?8, owner_process = ?9
         WHERE key = ?1 AND fence = ?2",
        params![
            key.as_str(),
            fence,
            fence + 1,
            req.owner,
            secs_after(req.now, req.lease),
            attempt,
            req.component,
            secs(req.now),
            process
        ],
    )
    .map_err(|e| failed(path, "take over the claim", e))?;
    Ok(())
}

/// Starts a new series of attempts at a FAILED or ABANDONED window (see
/// [`Decision::Restart`]), keeping its old error in an audit line.
fn restart(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    existing: &Existing,
    process: Option<&str>,
) -> Result<()> {
    let now = secs(req.now);
    audit(
        tx,
        path,
        &AuditRow {
            at: now,
            job: req.window.job.as_str(),
            key: Some(key.as_str()),
            action: "retry",
            old_state: Some(existing.state.as_str()),
            reason: req.purpose.reason().unwrap_or(""),
            detail: existing.error.as_deref(),
            actor: req.purpose.by().unwrap_or(req.owner),
        },
    )?;
    tx.execute(
        "UPDATE runs SET state = CASE WHEN report IS NULL THEN 'CLAIMED' ELSE 'PREPARED' END,
            fence = ?3, owner = ?4, lease_expires_at = ?5, attempt = 1,
            component = CASE WHEN report IS NULL THEN ?6 ELSE component END,
            error = NULL, retryable = 0, retry_at = NULL, updated_at = ?7, owner_process = ?8
         WHERE key = ?1 AND fence = ?2",
        params![
            key.as_str(),
            existing.fence,
            existing.fence + 1,
            req.owner,
            secs_after(req.now, req.lease),
            req.component,
            now,
            process
        ],
    )
    .map_err(|e| failed(path, "restart the window", e))?;
    // Its undelivered messages are sent again, with their keys; one whose
    // at-most-once send may have arrived keeps its in-flight mark, so the
    // delivery abandons it again rather than risk a second copy.
    tx.execute(
        "UPDATE outbox SET state = 'PENDING', updated_at = ?2
         WHERE key = ?1 AND state <> 'DELIVERED'",
        params![key.as_str(), now],
    )
    .map_err(|e| failed(path, "restart the window's messages", e))?;
    Ok(())
}

/// Archives a DONE window's row and messages as a revision and claims its
/// next revision afresh (see [`Decision::Rerun`]).
fn rerun(
    tx: &rusqlite::Transaction<'_>,
    path: &Path,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    existing: &Existing,
    process: Option<&str>,
) -> Result<()> {
    let now = secs(req.now);
    let reason = req.purpose.reason().unwrap_or("");
    archive(tx, path, key)?;
    audit(
        tx,
        path,
        &AuditRow {
            at: now,
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
    tx.execute(
        "UPDATE runs SET state = 'CLAIMED', revision = revision + 1, reason = ?3,
            fence = ?4, owner = ?5, lease_expires_at = ?6, attempt = 1, component = ?7,
            report = NULL, report_cursor = NULL, journal = NULL, error = NULL, retryable = 0,
            retry_at = NULL, digest_prompt = NULL, described = 0, pruned_at = NULL,
            created_at = ?8, updated_at = ?8, owner_process = ?9
         WHERE key = ?1 AND fence = ?2",
        params![
            key.as_str(),
            existing.fence,
            reason,
            existing.fence + 1,
            req.owner,
            secs_after(req.now, req.lease),
            req.component,
            now,
            process
        ],
    )
    .map_err(|e| failed(path, "claim the next revision", e))?;
    Ok(())
}

/// Copies the window's row and messages into the revision tables and
/// removes its messages and digest note, inside a write transaction.
fn archive(tx: &rusqlite::Transaction<'_>, path: &Path, key: &WindowKey) -> Result<()> {
    let at = |e| failed(path, "archive the revision", e);
    tx.execute(
        "INSERT INTO revisions (key, revision, job, window_end, state, fence, attempt, owner,
            component, report, report_cursor, journal, error, reason, digest_prompt, described,
            created_at, updated_at, pruned_at)
         SELECT key, revision, job, window_end, state, fence, attempt, owner, component, report,
            report_cursor, journal, error, reason, digest_prompt, described, created_at,
            updated_at, pruned_at
         FROM runs WHERE key = ?1",
        [key.as_str()],
    )
    .map_err(at)?;
    tx.execute(
        "INSERT INTO revision_messages (key, revision, seq, destination, idempotency_key,
            content_type, body, state, attempts, in_flight, last_status, updated_at)
         SELECT o.key, r.revision, o.seq, o.destination, o.idempotency_key, o.content_type,
            o.body, o.state, o.attempts, o.in_flight, o.last_status, o.updated_at
         FROM outbox o JOIN runs r ON r.key = o.key WHERE o.key = ?1",
        [key.as_str()],
    )
    .map_err(at)?;
    tx.execute("DELETE FROM outbox WHERE key = ?1", [key.as_str()])
        .map_err(at)?;
    tx.execute("DELETE FROM digests WHERE key = ?1", [key.as_str()])
        .map_err(at)?;
    Ok(())
}

/// One audit line to write.
struct AuditRow<'a> {
    at: i64,
    job: &'a str,
    key: Option<&'a str>,
    action: &'a str,
    old_state: Option<&'a str>,
    reason: &'a str,
    detail: Option<&'a str>,
    actor: &'a str,
}

fn audit(tx: &rusqlite::Transaction<'_>, path: &Path, row: &AuditRow<'_>) -> Result<()> {
    tx.execute(
        "INSERT INTO audit (at, job, key, action, old_state, reason, detail, actor)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            row.at,
            row.job,
            row.key,
            row.action,
            row.old_state,
            row.reason,
            row.detail,
            row.actor
        ],
    )
    .map_err(|e| failed(path, "write the audit line", e))?;
    Ok(())
}

/// A `pauses` row: job, note, actor, since.
fn pause_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Pause> {
    Ok(Pause {
        job: r.get(0)?,
        note: r.get(1)?,
        by: r.get(2)?,
        since: stored_instant(r, 3)?,
    })
}

fn message_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageRecord> {
    Ok(MessageRecord {
        seq: r.get(0)?,
        destination: r.get(1)?,
        idempotency_key: r.get(2)?,
        content_type: r.get(3)?,
        bytes: r.get::<_, i64>(4)?.unsigned_abs(),
        state: r.get(5)?,
        attempts: r.get(6)?,
        last_status: r.get(7)?,
        in_flight: r.get(8)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The virtual machine steps of `sql`'s cached statement since the
    /// last call, as SQLite counts them: a measure of the rows a read
    /// visits that does not depend on the machine's speed.
    fn steps(s: &SqliteStore, sql: &str) -> i32 {
        let stmt = s.conn.prepare_cached(sql).unwrap();
        stmt.reset_status(rusqlite::StatementStatus::VmStep)
    }

    #[test]
    fn reads_by_state_visit_what_they_return_not_the_history_and_kept_counts_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut s = SqliteStore::open(&path).unwrap();
        // A long history of skipped hours, and one failed window in it.
        let insert = |n: i64| {
            format!(
                "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n < {n} - 1)
                 INSERT INTO runs (key, job, window_start, window_end, timezone, state, fence,
                     owner, lease_expires_at, attempt, component, error, created_at, updated_at)
                 SELECT 'big:' || n, 'big', n * 3600, n * 3600 + 3600, 'UTC',
                     CASE n WHEN 7 THEN 'FAILED' ELSE 'SKIPPED' END, 0, 'o', 0, 0, '', 'r', 0, 0
                 FROM i"
            )
        };
        let measure = |s: &mut SqliteStore| {
            let mut out = Vec::new();
            for states in [
                &[RunState::Done][..],
                &[RunState::Abandoned, RunState::Failed, RunState::Claimed][..],
            ] {
                let q = RangeQuery {
                    job: "big",
                    from: None,
                    until: None,
                    states,
                    oldest_first: false,
                    limit: 200,
                };
                let sql = s.range_sql(&q);
                steps(s, &sql);
                let rows = s.runs_in_range(&q).unwrap();
                out.push((rows.len(), steps(s, &sql)));
            }
            let counts = s.state_counts("big", None, None).unwrap();
            let rows: i64 = s
                .conn
                .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
                .unwrap();
            assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), rows as u64);
            out
        };
        s.conn.execute_batch(&insert(1_000)).unwrap();
        let small = measure(&mut s);
        s.conn.execute_batch("DELETE FROM runs").unwrap();
        s.conn.execute_batch(&insert(50_000)).unwrap();
        let large = measure(&mut s);
        assert_eq!(small.iter().map(|m| m.0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(large.iter().map(|m| m.0).collect::<Vec<_>>(), [0, 1]);
        // The same rows come back from 50 times the history for the same
        // work, give or take the index's depth.
        for (a, b) in small.iter().zip(&large) {
            assert!(
                b.1 < a.1 * 2 + 100,
                "steps grew with the history: {} for 1k rows, {} for 50k",
                a.1,
                b.1
            );
        }
    }

    #[test]
    fn migrate_twice_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        drop(SqliteStore::open(&path).unwrap());
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.user_version().unwrap(), MIGRATIONS.len() as i64);
        s.migrate().unwrap();
    }

    #[test]
    fn a_version_2_store_keeps_its_runs_and_messages_when_migrated_to_take_skips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            // A store as the previous jobhost left it: one DONE run with a
            // delivered message, one FAILED run waiting to retry.
            let conn = Connection::open(&path).unwrap();
            // As the sqlite3 shell has it.
            conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.execute_batch(MIGRATIONS[1]).unwrap();
            conn.execute_batch(
                "INSERT INTO runs (key, job, window_start, window_end, timezone, state, fence,
                    owner, lease_expires_at, attempt, component, report, journal, created_at,
                    updated_at, retry_at)
                 VALUES ('j:2026-11-08', 'j', 1794096000, 1794182400, 'UTC', 'DONE', 2, 'a',
                    0, 2, 'sha256:ab', 'the report', x'0102', 5, 6, NULL),
                    ('j:2026-11-09', 'j', 1794182400, 1794268800, 'UTC', 'FAILED', 1, 'a',
                    0, 1, 'sha256:ab', NULL, NULL, 7, 8, 1794300000);
                 INSERT INTO outbox (key, seq, destination, idempotency_key, content_type, body,
                    state, attempts, updated_at)
                 VALUES ('j:2026-11-08', 1, 'digest', 'j:2026-11-08#1', 'text/plain', x'41',
                    'DELIVERED', 1, 6),
                    -- Left behind when a person deleted its run in the sqlite3 shell.
                    ('j:2026-11-01', 1, 'digest', 'j:2026-11-01#1', 'text/plain', x'42',
                    'PENDING', 0, 6);
                 PRAGMA user_version = 2;",
            )
            .unwrap();
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.user_version().unwrap(), MIGRATIONS.len() as i64);
        let h = s.history(None).unwrap();
        assert_eq!(h.len(), 2);
        let done = &h[1];
        assert_eq!(
            (
                done.state,
                done.fence,
                done.attempt,
                done.messages,
                done.delivered
            ),
            (RunState::Done, Fence(2), 2, 1, 1)
        );
        assert_eq!(done.journal_bytes, Some(2));
        assert_eq!(done.report.as_ref().unwrap().summary, "the report");
        assert_eq!(
            h[0].retry_at,
            Some(Timestamp::from_second(1794300000).unwrap())
        );
        let orphans: i64 = s
            .conn
            .query_row(
                "SELECT count(*) FROM outbox WHERE key = 'j:2026-11-01'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            orphans, 0,
            "a message without its run is dropped, not a refusal"
        );
        // References still hold, and are enforced again.
        let on: i64 = s
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(on, 1);
        let err = s
            .conn
            .execute(
                "INSERT INTO outbox (key, seq, destination, idempotency_key, content_type, body,
                    state, updated_at) VALUES ('nope', 1, 'd', 'nope#1', 't', x'00', 'PENDING', 0)",
                [],
            )
            .unwrap_err();
        assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
        // And the new state is accepted.
        let job = JobName::new("j").unwrap();
        let w = crate::core::window::Window::containing(
            &job,
            crate::core::window::WindowKind::Day,
            &crate::core::window::Zone::utc(),
            Timestamp::from_second(1794300000).unwrap(),
        )
        .unwrap();
        let now = Timestamp::from_second(1794400000).unwrap();
        let skip = Skip {
            window: &w,
            reason: "missed",
        };
        assert_eq!(s.record_skips(&[skip], "d", now).unwrap(), [true]);
        assert_eq!(s.peek(&w.key()).unwrap().unwrap().state, RunState::Skipped);
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_refused_as_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "these are my notes, not a database ".repeat(100)).unwrap();
        let err = SqliteStore::open(&path).err().unwrap();
        assert!(matches!(err, Error::Input(_)), "{err}");
        assert!(err.to_string().contains("not a SQLite database"), "{err}");
    }
}
