//! The PostgreSQL store's schema: its migrations, applied once even when
//! several hosts start together, and the version check that refuses a
//! store written by a newer jobhost or a table that is not jobhost's. The
//! rules of the SQLite store hold here too: never remove or edit a shipped
//! migration, and keep every migration additive, so the data an older
//! version wrote stays as it was. An older host refuses a store a newer
//! one has migrated (it cannot know what the new states mean), so every
//! host sharing a store runs the same version.

use postgres::Client;

use super::support::{Limits, Tx, int8, pg};
use crate::core::error::{Error, Result};
use crate::store::PostgresUrl;

/// Migrations, applied in order; `jobhost_schema` has a row for each.
const MIGRATIONS: &[&str] = &[
    // v1: runs, outbox and cursors, as SQLite's v1 and v2 together.
    "CREATE TABLE jobhost_runs (
        key              text PRIMARY KEY,
        job              text NOT NULL,
        window_start     timestamptz NOT NULL,
        window_end       timestamptz NOT NULL,  -- exclusive
        timezone         text NOT NULL,
        state            text NOT NULL CHECK (state IN
                             ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED')),
        fence            bigint NOT NULL,
        owner            text NOT NULL,
        lease_expires_at timestamptz NOT NULL,  -- on the database's clock
        attempt          bigint NOT NULL,
        component        text NOT NULL,         -- sha256:<hex> of the .wasm
        report           text,
        report_cursor    text,
        journal          bytea,
        error            text,
        retryable        boolean NOT NULL DEFAULT false,
        retry_at         timestamptz,           -- on the database's clock
        created_at       timestamptz NOT NULL,
        updated_at       timestamptz NOT NULL
    );
    CREATE INDEX jobhost_runs_by_job ON jobhost_runs (job, window_start);
    CREATE TABLE jobhost_outbox (
        key              text NOT NULL REFERENCES jobhost_runs (key),
        seq              bigint NOT NULL,
        destination      text NOT NULL,
        idempotency_key  text NOT NULL UNIQUE,
        content_type     text NOT NULL,
        body             bytea NOT NULL,
        state            text NOT NULL CHECK (state IN
                             ('PENDING', 'DELIVERED', 'FAILED', 'ABANDONED')),
        attempts         bigint NOT NULL DEFAULT 0,
        in_flight        boolean NOT NULL DEFAULT false,
        last_status      text,
        updated_at       timestamptz NOT NULL,
        PRIMARY KEY (key, seq)
    );
    CREATE TABLE jobhost_cursors (
        job              text PRIMARY KEY,
        cursor           text,
        key              text NOT NULL,
        window_end       timestamptz NOT NULL,
        updated_at       timestamptz NOT NULL
    );",
    // v2: windows the scheduler skipped, and how far each job's windows
    // have all been decided.
    // NOT VALID: every existing row passed the narrower check it replaces,
    // so the table is not scanned while every host waits on its lock.
    "ALTER TABLE jobhost_runs DROP CONSTRAINT IF EXISTS jobhost_runs_state_check;
    ALTER TABLE jobhost_runs ADD CONSTRAINT jobhost_runs_state_check CHECK (state IN
        ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED', 'SKIPPED')) NOT VALID;
    CREATE TABLE jobhost_schedule (
        job              text PRIMARY KEY,
        decided_until    timestamptz NOT NULL,  -- every window ending by then is decided
        updated_at       timestamptz NOT NULL
    );",
    // v3: what a language model is asked to describe of a run, and what
    // became of its digest (the digest itself is a cache on the host).
    "ALTER TABLE jobhost_runs ADD COLUMN digest_prompt text;
    ALTER TABLE jobhost_runs ADD COLUMN described boolean NOT NULL DEFAULT false;
    CREATE TABLE jobhost_digests (
        key              text PRIMARY KEY REFERENCES jobhost_runs (key),
        cache_key        text,                  -- sha256 hex of model, settings and prompt
        model            text,
        error            text,                  -- why the last attempt failed
        sent_at          timestamptz,           -- the digest message delivered
        updated_at       timestamptz NOT NULL
    );
    CREATE INDEX jobhost_runs_unfinished ON jobhost_runs (job, window_start)
        WHERE state IN ('CLAIMED', 'PREPARED') OR (state = 'FAILED' AND retry_at IS NOT NULL);",
    // v4: what a person does on purpose, as SQLite's v5: revisions of a
    // window, audit lines, paused jobs, and pruning.
    "ALTER TABLE jobhost_runs ADD COLUMN revision bigint NOT NULL DEFAULT 1;
    ALTER TABLE jobhost_runs ADD COLUMN reason text;        -- why this revision was made
    ALTER TABLE jobhost_runs ADD COLUMN pruned_at timestamptz;
    CREATE TABLE jobhost_revisions (
        key              text NOT NULL,
        revision         bigint NOT NULL,
        job              text NOT NULL,
        window_end       timestamptz NOT NULL,
        state            text NOT NULL,
        fence            bigint NOT NULL,
        attempt          bigint NOT NULL,
        owner            text NOT NULL,
        component        text NOT NULL,
        report           text,
        report_cursor    text,
        journal          bytea,
        error            text,
        reason           text,
        digest_prompt    text,
        described        boolean NOT NULL DEFAULT false,
        created_at       timestamptz NOT NULL,
        updated_at       timestamptz NOT NULL,
        pruned_at        timestamptz,
        PRIMARY KEY (key, revision)
    );
    CREATE TABLE jobhost_revision_messages (
        key              text NOT NULL,
        revision         bigint NOT NULL,
        seq              bigint NOT NULL,
        destination      text NOT NULL,
        idempotency_key  text NOT NULL,
        content_type     text NOT NULL,
        body             bytea NOT NULL,
        state            text NOT NULL,
        attempts         bigint NOT NULL,
        in_flight        boolean NOT NULL,
        last_status      text,
        updated_at       timestamptz NOT NULL,
        PRIMARY KEY (key, revision, seq)
    );
    CREATE TABLE jobhost_audit (
        id               bigserial PRIMARY KEY,
        at               timestamptz NOT NULL,
        job              text NOT NULL,
        key              text,
        action           text NOT NULL,         -- forget, rerun, retry, pause, resume, prune
        old_state        text,
        reason           text NOT NULL,
        detail           text,
        actor            text NOT NULL          -- user@host
    );
    CREATE INDEX jobhost_audit_by_job ON jobhost_audit (job, at);
    CREATE TABLE jobhost_pauses (
        job              text PRIMARY KEY,
        note             text NOT NULL,
        actor            text NOT NULL,
        since            timestamptz NOT NULL
    );
    CREATE INDEX jobhost_runs_prunable ON jobhost_runs (window_end)
        WHERE state = 'DONE' AND pruned_at IS NULL;
    CREATE TABLE jobhost_forgotten (
        key              text PRIMARY KEY,
        job              text NOT NULL,
        window_start     timestamptz NOT NULL,
        next_revision    bigint NOT NULL,
        next_fence       bigint NOT NULL,
        at               timestamptz NOT NULL
    );
    CREATE INDEX jobhost_forgotten_by_job ON jobhost_forgotten (job, window_start);",
    // v5: a job's newest rows in one state, read at a cost that does not
    // grow with its history, and its rows counted per state as index
    // ranges. Unlike SQLite's v6 the counts are not kept as rows change:
    // one counter row per job and state would queue the hosts that share a
    // store (and could deadlock two of them), and rows of changes folded by
    // a trigger made a claim up to twice as slow as their dead rows piled
    // up between vacuums.
    "CREATE INDEX jobhost_runs_by_state ON jobhost_runs (job, state, window_start);",
    // v6: what a claim's owner recorded of its process, as SQLite's v7: a
    // claim on the same machine tells from it that the owner of a live
    // lease is gone. NULL from a host that records nothing.
    "ALTER TABLE jobhost_runs ADD COLUMN owner_process text;",
    // v7: why the scheduler skipped a window, in a column of its own, as
    // SQLite's v8 (it was kept in `error`).
    "ALTER TABLE jobhost_runs ADD COLUMN skip_reason text;
    UPDATE jobhost_runs SET skip_reason = error, error = NULL WHERE state = 'SKIPPED';",
    // v8: windows that wait for an upstream job's windows (`[[needs]]`), as
    // SQLite's v9; NOT VALID as in v2. The daemon looks at WAITING windows
    // at every wake-up, so they are among the unfinished ones.
    "ALTER TABLE jobhost_runs DROP CONSTRAINT IF EXISTS jobhost_runs_state_check;
    ALTER TABLE jobhost_runs ADD CONSTRAINT jobhost_runs_state_check CHECK (state IN
        ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED', 'SKIPPED', 'WAITING')) NOT VALID;
    ALTER TABLE jobhost_runs ADD COLUMN IF NOT EXISTS inputs text;  -- rows read, and the query
    DROP INDEX IF EXISTS jobhost_runs_unfinished;
    CREATE INDEX jobhost_runs_unfinished ON jobhost_runs (job, window_start)
        WHERE state IN ('CLAIMED', 'PREPARED', 'WAITING')
        OR (state = 'FAILED' AND retry_at IS NOT NULL);
    CREATE TABLE jobhost_uses (
        key               text NOT NULL,     -- the window that used them
        revision          bigint NOT NULL,   -- its revision that did
        job               text NOT NULL,
        upstream_key      text NOT NULL,
        upstream_revision bigint NOT NULL,
        report_digest     text NOT NULL,     -- sha256:<hex> of the report read
        PRIMARY KEY (key, revision, upstream_key)
    );
    CREATE INDEX jobhost_uses_by_upstream ON jobhost_uses (upstream_key, upstream_revision);
    CREATE TABLE jobhost_stale (
        key              text NOT NULL,
        revision         bigint NOT NULL,
        job              text NOT NULL,
        about            text NOT NULL,      -- the upstream window's key
        cause            text NOT NULL,
        since            timestamptz NOT NULL,
        PRIMARY KEY (key, revision, about)
    );
    CREATE INDEX jobhost_stale_by_job ON jobhost_stale (job, key);
    CREATE TABLE jobhost_shadows (
        key              text NOT NULL,
        revision         bigint NOT NULL,
        job              text NOT NULL,
        component        text NOT NULL,
        verdict          text NOT NULL CHECK (verdict IN ('agreed', 'differed', 'failed')),
        report           text,
        messages         text,
        differences      text NOT NULL,
        error            text,
        at               timestamptz NOT NULL,
        PRIMARY KEY (key, revision)
    );
    CREATE INDEX jobhost_shadows_by_job ON jobhost_shadows (job, verdict);",
    // v9: the chain, as SQLite's v10.
    "CREATE TABLE jobhost_chain (
        job              text NOT NULL,
        seq              bigint NOT NULL,
        kind             text NOT NULL,
        key              text,
        entry            text NOT NULL,
        prev             text NOT NULL,
        hash             text NOT NULL,
        key_id           text,
        signature        text,
        PRIMARY KEY (job, seq)
    );
    CREATE TABLE jobhost_chain_adopted (
        what             text NOT NULL,
        id               text NOT NULL,
        PRIMARY KEY (what, id)
    );
    INSERT INTO jobhost_chain_adopted (what, id) SELECT 'run', key FROM jobhost_runs;
    INSERT INTO jobhost_chain_adopted (what, id)
        SELECT 'revision', revision || ' ' || key FROM jobhost_revisions;
    INSERT INTO jobhost_chain_adopted (what, id)
        SELECT 'message', seq || ' ' || key FROM jobhost_outbox;
    INSERT INTO jobhost_chain_adopted (what, id) SELECT 'audit', id::text FROM jobhost_audit;
    ALTER TABLE jobhost_outbox ADD COLUMN entry text;",
    // v10: incidents and their notifications, as SQLite's v11.
    "CREATE TABLE jobhost_incidents (
        id               bigserial PRIMARY KEY,
        job              text NOT NULL,
        kind             text NOT NULL,
        key              text,
        detail           text NOT NULL,
        opened_at        timestamptz NOT NULL,
        closed_at        timestamptz,
        closed_by        text
    );
    CREATE UNIQUE INDEX jobhost_incidents_open ON jobhost_incidents (job, kind)
        WHERE closed_at IS NULL;
    CREATE TABLE jobhost_notifications (
        id               bigserial PRIMARY KEY,
        job              text NOT NULL,
        incident         bigint NOT NULL REFERENCES jobhost_incidents (id),
        event            text NOT NULL,
        target           text NOT NULL,
        idempotency_key  text NOT NULL,
        body             text NOT NULL,
        state            text NOT NULL CHECK (state IN ('PENDING', 'SENT', 'FAILED')),
        attempts         bigint NOT NULL DEFAULT 0,
        next_at          timestamptz NOT NULL,
        lease_until      timestamptz,
        owner            text,
        detail           text,
        created_at       timestamptz NOT NULL,
        UNIQUE (idempotency_key, target)
    );
    CREATE INDEX jobhost_notifications_due ON jobhost_notifications (state, next_at);",
    // v11: an incident's notifications, read by `status` and the dashboard
    // for each open incident; as SQLite's v12.
    "CREATE INDEX jobhost_notifications_by_incident ON jobhost_notifications (incident, id);",
];

/// The transaction-scoped advisory lock that serialises migrations ("jobhost"
/// in ASCII). Released at commit or rollback, so it holds nothing across a
/// pooler's connection hand-offs.
const MIGRATION_LOCK: i64 = 0x006a_6f62_686f_7374;

/// Reading the schema's version waits as long as any other read.
const READ_LIMITS: Limits = Limits {
    lock_wait: crate::store::WRITE_WAIT,
    statement: Some(crate::store::STATEMENT_TIMEOUT),
};

/// Migrations may wait longer, for another host's migration to finish, and
/// a statement of theirs (an index on a long history) may take its time.
const MIGRATION_LIMITS: Limits = Limits {
    lock_wait: std::time::Duration::from_secs(120),
    statement: None,
};

/// The applied schema version, `None` when there are no jobhost tables.
///
/// # Errors
///
/// `Error::Input` for a search path naming no schema, or a newer version.
pub(super) fn schema_version(client: &mut Client, url: &PostgresUrl) -> Result<Option<i64>> {
    // In a bounded transaction, as every read: a migration in progress
    // holds the tables, and this waits for it at most as long as a write.
    let mut tx = Tx::begin(client, url, "read", READ_LIMITS)?;
    // In the schema the tables are (or would be) created in: the first
    // schema of the search path that exists.
    let row = tx
        .query_typed_one(
            "SELECT current_schema() IS NOT NULL,
                    EXISTS (SELECT 1 FROM pg_class
                            WHERE relname = 'jobhost_schema'
                              AND relnamespace = (SELECT oid FROM pg_namespace
                                                  WHERE nspname = current_schema()))",
            &[],
        )
        .map_err(|e| pg(&format!("cannot read store `{url}`"), &e))?;
    let (has_schema, exists): (bool, bool) = (row.get(0), row.get(1));
    if !has_schema {
        return Err(Error::input(format!(
            "the search_path of store `{url}` names no schema that exists; create the schema \
             (CREATE SCHEMA ...) or fix search_path in the URL's options"
        )));
    }
    if !exists {
        tx.commit_named("read")?;
        return Ok(None);
    }
    let v: i64 = tx
        .query_typed_one(
            "SELECT coalesce(max(version), 0)::int8 FROM jobhost_schema",
            &[],
        )
        .map_err(|e| pg(&format!("cannot read store `{url}`"), &e))?
        .get(0);
    tx.commit_named("read")?;
    check_version(url, v)?;
    Ok(Some(v))
}

/// Applies the migrations the store lacks, in one transaction; returns
/// whether the store had no jobhost tables before (this created it).
pub(super) fn migrate(client: &mut Client, url: &PostgresUrl) -> Result<bool> {
    let at = |what: &str| format!("cannot {what} store `{url}`");
    let mut tx = Tx::begin(client, url, "migrate", MIGRATION_LIMITS)?;
    // Several hosts starting together queue here; each then re-reads
    // the version, so every migration is applied once.
    tx.execute_typed("SELECT pg_advisory_xact_lock($1)", &[int8(&MIGRATION_LOCK)])
        .map_err(|e| pg(&at("lock"), &e))?;
    // Read from pg_class under this statement's snapshot, not through
    // to_regclass: the name lookup caches may still say "no such table"
    // from before the lock was granted (an advisory lock does not make
    // the backend process catalog invalidations), so a host that waited
    // for another's migration would think its tables foreign.
    let foreign: bool = tx
            .query_typed_one(
                "SELECT NOT EXISTS (SELECT 1 FROM pg_class
                                    WHERE relname = 'jobhost_schema'
                                      AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()))
                        AND EXISTS (SELECT 1 FROM pg_class
                                    WHERE relname = 'jobhost_runs'
                                      AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema()))",
                &[],
            )
            .map_err(|e| pg(&at("read"), &e))?
            .get(0);
    if foreign {
        return Err(Error::input(format!(
            "`{url}` has a `jobhost_runs` table but no jobhost schema version; point the store \
                 at a jobhost store or another schema"
        )));
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS jobhost_schema (
                version    bigint PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
    )
    .map_err(|e| pg(&at("migrate"), &e))?;
    let version: i64 = tx
        .query_typed_one(
            "SELECT coalesce(max(version), 0)::int8 FROM jobhost_schema",
            &[],
        )
        .map_err(|e| pg(&at("read"), &e))?
        .get(0);
    check_version(url, version)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let v = i as i64 + 1;
        tx.batch_execute(sql)
            .map_err(|e| pg(&format!("cannot migrate store `{url}` to version {v}"), &e))?;
        tx.execute_typed(
            "INSERT INTO jobhost_schema (version) VALUES ($1)",
            &[int8(&v)],
        )
        .map_err(|e| pg(&at("migrate"), &e))?;
    }
    tx.commit().map_err(|e| pg(&at("migrate"), &e))?;
    Ok(version == 0)
}

pub(super) fn latest() -> i64 {
    MIGRATIONS.len() as i64
}

/// Refuses a store written by a newer jobhost.
pub(super) fn check_version(url: &PostgresUrl, version: i64) -> Result<()> {
    if version > latest() {
        return Err(Error::input(format!(
            "store `{url}` has schema version {version}, newer than this jobhost understands ({}); \
             upgrade jobhost",
            latest()
        )));
    }
    Ok(())
}
