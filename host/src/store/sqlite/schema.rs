//! The SQLite store's schema: its migrations, applied in order, with
//! `PRAGMA user_version` counting those applied.

/// Migrations, applied in order; `user_version` counts those applied.
pub(super) const MIGRATIONS: &[&str] = &[
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
    // v8: why the scheduler skipped a window, in a column of its own (it
    // was kept in `error`). Read-only commands still read a v7 store,
    // taking the reason from `error` there.
    "ALTER TABLE runs ADD COLUMN skip_reason TEXT;
    UPDATE runs SET skip_reason = error, error = NULL WHERE state = 'SKIPPED';",
    // v9: windows that wait for an upstream job's windows (`[[needs]]`), a
    // state the CHECK must allow: the table is rebuilt as in v3 (foreign
    // keys off), with its indexes and the triggers that keep `run_counts`;
    // `skip_reason` holds what a WAITING window waits for. The daemon looks
    // at WAITING windows at every wake-up, so they are among the
    // unfinished ones the partial index serves.
    "CREATE TABLE runs_v9 (
        key              TEXT PRIMARY KEY,
        job              TEXT NOT NULL,
        window_start     INTEGER NOT NULL,  -- unix seconds, UTC
        window_end       INTEGER NOT NULL,  -- unix seconds, UTC, exclusive
        timezone         TEXT NOT NULL,
        state            TEXT NOT NULL CHECK (state IN
                             ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED', 'SKIPPED',
                              'WAITING')),
        fence            INTEGER NOT NULL,
        owner            TEXT NOT NULL,
        lease_expires_at INTEGER NOT NULL,  -- unix seconds, UTC
        attempt          INTEGER NOT NULL,
        component        TEXT NOT NULL,     -- sha256:<hex> of the .wasm; empty when skipped or waiting
        report           TEXT,
        report_cursor    TEXT,
        journal          BLOB,
        error            TEXT,              -- the last error
        retryable        INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        retry_at         INTEGER,           -- unix seconds, UTC; no attempt before
        digest_prompt    TEXT,
        described        INTEGER NOT NULL DEFAULT 0,
        revision         INTEGER NOT NULL DEFAULT 1,
        reason           TEXT,              -- why this revision was made (a rerun)
        pruned_at        INTEGER,           -- unix seconds, UTC
        owner_process    TEXT,
        skip_reason      TEXT,              -- why skipped, or what a WAITING window waits for
        inputs           TEXT               -- the fingerprint of the source's rows read, and the query's digest
    ) STRICT;
    INSERT INTO runs_v9 (key, job, window_start, window_end, timezone, state, fence, owner,
        lease_expires_at, attempt, component, report, report_cursor, journal, error, retryable,
        created_at, updated_at, retry_at, digest_prompt, described, revision, reason, pruned_at,
        owner_process, skip_reason)
    SELECT key, job, window_start, window_end, timezone, state, fence, owner,
        lease_expires_at, attempt, component, report, report_cursor, journal, error, retryable,
        created_at, updated_at, retry_at, digest_prompt, described, revision, reason, pruned_at,
        owner_process, skip_reason
    FROM runs;
    DROP TABLE runs;
    ALTER TABLE runs_v9 RENAME TO runs;
    CREATE INDEX runs_by_job ON runs (job, window_start);
    CREATE INDEX runs_unfinished ON runs (job, window_start)
        WHERE state IN ('CLAIMED', 'PREPARED', 'WAITING')
        OR (state = 'FAILED' AND retry_at IS NOT NULL);
    CREATE INDEX runs_prunable ON runs (window_end) WHERE state = 'DONE' AND pruned_at IS NULL;
    CREATE INDEX runs_by_state ON runs (job, state, window_start);
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
    END;
    -- The upstream windows each revision of a window used (`[[needs]]`):
    -- their revision and a digest of the report it read.
    CREATE TABLE uses (
        key               TEXT NOT NULL,     -- the window that used them
        revision          INTEGER NOT NULL,  -- its revision that did
        job               TEXT NOT NULL,
        upstream_key      TEXT NOT NULL,
        upstream_revision INTEGER NOT NULL,
        report_digest     TEXT NOT NULL,     -- sha256:<hex> of the report read
        PRIMARY KEY (key, revision, upstream_key)
    ) STRICT;
    CREATE INDEX uses_by_upstream ON uses (upstream_key, upstream_revision);
    -- Windows whose DONE answer may be wrong now: a mark on a revision,
    -- with its cause (an upstream window it used got a new revision). It
    -- goes when the window gets a new revision.
    CREATE TABLE stale (
        key              TEXT NOT NULL,
        revision         INTEGER NOT NULL,
        job              TEXT NOT NULL,
        about            TEXT NOT NULL,      -- the upstream window's key
        cause            TEXT NOT NULL,
        since            INTEGER NOT NULL,   -- unix seconds, UTC
        PRIMARY KEY (key, revision, about)
    ) STRICT;
    CREATE INDEX stale_by_job ON stale (job, key);
    -- A candidate component's run beside a window's live run ([shadow]):
    -- on the live run's journaled input, never delivered.
    CREATE TABLE shadows (
        key              TEXT NOT NULL,
        revision         INTEGER NOT NULL,
        job              TEXT NOT NULL,
        component        TEXT NOT NULL,     -- sha256:<hex> of the candidate
        verdict          TEXT NOT NULL CHECK (verdict IN ('agreed', 'differed', 'failed')),
        report           TEXT,              -- dropped when the run is pruned
        messages         TEXT,              -- JSON; dropped when the run is pruned
        differences      TEXT NOT NULL,     -- JSON list of the readable differences
        error            TEXT,              -- why it failed
        at               INTEGER NOT NULL,  -- unix seconds, UTC
        PRIMARY KEY (key, revision)
    ) STRICT;
    CREATE INDEX shadows_by_job ON shadows (job, verdict);",
    // v10: the chain (`store::chain`): every decision about a job, an entry
    // whose hash covers the one before, written in the same transaction as
    // the change (the job's last entry is the next one's `prev`); the rows
    // there were before the chain, which it covers from their next change;
    // and the entry each staged message was committed by, which a signed
    // delivery names.
    "CREATE TABLE chain (
        job              TEXT NOT NULL,
        seq              INTEGER NOT NULL,  -- from 1, per job
        kind             TEXT NOT NULL,     -- as in the entry
        key              TEXT,              -- as in the entry
        entry            TEXT NOT NULL,     -- JSON
        prev             TEXT NOT NULL,     -- the previous entry's hash
        hash             TEXT NOT NULL,     -- sha256 hex of job, seq, prev and entry
        key_id           TEXT,              -- the signing key's id
        signature        TEXT,              -- base64 Ed25519 over the hash
        PRIMARY KEY (job, seq)
    ) STRICT;
    CREATE TABLE chain_adopted (
        what             TEXT NOT NULL,     -- run, revision, message, audit
        id               TEXT NOT NULL,
        PRIMARY KEY (what, id)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO chain_adopted (what, id) SELECT 'run', key FROM runs;
    INSERT INTO chain_adopted (what, id) SELECT 'revision', revision || ' ' || key FROM revisions;
    INSERT INTO chain_adopted (what, id) SELECT 'message', seq || ' ' || key FROM outbox;
    INSERT INTO chain_adopted (what, id) SELECT 'audit', CAST(id AS TEXT) FROM audit;
    ALTER TABLE outbox ADD COLUMN entry TEXT;",
    // v11: incidents and their notifications (`[[notify]]`): at most one
    // open incident of a kind per job, so that hosts that see the same
    // failure stage its notifications once; each notification an outbox
    // row of its own, leased by the host that sends it.
    "CREATE TABLE incidents (
        id               INTEGER PRIMARY KEY,
        job              TEXT NOT NULL,
        kind             TEXT NOT NULL,     -- failed, abandoned, late, stale, paused
        key              TEXT,              -- the window that opened it, if one did
        detail           TEXT NOT NULL,     -- what opened it, one line
        opened_at        INTEGER NOT NULL,  -- unix seconds, UTC
        closed_at        INTEGER,
        closed_by        TEXT               -- what closed it, one line
    ) STRICT;
    CREATE UNIQUE INDEX incidents_open ON incidents (job, kind) WHERE closed_at IS NULL;
    CREATE TABLE notifications (
        id               INTEGER PRIMARY KEY,
        job              TEXT NOT NULL,
        incident         INTEGER NOT NULL REFERENCES incidents (id),
        event            TEXT NOT NULL,     -- the incident's kind, recovered, paused
        target           TEXT NOT NULL,     -- the [[notify]] URL as written
        idempotency_key  TEXT NOT NULL,
        body             TEXT NOT NULL,     -- JSON, as sent
        state            TEXT NOT NULL CHECK (state IN ('PENDING', 'SENT', 'FAILED')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        next_at          INTEGER NOT NULL,  -- unix seconds, UTC
        lease_until      INTEGER,
        owner            TEXT,
        detail           TEXT,              -- the last answer
        created_at       INTEGER NOT NULL,
        UNIQUE (idempotency_key, target)
    ) STRICT;
    CREATE INDEX notifications_due ON notifications (state, next_at);",
    // v12: an incident's notifications, read by `status` and the dashboard
    // for each open incident.
    "CREATE INDEX notifications_by_incident ON notifications (incident, id);",
];
