//! Every transaction of the store, written once: [`SqlStore`] keeps the
//! contract ([`ClaimStore`] and [`Ledger`]) over any [`Backend`], whose
//! dialect renders the marks in these statements (see [`super::sql`]). A
//! script checks what it must (the pause, the fence), reads or inserts,
//! asks [`decide`] what the row means, and applies it; the backends differ
//! only in how they connect, migrate, bind and lock. A new transaction goes
//! here, once, and into the contract suite.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::chain::{
    ArchivedFact, AuditFact, Chain, Entry, Link, MessageFact, Outcome, Signer, WindowFact, digest,
};
use super::sql::Val::{After, Bytes, Flag, Int, Lower, OptText, Text, Time, Upper};
use super::sql::{Backend, Fail, Kind, Row, Tx, Val, damaged};
use super::verify::{ChainRows, MessageRow, RevisionRow, RunRow};
use super::{
    Actor, Archived, Attempted, AuditAction, AuditLine, Claim, ClaimRequest, ClaimStore, Decision,
    DigestNote, DigestRecord, Existing, Failure, Fence, Forgotten, FreshClaims, InputsRecord,
    Lease, Ledger, MessageRecord, MessageState, Pause, PendingMessage, Pruned, RangeQuery,
    Revision, RunHead, RunInputs, RunRecord, RunState, ShadowRun, Skip, StagedMessage, StaleMark,
    StoredReport, UpstreamUse, decide, decided, fenced, lease_lost, undelivered,
};
use crate::core::error::{Error, Result};
use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::window::{JobName, Window, WindowKey};

/// How many runs one transaction of `prune` takes on, so that a first
/// prune of a long history never holds a lock for long.
const PRUNE_BATCH: i64 = 500;

/// The most windows one chain entry names (an entry stays far below
/// [`super::chain::MOST_ENTRY_BYTES`]); more make several entries.
const MOST_WINDOWS_PER_ENTRY: usize = 1000;

/// The clock a read that compares nothing with the lease clock passes.
const NO_CLOCK: Timestamp = Timestamp::UNIX_EPOCH;

/// A claim store over one backend (see [`super::SqliteStore`] and
/// [`super::PostgresStore`]).
pub struct SqlStore<B> {
    pub(crate) backend: B,
    /// Whether opening it created the store.
    created: bool,
    /// Test hooks inside the commit of a report.
    failpoints: Option<Arc<dyn Failpoints>>,
    /// How its transactions append to the chain.
    pub(super) chain: ChainSettings,
    /// The hash of the last entry this store appended.
    last_entry: Option<String>,
}

/// How a store's transactions append to the chain: signed with the
/// process's key, if any; `on` is false only in the store bench's
/// side-by-side case.
#[derive(Clone)]
pub(super) struct ChainSettings {
    signer: Option<Arc<Signer>>,
    on: bool,
}

/// Begins a transaction of `kind` that appends to the chains of `jobs`
/// (see [`Backend::begin_chained`]).
pub(super) fn chained<'a, B: Backend>(
    backend: &'a mut B,
    settings: &ChainSettings,
    kind: Kind,
    what: &str,
    now: Timestamp,
    jobs: &[&str],
) -> Result<(B::Tx<'a>, Chain), Fail> {
    if !settings.on {
        let tx = backend.begin(kind, what, now)?;
        return Ok((tx, Chain::new(Vec::new(), None, false)));
    }
    let mut jobs = jobs.to_vec();
    jobs.sort_unstable();
    jobs.dedup();
    let (tx, heads) = backend.begin_chained(kind, what, now, &jobs)?;
    Ok((tx, Chain::new(heads, settings.signer.clone(), true)))
}

/// Commits a chained transaction with its entries.
pub(super) fn seal<T: Tx>(tx: T, what: &str, chain: &Chain) -> Result<()> {
    if chain.links().is_empty() {
        tx.commit(what)
    } else {
        tx.commit_chained(what, chain.links())
    }
}

impl<B: Backend> SqlStore<B> {
    pub(crate) fn new(backend: B, created: bool) -> SqlStore<B> {
        SqlStore {
            backend,
            created,
            failpoints: None,
            chain: ChainSettings {
                signer: super::chain::signer(),
                on: true,
            },
            last_entry: None,
        }
    }

    /// Keeps no chain: for the store bench's side-by-side case only (a
    /// store written this way fails `jobhost verify`).
    #[doc(hidden)]
    #[must_use]
    pub fn without_chain(mut self) -> Self {
        self.chain.on = false;
        self
    }

    /// Signs its entries with `signer` instead of the process's key.
    #[must_use]
    pub fn signed_by(mut self, signer: Option<Arc<Signer>>) -> Self {
        self.chain.signer = signer;
        self
    }

    /// Notes the last entry a transaction appended.
    pub(super) fn sealed(&mut self, chain: &Chain) {
        if let Some(h) = chain.last() {
            self.last_entry = Some(h);
        }
    }

    /// Stops at [`Boundary::InPrepare`] inside the commit of every report
    /// (tests only).
    #[must_use]
    pub fn with_failpoints(mut self, failpoints: Option<Arc<dyn Failpoints>>) -> Self {
        self.failpoints = failpoints;
        self
    }

    /// The rows of one read, in a transaction of its own (on PostgreSQL it
    /// too waits a bounded time for what another session holds).
    pub(super) fn rows<T>(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        map: &mut dyn FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut tx = self.backend.begin(Kind::Read, what, NO_CLOCK)?;
        let rows = tx.query(what, sql, args, map)?;
        tx.commit(what)?;
        Ok(rows)
    }

    /// The first row of one read, if any.
    pub(super) fn row<T>(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        map: &mut dyn FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.rows(what, sql, args, map)?.into_iter().next())
    }

    /// One write statement in a transaction of its own; the rows it
    /// changed.
    pub(super) fn write_one(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        now: Timestamp,
    ) -> Result<u64> {
        let mut tx = self.backend.begin(Kind::Write, what, now)?;
        let changed = tx.exec(what, sql, args)?;
        tx.commit(what)?;
        Ok(changed)
    }

    /// The columns [`run_record`] reads, for this store's schema.
    fn run_columns(&self) -> String {
        let last = if self.backend.current() {
            "r.revision, r.reason, {t r.pruned_at}"
        } else {
            "CAST(1 AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT)"
        };
        // An older store kept the skip's reason in `error`.
        let (error, skip_reason) = if self.backend.skip_column() {
            ("r.error", "r.skip_reason")
        } else {
            (
                "CASE WHEN r.state = 'SKIPPED' THEN NULL ELSE r.error END",
                "CASE WHEN r.state = 'SKIPPED' THEN r.error END",
            )
        };
        format!("{RUN_COLUMNS}{last}, {error}, {skip_reason}")
    }

    /// The runs matching `condition` (over `runs r`), newest window first.
    fn runs_where(&mut self, condition: &str, args: &[Val<'_>]) -> Result<Vec<RunRecord>> {
        self.runs_where_limited(condition, args, None)
    }

    /// [`SqlStore::runs_where`], at most `limit` of them.
    fn runs_where_limited(
        &mut self,
        condition: &str,
        args: &[Val<'_>],
        limit: Option<u64>,
    ) -> Result<Vec<RunRecord>> {
        // A number of ours, written into the statement: both dialects
        // take `LIMIT n` (at most a signed 64-bit count), and neither takes
        // one `LIMIT` for "none".
        let limit = limit
            .map(|n| format!(" LIMIT {}", n.min(i64::MAX.unsigned_abs())))
            .unwrap_or_default();
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE {condition}
             ORDER BY r.window_start DESC, r.key{{C}}{limit}",
            self.run_columns()
        );
        self.rows("read history", &sql, args, &mut run_record)
    }

    /// The statement of [`Ledger::runs_in_range`] for `q`, with the job,
    /// the range's ends and the limit as `$1` to `$4`.
    pub(crate) fn range_sql(&self, q: &RangeQuery<'_>) -> String {
        let range = "job = $1 AND window_start >= {time $2} AND window_start < {time $3}";
        // With states, each state's read is held to the state index, and
        // the rows are looked up by key from what they found, in that order
        // (on SQLite a CROSS JOIN): given the choice, the planner walks the
        // job's rows in window order to spare itself a sort, which for a
        // state with no row is every row.
        let tables = match q.keys_by_state("{by_state}", range, "$4", "{C}") {
            Some(keys) => format!(
                "({keys}) AS k {{cross}} {{runs}} r ON r.key = k.key
                 LEFT JOIN {{digests}} d ON d.key = r.key"
            ),
            None => format!(
                "{RUN_TABLES} WHERE r.job = $1 AND r.window_start >= {{time $2}}
                   AND r.window_start < {{time $3}}"
            ),
        };
        format!(
            "SELECT {} FROM {tables} ORDER BY r.window_start {order}, r.key{{C}} LIMIT $4",
            self.run_columns(),
            order = q.order()
        )
    }

    /// One try at a claim; `None` when the window's row went away between
    /// the insert that found it and the read (a person deleted it), so the
    /// claim starts again.
    fn try_claim(&mut self, req: &ClaimRequest<'_>) -> Result<Option<Claim>, Fail> {
        let key = req.window.key();
        let k = key.as_str();
        let process = req.probe.record(req.owner);
        let process = process.as_deref();
        let job = req.window.job.as_str();
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Claim,
            "claim",
            req.now,
            &[job],
        )?;
        // A paused job claims nothing, on every host sharing the store.
        let paused = tx.one(
            "read the job's pause",
            "SELECT note, actor, {t since} FROM {pauses} WHERE job = $1",
            &[Text(req.window.job.as_str())],
            &mut |r| {
                Ok(Claim::Paused {
                    note: r.text(0)?,
                    by: r.text(1)?,
                    since: r.time(2)?,
                })
            },
        )?;
        if paused.is_some() {
            return Ok(paused);
        }
        // The common case, a window nobody has claimed, is one statement.
        // A forgotten window goes on from its fence and revision.
        let inserted = tx.one(
            "insert the claim",
            "INSERT INTO {runs} (key, job, window_start, window_end, timezone, state, fence,
                owner, lease_expires_at, attempt, component, created_at, updated_at, revision,
                owner_process)
             VALUES ($1, $2, {time $3}, {time $4}, $5, 'CLAIMED',
                coalesce((SELECT next_fence FROM {forgotten} WHERE key = $1), 1), $6,
                {after $7}, 1, $8, {now}, {now},
                coalesce((SELECT next_revision FROM {forgotten} WHERE key = $1), 1), $9)
             ON CONFLICT (key) DO NOTHING
             RETURNING revision, fence",
            &[
                Text(k),
                Text(req.window.job.as_str()),
                Time(req.window.start),
                Time(req.window.end),
                Text(req.window.zone.name()),
                Text(req.owner),
                After(Some(req.lease)),
                Text(req.component),
                OptText(process),
            ],
            &mut revision_and_fence,
        )?;
        if let Some(mut claimed) = inserted {
            // On PostgreSQL the insert may have waited for a `forget` of
            // this key to commit, with its subqueries read before that: a
            // statement of its own sees the forgotten fence and revision.
            let caught_up = tx.one(
                "insert the claim",
                "UPDATE {runs} AS r SET fence = f.next_fence, revision = f.next_revision
                 FROM {forgotten} f
                 WHERE r.key = $1 AND f.key = $1
                   AND (f.next_fence > r.fence OR f.next_revision > r.revision)
                 RETURNING revision, fence",
                &[Text(k)],
                &mut revision_and_fence,
            )?;
            if let Some(c) = caught_up {
                claimed = c;
            }
            let audit = named(&mut tx, req, None)?;
            chain.append(
                job,
                &Entry {
                    revision: Some(claimed.0),
                    fence: Some(claimed.1),
                    state: Some(RunState::Claimed.as_str().into()),
                    component: Some(req.component.into()),
                    audit,
                    ..Entry::new("claim", req.now, Some(k))
                },
            )?;
            seal(tx, "commit the claim", &chain)?;
            self.sealed(&chain);
            return Ok(Some(Claim::Run {
                lease: Lease {
                    key,
                    fence: Fence(claimed.1),
                    owner: req.owner.to_string(),
                    attempt: 1,
                    revision: claimed.0,
                    taken_from: None,
                },
                takeover: false,
            }));
        }
        let Some(existing) = tx.one(
            "read the claim",
            "SELECT state, fence, attempt, owner, {t lease_expires_at},
                lease_expires_at > {now}, error, retryable, {t retry_at},
                coalesce(retry_at > {now}, false), {t window_start}, {t window_end}, timezone,
                revision, report IS NOT NULL, owner_process, skip_reason
             FROM {runs} WHERE key = $1{lock}",
            &[Text(k)],
            &mut existing_row,
        )?
        else {
            return Ok(None);
        };
        let decision = decide(&existing, req)?;
        let fence = Int(existing.fence);
        let from = Some(existing.state.as_str().to_string());
        match &decision {
            Decision::Answer(_) => {}
            Decision::Abandon(why) => {
                tx.exec(
                    "abandon the claim",
                    "UPDATE {runs} SET state = 'ABANDONED', error = $3, updated_at = {now}
                     WHERE key = $1 AND fence = $2",
                    &[Text(k), fence, Text(why)],
                )?;
                chain.append(
                    job,
                    &Entry {
                        revision: Some(existing.revision),
                        fence: Some(existing.fence),
                        state: Some(RunState::Abandoned.as_str().into()),
                        from,
                        error: Some(digest(why.as_bytes())),
                        ..Entry::new("abandon", req.now, Some(k))
                    },
                )?;
            }
            Decision::TakeOver { .. } => {
                tx.exec(
                    "take over the claim",
                    "UPDATE {runs} SET
                        state = CASE state WHEN 'PREPARED' THEN 'PREPARED' ELSE 'CLAIMED' END,
                        fence = $3, owner = $4, lease_expires_at = {after $5}, attempt = $6,
                        component = CASE state WHEN 'PREPARED' THEN component ELSE $7 END,
                        skip_reason = NULL, retry_at = NULL, updated_at = {now}, owner_process = $8
                     WHERE key = $1 AND fence = $2",
                    &[
                        Text(k),
                        fence,
                        Int(existing.fence + 1),
                        Text(req.owner),
                        After(Some(req.lease)),
                        Int(i64::from(existing.attempt) + 1),
                        Text(req.component),
                        OptText(process),
                    ],
                )?;
                let prepared = existing.state == RunState::Prepared;
                let audit = named(&mut tx, req, Some(existing.state.as_str()))?;
                chain.append(job, &taken(req, &existing, prepared, from, audit))?;
            }
            Decision::Restart { .. } => {
                let audit = restart(&mut tx, &key, req, &existing, process)?;
                let entry = taken(req, &existing, existing.has_report, from, Some(audit));
                chain.append(job, &entry)?;
            }
            Decision::Rerun => {
                let (audit, archived) = rerun(&mut tx, &key, req, &existing, process)?;
                chain.append(
                    job,
                    &Entry {
                        revision: Some(existing.revision + 1),
                        fence: Some(existing.fence + 1),
                        state: Some(RunState::Claimed.as_str().into()),
                        from,
                        component: Some(req.component.into()),
                        reason: Some(req.purpose.reason().unwrap_or("").to_string()),
                        audit: Some(audit),
                        archived: Some(archived),
                        ..Entry::new("claim", req.now, Some(k))
                    },
                )?;
            }
        }
        seal(tx, "commit the claim", &chain)?;
        self.sealed(&chain);
        Ok(Some(decided(decision, req, &existing)))
    }

    /// A batch's statement binds five shared values and four per window,
    /// all below SQLite's `{now}` (`?99`).
    const FRESH_PARAMETERS_FIT: () = assert!(5 + 4 * FreshClaims::MOST < 99);

    /// [`ClaimStore::claim_fresh`] of `windows`, with a hold past the
    /// claim's wait (on any of its statements) told apart. A row claimed
    /// ahead has attempt 0 until its run commits or fails: a window whose
    /// holder died before starting it has used none of its attempts.
    fn try_claim_fresh(
        &mut self,
        req: &FreshClaims<'_>,
        windows: &[Window],
    ) -> Result<Vec<Lease>, Fail> {
        let () = Self::FRESH_PARAMETERS_FIT;
        let job = req.job.as_str();
        let process = req.probe.record(req.owner);
        let what = "claim a batch";
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Claim,
            what,
            req.now,
            &[job],
        )?;

        let paused = tx.one(
            "read the job's pause",
            "SELECT 1 FROM {pauses} WHERE job = $1",
            &[Text(job)],
            &mut |_| Ok(()),
        )?;
        if paused.is_some() {
            return Ok(Vec::new());
        }
        // One row per window, numbered after the five values they share.
        let keys: Vec<WindowKey> = windows.iter().map(Window::key).collect();
        let mut args = vec![
            Text(job),
            Text(req.owner),
            After(Some(req.lease)),
            Text(req.component),
            OptText(process.as_deref()),
        ];
        let mut rows = Vec::with_capacity(windows.len());
        for (w, key) in windows.iter().zip(&keys) {
            let n = args.len();
            let (k, zone, start, end) = (n + 1, n + 2, n + 3, n + 4);
            rows.push(format!(
                "(${k}, $1, {{time ${start}}}, {{time ${end}}}, ${zone}, 'CLAIMED',
                  coalesce((SELECT next_fence FROM {{forgotten}} WHERE key = ${k}), 1), $2,
                  {{after $3}}, 0, $4, {{now}}, {{now}},
                  coalesce((SELECT next_revision FROM {{forgotten}} WHERE key = ${k}), 1), $5)"
            ));
            args.extend([
                Text(key.as_str()),
                Text(w.zone.name()),
                Time(w.start),
                Time(w.end),
            ]);
        }
        let sql = format!(
            "INSERT INTO {{runs}} (key, job, window_start, window_end, timezone, state, fence,
                owner, lease_expires_at, attempt, component, created_at, updated_at, revision,
                owner_process)
             VALUES {}
             ON CONFLICT (key) DO NOTHING
             RETURNING key, revision, fence",
            rows.join(", ")
        );
        let mut granted: std::collections::HashMap<String, (u32, i64)> = tx
            .query(
                "insert the claims",
                &sql,
                &args,
                &mut key_revision_and_fence,
            )?
            .into_iter()
            .collect();
        if !granted.is_empty() {
            // As in a claim: an insert that waited for a `forget` of its key
            // goes on from the forgotten fence and revision.
            let inserted: Vec<&str> = granted.keys().map(String::as_str).collect();
            let list = serde_json::to_string(&inserted)
                .map_err(|e| Error::host(format!("cannot list the claimed keys: {e}")))?;
            let caught_up = tx.query(
                "insert the claims",
                "UPDATE {runs} SET fence = f.next_fence, revision = f.next_revision
                 FROM {forgotten} f
                 WHERE f.job = $1 AND f.key = {runs}.key AND {runs}.key IN {keys $2}
                   AND (f.next_fence > {runs}.fence OR f.next_revision > {runs}.revision)
                 RETURNING {runs}.key, {runs}.revision, {runs}.fence",
                &[Text(job), Text(&list)],
                &mut key_revision_and_fence,
            )?;
            granted.extend(caught_up);
            let windows = keys
                .iter()
                .filter_map(|k| {
                    let (revision, fence) = granted.get(k.as_str())?;
                    Some(WindowFact {
                        key: k.to_string(),
                        revision: Some(*revision),
                        fence: Some(*fence),
                    })
                })
                .collect();
            chain.append(
                job,
                &Entry {
                    state: Some(RunState::Claimed.as_str().into()),
                    component: Some(req.component.into()),
                    windows,
                    ..Entry::new("claims", req.now, None)
                },
            )?;
        }
        seal(tx, "commit the claims", &chain)?;
        self.sealed(&chain);
        Ok(keys
            .into_iter()
            .filter_map(|key| {
                let (revision, fence) = granted.remove(key.as_str())?;
                Some(Lease {
                    key,
                    fence: Fence(fence),
                    owner: req.owner.to_string(),
                    attempt: 1,
                    revision,
                    taken_from: None,
                })
            })
            .collect())
    }

    /// [`ClaimStore::release`].
    fn release_claims(&mut self, leases: &[Lease], now: Timestamp) -> Result<()> {
        if leases.is_empty() {
            return Ok(());
        }
        let what = "let go of claims not started";
        let jobs: Vec<&str> = leases.iter().map(|l| job_of(l.key.as_str())).collect();
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &jobs,
        )?;
        let mut released: Vec<(&str, WindowFact)> = Vec::new();
        for lease in leases {
            let k = Text(lease.key.as_str());
            let gone = tx.one(
                what,
                "DELETE FROM {runs}
                 WHERE key = $1 AND fence = $2 AND owner = $3 AND state = 'CLAIMED'
                 RETURNING job, {t window_start}",
                &[k, Int(lease.fence.0), Text(&lease.owner)],
                &mut |r| Ok((r.text(0)?, r.time(1)?)),
            )?;
            // Taken over meanwhile: not ours to let go of.
            let Some((job, start)) = gone else { continue };
            released.push((
                job_of(lease.key.as_str()),
                WindowFact {
                    key: lease.key.to_string(),
                    revision: None,
                    fence: None,
                },
            ));
            // Its next claim takes the next fence, so this lease can never
            // match a row again; and no plan read before stays past it.
            no_row_again(
                &mut tx,
                &lease.key,
                &job,
                start,
                (i64::from(lease.revision), lease.fence.0 + 1),
            )?;
        }
        let mut jobs: Vec<&str> = released.iter().map(|(j, _)| *j).collect();
        jobs.sort_unstable();
        jobs.dedup();
        for job in jobs {
            let windows = released
                .iter()
                .filter(|(j, _)| *j == job)
                .map(|(_, w)| w.clone())
                .collect();
            chain.append(
                job,
                &Entry {
                    windows,
                    ..Entry::new("release", now, None)
                },
            )?;
        }
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(())
    }

    /// One batch of [`Ledger::prune`] over DONE runs (`revisions` false)
    /// or archived revisions; `None` when nothing was left to prune.
    fn prune_batch(
        &mut self,
        revisions: bool,
        job: &str,
        before: Timestamp,
        keep_journals: bool,
        now: Timestamp,
    ) -> Result<Option<Pruned>> {
        let what = "prune";
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        // The rows are picked (and on PostgreSQL locked), their sizes read,
        // then their bytes dropped, by key (and revision).
        let (pick, bodies, drop_bodies, mark) = if revisions {
            (
                "SELECT key, revision, {len journal} FROM {revisions}
                 WHERE pruned_at IS NULL AND window_end <= {time $1} AND job = $2
                 LIMIT $3{lock}",
                "SELECT CAST(coalesce(sum({len body}), 0) AS BIGINT) FROM {revision_messages}
                 WHERE state = 'DELIVERED' AND key IN {keys $1}
                   AND revision || ' ' || key IN {keys $2}",
                "UPDATE {revision_messages} SET body = $3
                 WHERE state = 'DELIVERED' AND key IN {keys $1}
                   AND revision || ' ' || key IN {keys $2}",
                "UPDATE {revisions} SET pruned_at = {now},
                    journal = CASE WHEN $3 THEN journal ELSE NULL END
                 WHERE key IN {keys $1} AND revision || ' ' || key IN {keys $2}",
            )
        } else {
            (
                "SELECT key, revision, {len journal} FROM {runs}
                 WHERE state = 'DONE' AND pruned_at IS NULL AND window_end <= {time $1}
                   AND job = $2
                 LIMIT $3{lock}",
                "SELECT CAST(coalesce(sum({len body}), 0) AS BIGINT) FROM {outbox}
                 WHERE state = 'DELIVERED' AND key IN {keys $1}",
                "UPDATE {outbox} SET body = $3
                 WHERE state = 'DELIVERED' AND key IN {keys $1}",
                "UPDATE {runs} SET pruned_at = {now},
                    journal = CASE WHEN $3 THEN journal ELSE NULL END
                 WHERE key IN {keys $1}",
            )
        };
        let picked = tx.query(
            what,
            pick,
            &[Time(before), Text(job), Int(PRUNE_BATCH)],
            &mut |r| Ok((r.text(0)?, r.int(1)?, r.opt_int(2)?.unwrap_or(0))),
        )?;
        if picked.is_empty() {
            return Ok(None);
        }
        let keys = json_list(picked.iter().map(|(k, _, _)| k.clone()));
        let pairs = json_list(picked.iter().map(|(k, rev, _)| format!("{rev} {k}")));
        let args = [Text(&keys), Text(&pairs)];
        let body_bytes = tx.query(what, bodies, &args, &mut |r| r.int(0))?;
        tx.exec(what, drop_bodies, &[args[0], args[1], Bytes(&[])])?;
        tx.exec(what, mark, &[args[0], args[1], Flag(keep_journals)])?;
        // A shadow run's output goes with the run's bodies; its verdict and
        // differences stay.
        tx.exec(
            what,
            "UPDATE {shadows} SET report = NULL, messages = NULL
             WHERE key IN {keys $1} AND revision || ' ' || key IN {keys $2}",
            &[args[0], args[1]],
        )?;
        let windows = picked
            .iter()
            .map(|(k, rev, _)| WindowFact {
                key: k.clone(),
                revision: u32::try_from(*rev).ok(),
                fence: None,
            })
            .collect();
        chain.append(
            job,
            &Entry {
                windows,
                state: keep_journals.then(|| "journals kept".to_string()),
                ..Entry::new(
                    if revisions {
                        "pruned-revisions"
                    } else {
                        "pruned"
                    },
                    now,
                    None,
                )
            },
        )?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        let journal_bytes: i64 = if keep_journals {
            0
        } else {
            picked.iter().map(|(_, _, n)| n).sum()
        };
        Ok(Some(Pruned {
            runs: picked.len() as u64,
            journal_bytes: journal_bytes.unsigned_abs(),
            body_bytes: body_bytes.first().copied().unwrap_or(0).unsigned_abs(),
        }))
    }
}

/// A JSON list of strings, for `{keys $N}`.
fn json_list(items: impl Iterator<Item = String>) -> String {
    serde_json::Value::from(items.collect::<Vec<_>>()).to_string()
}

/// A window whose row was deleted (`forget`, or a claim let go of): its
/// next claim goes on from `next` (revision, fence), and the job's
/// `decided_until` goes back to its start if it was past it; whether it
/// moved.
fn no_row_again<T: Tx>(
    tx: &mut T,
    key: &WindowKey,
    job: &str,
    start: Timestamp,
    next: (i64, i64),
) -> Result<bool> {
    let what = "record the window as having no row";
    tx.exec(
        what,
        "INSERT INTO {forgotten} (key, job, window_start, next_revision, next_fence, at)
         VALUES ($1, $2, {time $3}, $4, $5, {now})
         ON CONFLICT (key) DO UPDATE SET
            next_revision = greatest({forgotten}.next_revision, excluded.next_revision),
            next_fence = greatest({forgotten}.next_fence, excluded.next_fence),
            at = excluded.at",
        &[
            Text(key.as_str()),
            Text(job),
            Time(start),
            Int(next.0),
            Int(next.1),
        ],
    )?;
    let moved = tx.exec(
        what,
        "UPDATE {schedule} SET decided_until = {time $2}, updated_at = {now}
         WHERE job = $1 AND decided_until > {time $2}",
        &[Text(job), Time(start)],
    )?;
    Ok(moved > 0)
}

fn key_revision_and_fence(r: &dyn Row) -> Result<(String, (u32, i64))> {
    Ok((r.text(0)?, (r.count(1)?, r.int(2)?)))
}

fn revision_and_fence(r: &dyn Row) -> Result<(u32, i64)> {
    Ok((r.count(0)?, r.int(1)?))
}

fn existing_row(r: &dyn Row) -> Result<Existing> {
    let retry_at = r.opt_time(8)?;
    Ok(Existing {
        state: state(r, 0)?,
        fence: r.int(1)?,
        attempt: r.count(2)?,
        owner: r.text(3)?,
        owner_process: r.opt_text(15)?,
        skip_reason: r.opt_text(16)?,
        lease_until: r.time(4)?,
        lease_live: r.flag(5)?,
        error: r.opt_text(6)?,
        retryable: r.flag(7)?,
        retry_pending: if r.flag(9)? { retry_at } else { None },
        bounds: (r.time(10)?, r.time(11)?, r.text(12)?),
        revision: r.count(13)?,
        has_report: r.flag(14)?,
    })
}

impl<B: Backend> ClaimStore for SqlStore<B> {
    fn created(&self) -> bool {
        self.created
    }

    fn last_entry(&self) -> Option<String> {
        self.last_entry.clone()
    }

    fn claim(&mut self, req: &ClaimRequest<'_>) -> Result<Claim> {
        loop {
            match self.try_claim(req) {
                Ok(Some(claim)) => return Ok(claim),
                Ok(None) => {}
                // The write lock (SQLite) or the window's row (PostgreSQL)
                // was held longer than any claim takes: by a process paused
                // or stuck in the middle of a write. The window is busy,
                // not failed.
                Err(Fail::Locked(_)) => {
                    let (held, waited) = self.backend.held();
                    return Ok(Claim::Locked { held, waited });
                }
                Err(Fail::Other(e)) => return Err(e),
            }
        }
    }

    fn claim_fresh(&mut self, req: &FreshClaims<'_>) -> Result<Vec<Lease>> {
        let windows = &req.windows[..req.windows.len().min(FreshClaims::MOST)];
        if windows.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(w) = windows.iter().find(|w| w.job != *req.job) {
            return Err(Error::host(format!(
                "a batch of claims for job `{}` was given window `{}` of another job",
                req.job,
                w.key()
            )));
        }
        match self.try_claim_fresh(req, windows) {
            Ok(leases) => Ok(leases),
            // Held past the claim's wait: each window is claimed on its own
            // later, and answered as held then.
            Err(Fail::Locked(_)) => Ok(Vec::new()),
            Err(Fail::Other(e)) => Err(e),
        }
    }

    fn release(&mut self, leases: &[Lease], now: Timestamp) -> Result<()> {
        self.release_claims(leases, now)
    }

    fn prepare_using(
        &mut self,
        lease: &Lease,
        report: &StoredReport,
        messages: &[StagedMessage],
        journal: &[u8],
        read: &RunInputs,
        now: Timestamp,
    ) -> Result<()> {
        let what = "commit the report";
        let key = lease.key.as_str();
        let job = job_of(key);
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        let changed = tx.exec(
            what,
            "UPDATE {runs} SET state = 'PREPARED', report = $3, report_cursor = $4,
                journal = $5, digest_prompt = $6, described = $7, error = NULL,
                attempt = greatest(attempt, 1), inputs = $8, updated_at = {now}
             WHERE key = $1 AND fence = $2 AND state = 'CLAIMED'",
            &[
                Text(key),
                Int(lease.fence.0),
                Text(&report.summary),
                OptText(report.cursor.as_deref()),
                Bytes(journal),
                OptText(report.prompt.as_deref()),
                Flag(report.described),
                OptText(read.fingerprint.as_deref()),
            ],
        )?;
        fenced(changed, lease)?;
        let entry = chain.append(
            job,
            &Entry {
                revision: Some(lease.revision),
                fence: Some(lease.fence.0),
                state: Some(RunState::Prepared.as_str().into()),
                report: Some(digest(report.summary.as_bytes())),
                journal: Some(digest(journal)),
                inputs: read.fingerprint.clone(),
                messages: messages
                    .iter()
                    .map(|m| MessageFact {
                        seq: m.seq,
                        destination: m.destination.clone(),
                        idempotency_key: m.idempotency_key.clone(),
                        body: digest(&m.body),
                    })
                    .collect(),
                ..Entry::new("report", now, Some(key))
            },
        )?;
        for m in messages {
            tx.exec(
                "stage messages",
                "INSERT INTO {outbox} (key, seq, destination, idempotency_key, content_type,
                    body, state, updated_at, entry)
                 VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', {now}, $7)",
                &[
                    Text(key),
                    Int(i64::from(m.seq)),
                    Text(&m.destination),
                    Text(&m.idempotency_key),
                    Text(&m.content_type),
                    Bytes(&m.body),
                    OptText(entry.as_deref()),
                ],
            )?;
        }
        for u in &read.uses {
            // A run of the same revision before (one that failed after
            // committing nothing) left none; a takeover's are replaced.
            tx.exec(
                "record the upstream windows used",
                "INSERT INTO {uses} (key, revision, job, upstream_key, upstream_revision,
                    report_digest)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (key, revision, upstream_key) DO UPDATE SET
                    upstream_revision = excluded.upstream_revision,
                    report_digest = excluded.report_digest",
                &[
                    Text(key),
                    Int(i64::from(lease.revision)),
                    Text(job_of(key)),
                    Text(&u.key),
                    Int(i64::from(u.revision)),
                    Text(&u.report_digest),
                ],
            )?;
            // An upstream window rerun while this run read it: the rerun's
            // claim could not see this run's uses, so the mark is made
            // here. The row is locked, so the two cannot pass each other.
            let current = tx.one(
                "read the upstream window's revision",
                "SELECT revision FROM {runs} WHERE key = $1{lock}",
                &[Text(&u.key)],
                &mut |r| r.count(0),
            )?;
            if current.is_none_or(|n| n > u.revision) {
                tx.exec(
                    "mark the window stale",
                    "INSERT INTO {stale} (key, revision, job, about, cause, since)
                     VALUES ($1, $2, $3, $4, $5, {now})
                     ON CONFLICT (key, revision, about) DO NOTHING",
                    &[
                        Text(key),
                        Int(i64::from(lease.revision)),
                        Text(job_of(key)),
                        Text(&u.key),
                        Text(&match current {
                            Some(n) => format!(
                                "upstream `{}` was run again as revision {n} while this run read \
                                 revision {}",
                                u.key, u.revision
                            ),
                            None => {
                                format!("upstream `{}` was forgotten while this run read it", u.key)
                            }
                        }),
                    ],
                )?;
            }
        }
        if let Some(f) = &self.failpoints {
            f.reached(Boundary::InPrepare);
        }
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(())
    }

    fn pending_messages(&mut self, key: &WindowKey) -> Result<Vec<PendingMessage>> {
        self.rows(
            "read staged messages",
            "SELECT seq, destination, idempotency_key, content_type, body, attempts, in_flight,
                entry
             FROM {outbox} WHERE key = $1 AND state = 'PENDING' ORDER BY seq",
            &[Text(key.as_str())],
            &mut |r| {
                Ok(PendingMessage {
                    message: staged(r)?,
                    attempts: r.count(5)?,
                    in_flight: r.flag(6)?,
                    entry: r.opt_text(7)?,
                })
            },
        )
    }

    fn report(&mut self, key: &WindowKey) -> Result<Option<StoredReport>> {
        self.row(
            "read the report",
            "SELECT report, report_cursor, digest_prompt, described FROM {runs}
             WHERE key = $1 AND report IS NOT NULL",
            &[Text(key.as_str())],
            &mut |r| {
                Ok(StoredReport {
                    summary: r.text(0)?,
                    cursor: r.opt_text(1)?,
                    prompt: r.opt_text(2)?,
                    described: r.flag(3)?,
                })
            },
        )
    }

    fn check_lease(&mut self, lease: &Lease, now: Timestamp) -> Result<SignedDuration> {
        let what = "check the claim";
        let mut tx = self.backend.begin(Kind::Read, what, now)?;
        let left = tx.one(
            what,
            "SELECT {t lease_expires_at}, {now t} FROM {runs}
             WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
            &[Text(lease.key.as_str()), Int(lease.fence.0)],
            &mut |r| Ok(r.time(0)?.duration_since(r.time(1)?)),
        )?;
        tx.commit(what)?;
        left.ok_or_else(|| lease_lost(lease))
    }

    fn renew(
        &mut self,
        lease: &Lease,
        for_: Duration,
        in_flight: Option<u32>,
        now: Timestamp,
    ) -> Result<()> {
        let what = "renew the claim";
        let key = lease.key.as_str();
        let mut tx = self.backend.begin(Kind::Write, what, now)?;
        let changed = tx.exec(
            what,
            "UPDATE {runs} SET updated_at = {now},
                lease_expires_at = greatest(lease_expires_at, {after $3})
             WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
            &[Text(key), Int(lease.fence.0), After(Some(for_))],
        )?;
        fenced(changed, lease)?;
        if let Some(seq) = in_flight {
            tx.exec(
                "record a send",
                "UPDATE {outbox} SET in_flight = true, attempts = attempts + 1,
                    updated_at = {now}
                 WHERE key = $1 AND seq = $2 AND state = 'PENDING'",
                &[Text(key), Int(i64::from(seq))],
            )?;
        }
        tx.commit(what)
    }

    fn not_sent(&mut self, lease: &Lease, seq: u32, status: &str, now: Timestamp) -> Result<()> {
        let what = "record a send";
        let key = lease.key.as_str();
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job_of(key)],
        )?;
        still_delivering(&mut tx, lease)?;
        tx.exec(
            what,
            "UPDATE {outbox} SET in_flight = false, last_status = $3, updated_at = {now}
             WHERE key = $1 AND seq = $2 AND state = 'PENDING'",
            &[Text(key), Int(i64::from(seq)), Text(status)],
        )?;
        chain.append(
            job_of(key),
            &Entry {
                fence: Some(lease.fence.0),
                outcomes: vec![Outcome {
                    seq,
                    state: MessageState::Pending.as_str().into(),
                    status: Some(status.into()),
                }],
                ..Entry::new("attempt", now, Some(key))
            },
        )?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(())
    }

    fn mark_delivered(
        &mut self,
        lease: &Lease,
        done: &Attempted<'_>,
        now: Timestamp,
    ) -> Result<()> {
        let what = "record a delivery";
        let key = lease.key.as_str();
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job_of(key)],
        )?;
        record_delivery(&mut tx, lease, done)?;
        chain.append(
            job_of(key),
            &Entry {
                fence: Some(lease.fence.0),
                outcomes: vec![delivered(done)],
                ..Entry::new("delivered", now, Some(key))
            },
        )?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(())
    }

    fn finish(
        &mut self,
        lease: &Lease,
        last_delivery: Option<&Attempted<'_>>,
        now: Timestamp,
    ) -> Result<()> {
        let what = "mark the run done";
        let key = Text(lease.key.as_str());
        let job = job_of(lease.key.as_str());
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        if let Some(done) = last_delivery {
            record_delivery(&mut tx, lease, done)?;
        }
        let changed = tx.exec(
            what,
            "UPDATE {runs} SET state = 'DONE', error = NULL, retry_at = NULL, updated_at = {now}
             WHERE key = $1 AND fence = $2 AND state = 'PREPARED'
               AND NOT EXISTS (SELECT 1 FROM {outbox} o
                               WHERE o.key = $1 AND o.state <> 'DELIVERED')",
            &[key, Int(lease.fence.0)],
        )?;
        if changed == 0 {
            let still_ours = tx.one(
                what,
                "SELECT 1 FROM {runs} WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
                &[key, Int(lease.fence.0)],
                &mut |_| Ok(()),
            )?;
            if still_ours.is_some() {
                return Err(undelivered(lease));
            }
        }
        fenced(changed, lease)?;
        // The cursor moves only with DONE, and never backwards: a late
        // catch-up of an older window keeps the newer window's cursor.
        tx.exec(
            "move the cursor",
            "INSERT INTO {cursors} (job, cursor, key, window_end, updated_at)
             SELECT job, report_cursor, key, window_end, {now} FROM {runs}
             WHERE key = $1 AND report_cursor IS NOT NULL
             ON CONFLICT (job) DO UPDATE SET cursor = excluded.cursor, key = excluded.key,
                window_end = excluded.window_end, updated_at = excluded.updated_at
             WHERE excluded.window_end >= {cursors}.window_end",
            &[key],
        )?;
        chain.append(
            job,
            &Entry {
                revision: Some(lease.revision),
                fence: Some(lease.fence.0),
                state: Some(RunState::Done.as_str().into()),
                outcomes: last_delivery.map(delivered).into_iter().collect(),
                ..Entry::new("done", now, Some(lease.key.as_str()))
            },
        )?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(())
    }

    fn fail(
        &mut self,
        lease: &Lease,
        error: &str,
        how: Failure,
        message: Option<&Attempted<'_>>,
        now: Timestamp,
    ) -> Result<()> {
        let what = "record the failure";
        // A PREPARED run that will be retried keeps its state (its report
        // and messages are committed) and only lets its lease go.
        let t = how.transition();
        let job = job_of(lease.key.as_str());
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        let states = tx.query(
            what,
            "UPDATE {runs} SET
                state = coalesce($3, CASE state WHEN 'CLAIMED' THEN 'FAILED' ELSE state END),
                retryable = $4, retry_at = {after $5}, error = $6, updated_at = {now},
                lease_expires_at = least(lease_expires_at, {now}),
                attempt = greatest(greatest(attempt, 1) - $7, 0)
             WHERE key = $1 AND fence = $2 AND state IN ('CLAIMED', 'PREPARED')
             RETURNING state",
            &[
                Text(lease.key.as_str()),
                Int(lease.fence.0),
                OptText(t.run_state.map(RunState::as_str)),
                Flag(t.retry_after.is_some()),
                After(t.retry_after),
                Text(error),
                Int(i64::from(!t.counted)),
            ],
            &mut |r| r.text(0),
        )?;
        fenced(states.len() as u64, lease)?;
        if let Some(m) = message {
            tx.exec(
                "record the failed delivery",
                "UPDATE {outbox} SET state = $3, in_flight = false, attempts = attempts + $4,
                    last_status = $5, updated_at = {now}
                 WHERE key = $1 AND seq = $2 AND state = 'PENDING'",
                &[
                    Text(lease.key.as_str()),
                    Int(i64::from(m.seq)),
                    Text(t.message_state.as_str()),
                    Int(i64::from(m.tries)),
                    Text(m.status),
                ],
            )?;
        }
        chain.append(
            job,
            &Entry {
                revision: Some(lease.revision),
                fence: Some(lease.fence.0),
                state: states.into_iter().next(),
                error: Some(digest(error.as_bytes())),
                outcomes: message
                    .map(|m| Outcome {
                        seq: m.seq,
                        state: t.message_state.as_str().into(),
                        status: Some(m.status.into()),
                    })
                    .into_iter()
                    .collect(),
                ..Entry::new("failed", now, Some(lease.key.as_str()))
            },
        )?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(())
    }

    fn cursor(&mut self, job: &JobName) -> Result<Option<String>> {
        let found = self.row(
            "read the cursor",
            "SELECT cursor FROM {cursors} WHERE job = $1",
            &[Text(job.as_str())],
            &mut |r| r.opt_text(0),
        )?;
        Ok(found.flatten())
    }
}

impl<B: Backend> Ledger for SqlStore<B> {
    fn peek(&mut self, key: &WindowKey) -> Result<Option<RunRecord>> {
        let sql = format!(
            "SELECT {} FROM {RUN_TABLES} WHERE r.key = $1",
            self.run_columns()
        );
        self.row("read a run", &sql, &[Text(key.as_str())], &mut run_record)
    }

    fn peek_head(&mut self, key: &WindowKey) -> Result<Option<RunHead>> {
        // An older store kept the skip's reason in `error`.
        let skip_reason = if self.backend.skip_column() {
            "skip_reason"
        } else {
            "CASE WHEN state = 'SKIPPED' THEN error END"
        };
        let sql = format!(
            "SELECT {{t window_start}}, {{t window_end}}, timezone, state, fence, attempt, \
             component, {skip_reason} FROM {{runs}} WHERE key = $1"
        );
        self.row("read a run", &sql, &[Text(key.as_str())], &mut |r| {
            Ok(RunHead {
                window_start: r.time(0)?,
                window_end: r.time(1)?,
                timezone: r.text(2)?,
                state: state(r, 3)?,
                fence: Fence(r.int(4)?),
                attempt: r.count(5)?,
                component: r.text(6)?,
                skip_reason: r.opt_text(7)?,
            })
        })
    }

    fn messages(&mut self, key: &WindowKey) -> Result<Vec<StagedMessage>> {
        self.rows(
            "read staged messages",
            "SELECT seq, destination, idempotency_key, content_type, body
             FROM {outbox} WHERE key = $1 ORDER BY seq",
            &[Text(key.as_str())],
            &mut staged,
        )
    }

    fn journal(&mut self, key: &WindowKey) -> Result<Option<Vec<u8>>> {
        let found = self.row(
            "read the journal",
            "SELECT journal FROM {runs} WHERE key = $1",
            &[Text(key.as_str())],
            &mut |r| r.opt_bytes(0),
        )?;
        Ok(found.flatten())
    }

    fn jobs(&mut self) -> Result<Vec<String>> {
        self.rows(
            "list the jobs",
            "SELECT DISTINCT job{C} FROM {runs} ORDER BY 1",
            &[],
            &mut |r| r.text(0),
        )
    }

    fn history(&mut self, job: Option<&str>) -> Result<Vec<RunRecord>> {
        self.runs_where("$1 IS NULL OR r.job = $1", &[OptText(job)])
    }

    fn newest(&mut self, job: Option<&str>, limit: u64) -> Result<Vec<RunRecord>> {
        self.runs_where_limited("$1 IS NULL OR r.job = $1", &[OptText(job)], Some(limit))
    }

    fn history_from(&mut self, job: &str, from: Option<Timestamp>) -> Result<Vec<RunRecord>> {
        self.runs_where(
            "r.job = $1 AND r.window_start >= {time $2}",
            &[Text(job), Lower(from)],
        )
    }

    fn runs_in_range(&mut self, q: &RangeQuery<'_>) -> Result<Vec<RunRecord>> {
        let sql = self.range_sql(q);
        let limit = i64::try_from(q.limit).unwrap_or(i64::MAX);
        self.rows(
            "read history",
            &sql,
            &[Text(q.job), Lower(q.from), Upper(q.until), Int(limit)],
            &mut run_record,
        )
    }

    fn state_counts(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<Vec<(RunState, u64)>> {
        let range = "job = $1 AND window_start >= {time $2} AND window_start < {time $3}";
        // The whole history's counts are kept as it changes where the store
        // keeps them; a range's are counted over the state index.
        let sql = if self.backend.counted() && from.is_none() && until.is_none() {
            "SELECT state, n FROM {run_counts} WHERE job = $1 AND n > 0".to_string()
        } else if self.backend.state_index() {
            RunState::counts_sql("{runs}", range)
        } else {
            format!("SELECT state, count(*) FROM {{runs}} WHERE {range} GROUP BY state")
        };
        let rows = self.rows(
            "count windows",
            &sql,
            &[Text(job), Lower(from), Upper(until)],
            &mut |r| Ok((r.text(0)?, r.int(1)?)),
        )?;
        Ok(rows
            .into_iter()
            .filter_map(|(s, n)| Some((RunState::parse(&s)?, u64::try_from(n).unwrap_or(0))))
            .collect())
    }

    fn unfinished(&mut self, job: &str) -> Result<Vec<RunRecord>> {
        self.runs_where(
            "r.job = $1 AND (r.state IN ('CLAIMED', 'PREPARED', 'WAITING')
                OR (r.state = 'FAILED' AND r.retry_at IS NOT NULL))",
            &[Text(job)],
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
        let what = "record skipped windows";
        let jobs: Vec<&str> = skips.iter().map(|s| s.window.job.as_str()).collect();
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &jobs,
        )?;
        let mut recorded = Vec::with_capacity(skips.len());
        for skip in skips {
            let w = skip.window;
            // Only a row already there is passed over; any other violation
            // is an error.
            let inserted = tx.query(
                "record a skipped window",
                "INSERT INTO {runs} (key, job, window_start, window_end, timezone, state, fence,
                    owner, lease_expires_at, attempt, component, skip_reason, created_at,
                    updated_at, revision)
                 VALUES ($1, $2, {time $3}, {time $4}, $5, 'SKIPPED',
                    coalesce((SELECT next_fence - 1 FROM {forgotten} WHERE key = $1), 0),
                    $6, {now}, 0, '', $7, {now}, {now},
                    coalesce((SELECT next_revision FROM {forgotten} WHERE key = $1), 1))
                 ON CONFLICT (key) DO NOTHING
                 RETURNING key",
                &[
                    Text(w.key().as_str()),
                    Text(w.job.as_str()),
                    Time(w.start),
                    Time(w.end),
                    Text(w.zone.name()),
                    Text(owner),
                    Text(skip.reason),
                ],
                &mut |_| Ok(()),
            )?;
            recorded.push(!inserted.is_empty());
        }
        // As in a claim: a skip that waited for a `forget` of its key goes
        // on from the forgotten fence and revision.
        let mut jobs: Vec<&str> = skips.iter().map(|s| s.window.job.as_str()).collect();
        jobs.sort_unstable();
        jobs.dedup();
        for job in jobs {
            tx.exec(
                what,
                "UPDATE {runs} AS r SET fence = f.next_fence - 1, revision = f.next_revision
                 FROM {forgotten} f
                 WHERE f.job = $1 AND f.key = r.key AND r.state = 'SKIPPED'
                   AND (r.fence < f.next_fence - 1 OR r.revision < f.next_revision)",
                &[Text(job)],
            )?;
            let windows: Vec<WindowFact> = skips
                .iter()
                .zip(&recorded)
                .filter(|(s, new)| **new && s.window.job.as_str() == job)
                .map(|(s, _)| WindowFact {
                    key: s.window.key().to_string(),
                    revision: None,
                    fence: None,
                })
                .collect();
            // A catch-up may skip many windows at once: an entry names at
            // most a bounded number of them.
            for some in windows.chunks(MOST_WINDOWS_PER_ENTRY) {
                chain.append(
                    job,
                    &Entry {
                        state: Some(RunState::Skipped.as_str().into()),
                        windows: some.to_vec(),
                        ..Entry::new("skipped", now, None)
                    },
                )?;
            }
        }
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(recorded)
    }

    fn record_waiting(
        &mut self,
        window: &Window,
        waits_for: &str,
        owner: &str,
        now: Timestamp,
    ) -> Result<bool> {
        let what = "record a window waiting for its upstream";
        let key = window.key();
        let job = window.job.as_str();
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        let inserted = tx.query(
            what,
            "INSERT INTO {runs} (key, job, window_start, window_end, timezone, state, fence,
                owner, lease_expires_at, attempt, component, skip_reason, created_at,
                updated_at, revision)
             VALUES ($1, $2, {time $3}, {time $4}, $5, 'WAITING',
                coalesce((SELECT next_fence - 1 FROM {forgotten} WHERE key = $1), 0),
                $6, {now}, 0, '', $7, {now}, {now},
                coalesce((SELECT next_revision FROM {forgotten} WHERE key = $1), 1))
             ON CONFLICT (key) DO NOTHING
             RETURNING key",
            &[
                Text(key.as_str()),
                Text(window.job.as_str()),
                Time(window.start),
                Time(window.end),
                Text(window.zone.name()),
                Text(owner),
                Text(waits_for),
            ],
            &mut |_| Ok(()),
        )?;
        let waiting = if inserted.is_empty() {
            // Only the words change, and only when they do.
            tx.exec(
                what,
                "UPDATE {runs} SET skip_reason = $2, updated_at = {now}
                 WHERE key = $1 AND state = 'WAITING' AND skip_reason <> $2",
                &[Text(key.as_str()), Text(waits_for)],
            )?;
            tx.one(
                what,
                "SELECT state FROM {runs} WHERE key = $1",
                &[Text(key.as_str())],
                &mut |r| Ok(r.text(0)? == RunState::Waiting.as_str()),
            )?
            .unwrap_or(false)
        } else {
            chain.append(
                job,
                &Entry {
                    state: Some(RunState::Waiting.as_str().into()),
                    ..Entry::new("waiting", now, Some(key.as_str()))
                },
            )?;
            true
        };
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(waiting)
    }

    fn stale(
        &mut self,
        job: Option<&str>,
        key: Option<&WindowKey>,
        limit: usize,
    ) -> Result<Vec<StaleMark>> {
        if !self.backend.needs_tables() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.rows(
            "read stale windows",
            "SELECT s.key, s.job, s.revision, s.about, s.cause, {t s.since}
             FROM {stale} s JOIN {runs} r ON r.key = s.key AND r.revision = s.revision
             WHERE ($1 = '' OR s.job = $1) AND ($3 = '' OR s.key = $3)
             ORDER BY r.window_start DESC, s.key, s.about
             LIMIT $2",
            &[
                Text(job.unwrap_or("")),
                Int(limit),
                Text(key.map_or("", WindowKey::as_str)),
            ],
            &mut |r| {
                Ok(StaleMark {
                    key: WindowKey::from_stored(r.text(0)?),
                    job: r.text(1)?,
                    revision: r.count(2)?,
                    about: r.text(3)?,
                    cause: r.text(4)?,
                    since: r.time(5)?,
                })
            },
        )
    }

    fn inputs(
        &mut self,
        job: &str,
        from: Option<Timestamp>,
        until: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<InputsRecord>> {
        if !self.backend.needs_tables() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.rows(
            "read what DONE windows read",
            "SELECT key, revision, {t window_start}, {t window_end}, inputs,
                pruned_at IS NOT NULL OR journal IS NULL
             FROM {runs}
             WHERE job = $1 AND state = 'DONE'
               AND window_start >= {time $2} AND window_start < {time $3}
             ORDER BY window_start
             LIMIT $4",
            &[Text(job), Lower(from), Upper(until), Int(limit)],
            &mut |r| {
                Ok(InputsRecord {
                    key: WindowKey::from_stored(r.text(0)?),
                    revision: r.count(1)?,
                    window_start: r.time(2)?,
                    window_end: r.time(3)?,
                    fingerprint: r.opt_text(4)?,
                    pruned: r.flag(5)?,
                })
            },
        )
    }

    fn mark_stale(
        &mut self,
        key: &WindowKey,
        revision: u32,
        about: &str,
        cause: &str,
        now: Timestamp,
    ) -> Result<bool> {
        let changed = self.write_one(
            "mark a window stale",
            "INSERT INTO {stale} (key, revision, job, about, cause, since)
             SELECT key, revision, job, $3, $4, {now} FROM {runs}
             WHERE key = $1 AND revision = $2 AND state = 'DONE'
             ON CONFLICT (key, revision, about) DO UPDATE SET
                cause = excluded.cause, since = excluded.since",
            &[
                Text(key.as_str()),
                Int(i64::from(revision)),
                Text(about),
                Text(cause),
            ],
            now,
        )?;
        Ok(changed > 0)
    }

    fn record_shadow(&mut self, run: &ShadowRun, now: Timestamp) -> Result<bool> {
        let differences = json_list(run.differences.iter().cloned());
        let changed = self.write_one(
            "record a shadow run",
            "INSERT INTO {shadows} (key, revision, job, component, verdict, report, messages,
                differences, error, at)
             SELECT key, revision, job, $3, $4, $5, $6, $7, $8, {now} FROM {runs}
             WHERE key = $1 AND revision = $2
             ON CONFLICT (key, revision) DO UPDATE SET
                component = excluded.component, verdict = excluded.verdict,
                report = excluded.report, messages = excluded.messages,
                differences = excluded.differences, error = excluded.error, at = excluded.at",
            &[
                Text(run.key.as_str()),
                Int(i64::from(run.revision)),
                Text(&run.component),
                Text(&run.verdict),
                OptText(run.report.as_deref()),
                OptText(run.messages.as_deref()),
                Text(&differences),
                OptText(run.error.as_deref()),
            ],
            now,
        )?;
        Ok(changed > 0)
    }

    fn shadow(&mut self, key: &WindowKey) -> Result<Option<ShadowRun>> {
        if !self.backend.needs_tables() {
            return Ok(None);
        }
        self.row(
            "read a shadow run",
            "SELECT s.key, s.revision, s.component, s.verdict, s.report, s.messages,
                s.differences, s.error, {t s.at}
             FROM {shadows} s JOIN {runs} r ON r.key = s.key AND r.revision = s.revision
             WHERE s.key = $1",
            &[Text(key.as_str())],
            &mut |r| {
                // Written by `record_shadow` as a JSON list of strings.
                let differences: Vec<String> = serde_json::from_str(&r.text(6)?)
                    .map_err(|_| damaged(6, "a shadow run's differences"))?;
                Ok(ShadowRun {
                    key: WindowKey::from_stored(r.text(0)?),
                    revision: r.count(1)?,
                    component: r.text(2)?,
                    verdict: r.text(3)?,
                    report: r.opt_text(4)?,
                    messages: r.opt_text(5)?,
                    differences,
                    error: r.opt_text(7)?,
                    at: r.time(8)?,
                })
            },
        )
    }

    fn shadow_counts(&mut self, job: &str) -> Result<Vec<(String, u64)>> {
        if !self.backend.needs_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "count shadow runs",
            "SELECT s.verdict, count(*) FROM {shadows} s
             JOIN {runs} r ON r.key = s.key AND r.revision = s.revision
             WHERE s.job = $1
             GROUP BY s.verdict
             ORDER BY s.verdict",
            &[Text(job)],
            &mut |r| Ok((r.text(0)?, r.int(1)?.unsigned_abs())),
        )
    }

    fn uses(&mut self, key: &WindowKey) -> Result<Vec<UpstreamUse>> {
        if !self.backend.needs_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the upstream windows used",
            "SELECT u.upstream_key, u.upstream_revision, u.report_digest
             FROM {uses} u JOIN {runs} r ON r.key = u.key AND r.revision = u.revision
             WHERE u.key = $1
             ORDER BY u.upstream_key",
            &[Text(key.as_str())],
            &mut |r| {
                Ok(UpstreamUse {
                    key: r.text(0)?,
                    revision: r.count(1)?,
                    report_digest: r.text(2)?,
                })
            },
        )
    }

    fn decided_until(&mut self, job: &JobName) -> Result<Option<Timestamp>> {
        self.row(
            "read the schedule",
            "SELECT {t decided_until} FROM {schedule} WHERE job = $1",
            &[Text(job.as_str())],
            &mut |r| r.time(0),
        )
    }

    fn set_decided_until(&mut self, job: &JobName, until: Timestamp, now: Timestamp) -> Result<()> {
        self.write_one(
            "record the schedule",
            // Never past a forgotten window that has no row again: it is
            // still to be decided, whatever a plan read before the forget.
            "INSERT INTO {schedule} (job, decided_until, updated_at)
             VALUES ($1, least({time $2}, coalesce((SELECT min(f.window_start)
                 FROM {forgotten} f WHERE f.job = $1
                   AND NOT EXISTS (SELECT 1 FROM {runs} r WHERE r.key = f.key)), {time $2})),
                 {now})
             ON CONFLICT (job) DO UPDATE SET
                decided_until = greatest({schedule}.decided_until, excluded.decided_until),
                updated_at = excluded.updated_at",
            &[Text(job.as_str()), Time(until)],
            now,
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
            "INSERT INTO {digests} (key, cache_key, model, error, updated_at)
             SELECT key, $2, $3, $4, {now} FROM {runs} WHERE key = $1
             ON CONFLICT (key) DO UPDATE SET
                cache_key = coalesce(excluded.cache_key, {digests}.cache_key),
                model = excluded.model, error = excluded.error,
                updated_at = excluded.updated_at",
            &[
                Text(key.as_str()),
                OptText(note.cache_key),
                Text(note.model),
                OptText(note.error),
            ],
            now,
        )?;
        match changed {
            0 => Err(super::no_such_run(key)),
            _ => Ok(()),
        }
    }

    fn digest_sent(&mut self, key: &WindowKey, now: Timestamp) -> Result<()> {
        let changed = self.write_one(
            "record the digest message",
            "INSERT INTO {digests} (key, sent_at, updated_at)
             SELECT key, {now}, {now} FROM {runs} WHERE key = $1
             ON CONFLICT (key) DO UPDATE SET sent_at = excluded.sent_at,
                updated_at = excluded.updated_at",
            &[Text(key.as_str())],
            now,
        )?;
        match changed {
            0 => Err(super::no_such_run(key)),
            _ => Ok(()),
        }
    }

    fn cursor_before(&mut self, job: &JobName, start: Timestamp) -> Result<Option<String>> {
        let found = self.row(
            "read the cursor",
            "SELECT report_cursor FROM {runs}
             WHERE job = $1 AND state = 'DONE' AND window_end <= {time $2}
             ORDER BY window_end DESC LIMIT 1",
            &[Text(job.as_str()), Time(start)],
            &mut |r| r.opt_text(0),
        )?;
        Ok(found.flatten())
    }

    fn message_records(&mut self, key: &WindowKey) -> Result<Vec<MessageRecord>> {
        let sql = format!("SELECT {MESSAGE_COLUMNS} FROM {{outbox}} WHERE key = $1 ORDER BY seq");
        self.rows(
            "read messages",
            &sql,
            &[Text(key.as_str())],
            &mut message_record,
        )
    }

    fn revisions(&mut self, key: &WindowKey) -> Result<Vec<Revision>> {
        if !self.backend.current() {
            return Ok(Vec::new());
        }
        let what = "read revisions";
        let k = [Text(key.as_str())];
        let mut tx = self.backend.begin(Kind::Read, what, NO_CLOCK)?;
        let mut revisions = tx.query(
            what,
            "SELECT revision, state, fence, attempt, owner, component, report, report_cursor,
                digest_prompt, described, error, reason, {len journal}, {t created_at},
                {t updated_at}, {t pruned_at}
             FROM {revisions} WHERE key = $1 ORDER BY revision",
            &k,
            &mut |r| {
                Ok(Revision {
                    revision: r.count(0)?,
                    state: state(r, 1)?,
                    fence: Fence(r.int(2)?),
                    attempt: r.count(3)?,
                    owner: r.text(4)?,
                    component: r.text(5)?,
                    report: stored_report(r, [6, 7, 8, 9])?,
                    error: r.opt_text(10)?,
                    reason: r.opt_text(11)?,
                    journal_bytes: r.opt_int(12)?.map(i64::unsigned_abs),
                    created_at: r.time(13)?,
                    updated_at: r.time(14)?,
                    pruned_at: r.opt_time(15)?,
                    messages: Vec::new(),
                })
            },
        )?;
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS}, revision FROM {{revision_messages}}
             WHERE key = $1 ORDER BY revision, seq"
        );
        let messages = tx.query(what, &sql, &k, &mut |r| {
            Ok((r.count(9)?, message_record(r)?))
        })?;
        tx.commit(what)?;
        for (revision, m) in messages {
            if let Some(r) = revisions.iter_mut().find(|r| r.revision == revision) {
                r.messages.push(m);
            }
        }
        Ok(revisions)
    }

    fn archived(&mut self, key: &WindowKey, revision: u32) -> Result<Option<Archived>> {
        if !self.backend.current() {
            return Ok(None);
        }
        let what = "read a revision";
        let args = [Text(key.as_str()), Int(i64::from(revision))];
        let mut tx = self.backend.begin(Kind::Read, what, NO_CLOCK)?;
        let journal = tx.one(
            what,
            "SELECT journal FROM {revisions} WHERE key = $1 AND revision = $2",
            &args,
            &mut |r| r.opt_bytes(0),
        )?;
        let messages = tx.query(
            what,
            "SELECT seq, destination, idempotency_key, content_type, body
             FROM {revision_messages} WHERE key = $1 AND revision = $2 ORDER BY seq",
            &args,
            &mut staged,
        )?;
        tx.commit(what)?;
        Ok(journal.map(|journal| Archived { journal, messages }))
    }

    fn paused(&mut self, job: &str) -> Result<Option<Pause>> {
        if !self.backend.current() {
            return Ok(None);
        }
        self.row(
            "read the job's pause",
            "SELECT job, note, actor, {t since} FROM {pauses} WHERE job = $1",
            &[Text(job)],
            &mut pause_row,
        )
    }

    fn pause(&mut self, job: &str, actor: Actor<'_>, now: Timestamp) -> Result<Option<Pause>> {
        let what = "pause the job";
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        // Read under the pause's own row lock (on PostgreSQL, by locking
        // the job's existing pause, if any), in the same transaction as the
        // write.
        let before = tx.one(
            what,
            "SELECT job, note, actor, {t since} FROM {pauses} WHERE job = $1{lock}",
            &[Text(job)],
            &mut pause_row,
        )?;
        tx.exec(
            what,
            "INSERT INTO {pauses} (job, note, actor, since) VALUES ($1, $2, $3, {now})
             ON CONFLICT (job) DO UPDATE SET note = excluded.note, actor = excluded.actor",
            &[Text(job), Text(actor.reason), Text(actor.by)],
        )?;
        paused_in(&mut tx, &mut chain, job, actor, now)?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(before)
    }

    fn resume(&mut self, job: &str, actor: Actor<'_>, now: Timestamp) -> Result<Option<Pause>> {
        let what = "resume the job";
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job],
        )?;
        let ended = tx.one(
            what,
            "DELETE FROM {pauses} WHERE job = $1 RETURNING job, note, actor, {t since}",
            &[Text(job)],
            &mut pause_row,
        )?;
        if let Some(p) = &ended {
            let audit = audit(
                &mut tx,
                &AuditRow {
                    job,
                    key: None,
                    action: AuditAction::Resume,
                    old_state: None,
                    reason: actor.reason,
                    detail: Some(&format!("paused since {} by {}: {}", p.since, p.by, p.note)),
                    actor: actor.by,
                },
            )?;
            chain.append(
                job,
                &Entry {
                    audit: Some(audit),
                    ..Entry::new("resume", now, None)
                },
            )?;
        }
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(ended)
    }

    fn forget(
        &mut self,
        key: &WindowKey,
        force: bool,
        actor: Actor<'_>,
        now: Timestamp,
    ) -> Result<Forgotten> {
        let what = "forget the window";
        let k = Text(key.as_str());
        let (mut tx, mut chain) = chained(
            &mut self.backend,
            &self.chain,
            Kind::Write,
            what,
            now,
            &[job_of(key.as_str())],
        )?;
        let row = tx.one(
            what,
            "SELECT state, job, {t window_start}, lease_expires_at > {now}, error,
                report,
                (SELECT count(*) FROM {outbox} o WHERE o.key = r.key AND o.state <> 'DELIVERED'),
                fence, revision, skip_reason
             FROM {runs} r WHERE key = $1{lock}",
            &[k],
            &mut |r| {
                Ok((
                    state(r, 0)?,
                    r.text(1)?,
                    r.time(2)?,
                    (r.flag(3)?, (r.opt_text(4)?, r.opt_text(9)?), r.opt_text(5)?),
                    r.count(6)?,
                    (r.int(7)?, r.int(8)?),
                ))
            },
        )?;
        let Some((old, job, start, (live, notes, report), undelivered, (fence, revision))) = row
        else {
            return Err(super::no_such_run(key));
        };
        let has_report = report.is_some();
        super::may_forget(key, old, live, force)?;
        if has_report {
            archive(&mut tx, key)?;
        }
        let (error, skip_reason) = notes;
        let detail =
            super::forget_detail(old, error.as_deref(), skip_reason.as_deref(), undelivered);
        let audit = audit(
            &mut tx,
            &AuditRow {
                job: &job,
                key: Some(key.as_str()),
                action: AuditAction::Forget,
                old_state: Some(old.as_str()),
                reason: actor.reason,
                detail: detail.as_deref(),
                actor: actor.by,
            },
        )?;
        for sql in [
            "DELETE FROM {outbox} WHERE key = $1",
            "DELETE FROM {digests} WHERE key = $1",
            "DELETE FROM {runs} WHERE key = $1",
        ] {
            tx.exec(what, sql, &[k])?;
        }
        let moved = no_row_again(
            &mut tx,
            key,
            &job,
            start,
            (revision + i64::from(has_report), fence + 1),
        )?;
        let archived_revision =
            u32::try_from(revision).map_err(|_| damaged(8, &format!("the revision {revision}")))?;
        chain.append(
            &job,
            &Entry {
                from: Some(old.as_str().into()),
                audit: Some(audit),
                archived: report.map(|r| ArchivedFact {
                    revision: archived_revision,
                    state: old.as_str().into(),
                    report: Some(digest(r.as_bytes())),
                }),
                ..Entry::new("forget", now, Some(key.as_str()))
            },
        )?;
        seal(tx, what, &chain)?;
        self.sealed(&chain);
        Ok(Forgotten {
            old_state: old,
            undelivered: if old == RunState::Prepared {
                undelivered
            } else {
                0
            },
            decided_until: moved.then_some(start),
            archived: has_report,
        })
    }

    fn audit(&mut self, job: Option<&str>) -> Result<Vec<AuditLine>> {
        if !self.backend.current() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the audit lines",
            "SELECT {t at}, job, key, action, old_state, reason, detail, actor FROM {audit}
             WHERE $1 IS NULL OR job = $1 OR job = '*' ORDER BY at DESC, id DESC",
            &[OptText(job)],
            &mut |r| {
                Ok(AuditLine {
                    at: r.time(0)?,
                    job: r.text(1)?,
                    key: r.opt_text(2)?,
                    action: stored(r, 3, AuditAction::parse)?,
                    old_state: r.opt_text(4)?,
                    reason: r.text(5)?,
                    detail: r.opt_text(6)?,
                    by: r.text(7)?,
                })
            },
        )
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
        // Rows of DONE runs (never anything unfinished), then archived
        // revisions (which never run again), in batches, each a short
        // transaction of its own.
        // Job by job, so that each batch appends to one chain it locked
        // before any row.
        let jobs = match job {
            Some(j) => vec![j.to_string()],
            None => self.rows(
                "read the jobs",
                "SELECT job FROM {runs} UNION SELECT job FROM {revisions} ORDER BY 1",
                &[],
                &mut |r| r.text(0),
            )?,
        };
        for j in &jobs {
            for revisions in [false, true] {
                while let Some(batch) =
                    self.prune_batch(revisions, j, before, keep_journals, now)?
                {
                    pruned.add(batch);
                }
            }
        }
        if pruned.runs > 0 {
            let detail = format!(
                "{} run(s) ending by {before}: {} journal byte(s), {} message byte(s)",
                pruned.runs, pruned.journal_bytes, pruned.body_bytes
            );
            let chain_of = job.unwrap_or("*");
            let (mut tx, mut chain) = chained(
                &mut self.backend,
                &self.chain,
                Kind::Write,
                "prune",
                now,
                &[chain_of],
            )?;
            let audit = audit(
                &mut tx,
                &AuditRow {
                    job: chain_of,
                    key: None,
                    action: AuditAction::Prune,
                    old_state: None,
                    reason: actor.reason,
                    detail: Some(&detail),
                    actor: actor.by,
                },
            )?;
            chain.append(
                chain_of,
                &Entry {
                    audit: Some(audit),
                    ..Entry::new("prune", now, None)
                },
            )?;
            seal(tx, "prune", &chain)?;
            self.sealed(&chain);
        }
        self.backend.after_prune();
        Ok(pruned)
    }
    fn chain_jobs(&mut self) -> Result<Vec<String>> {
        if !self.backend.chain_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the chains' jobs",
            "SELECT job FROM {chain} UNION SELECT job FROM {runs}
             UNION SELECT job FROM {revisions} UNION SELECT job FROM {audit} ORDER BY 1",
            &[],
            &mut |r| r.text(0),
        )
    }

    fn chain(&mut self, job: &str, after: i64, limit: u64) -> Result<Vec<Link>> {
        if !self.backend.chain_tables() {
            return Ok(Vec::new());
        }
        self.rows(
            "read the chain",
            "SELECT job, seq, kind, key, entry, prev, hash, key_id, signature FROM {chain}
             WHERE job = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[
                Text(job),
                Int(after),
                Int(i64::try_from(limit).unwrap_or(i64::MAX)),
            ],
            &mut link,
        )
    }

    fn chain_of(&mut self, key: &WindowKey, revision: u32) -> Result<Vec<Link>> {
        if !self.backend.chain_tables() {
            return Ok(Vec::new());
        }
        let job = job_of(key.as_str());
        // The entries naming the window, then those of its revision: from
        // the entry that made the revision (a claim, or a batch's, which
        // names no window) to the last.
        let about = self.rows(
            "read the window's entries",
            "SELECT seq, entry FROM {chain} WHERE key = $1 ORDER BY seq",
            &[Text(key.as_str())],
            &mut |r| Ok((r.int(0)?, r.text(1)?)),
        )?;
        let mine: Vec<i64> = about
            .iter()
            .filter(|(_, text)| {
                serde_json::from_str::<Entry>(text)
                    .is_ok_and(|e| e.revision.is_none_or(|n| n == revision))
            })
            .map(|(seq, _)| *seq)
            .collect();
        let (Some(first), Some(last)) = (mine.first(), mine.last()) else {
            return Ok(Vec::new());
        };
        // A window claimed in a batch names no window in its claim's
        // entry: the batch before its first entry of its own is included.
        let batch = self.row(
            "read the window's claim",
            "SELECT max(seq) FROM {chain} WHERE job = $1 AND seq < $2 AND kind = 'claims'",
            &[Text(job), Int(*first)],
            &mut |r| r.opt_int(0),
        )?;
        let from = batch.flatten().map_or(*first, |b| b.min(*first));
        self.rows(
            "read the chain",
            "SELECT job, seq, kind, key, entry, prev, hash, key_id, signature FROM {chain}
             WHERE job = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            &[Text(job), Int(from), Int(*last)],
            &mut link,
        )
    }

    fn chain_rows(&mut self, job: &str) -> Result<ChainRows> {
        if !self.backend.chain_tables() {
            return Ok(ChainRows::default());
        }
        let j = [Text(job)];
        let runs = self.rows(
            "read the rows to verify",
            "SELECT key, state, revision, fence, component, report, reason, journal
             FROM {runs} WHERE job = $1",
            &j,
            &mut |r| {
                Ok(RunRow {
                    key: r.text(0)?,
                    state: r.text(1)?,
                    revision: r.count(2)?,
                    fence: r.int(3)?,
                    component: r.text(4)?,
                    report: r.opt_text(5)?.map(|t| digest(t.as_bytes())),
                    reason: r.opt_text(6)?,
                    journal: r.opt_bytes(7)?.map(|b| digest(&b)),
                })
            },
        )?;
        let messages = self.rows(
            "read the messages to verify",
            "SELECT o.key, o.seq, o.destination, o.idempotency_key, o.body, o.state
             FROM {outbox} o JOIN {runs} r ON r.key = o.key WHERE r.job = $1",
            &j,
            &mut |r| {
                let body = r.bytes(4)?;
                Ok(MessageRow {
                    key: r.text(0)?,
                    seq: r.count(1)?,
                    destination: r.text(2)?,
                    idempotency_key: r.text(3)?,
                    body: (!body.is_empty()).then(|| digest(&body)),
                    state: r.text(5)?,
                })
            },
        )?;
        let revisions = self.rows(
            "read the revisions to verify",
            "SELECT key, revision, state, report FROM {revisions} WHERE job = $1",
            &j,
            &mut |r| {
                Ok(RevisionRow {
                    key: r.text(0)?,
                    revision: r.count(1)?,
                    state: r.text(2)?,
                    report: r.opt_text(3)?.map(|t| digest(t.as_bytes())),
                })
            },
        )?;
        let audit = self.rows(
            "read the audit lines to verify",
            "SELECT id, action, key, old_state, reason, detail, actor FROM {audit}
             WHERE job = $1",
            &j,
            &mut |r| {
                Ok(AuditFact {
                    id: r.int(0)?,
                    action: r.text(1)?,
                    key: r.opt_text(2)?,
                    old_state: r.opt_text(3)?,
                    reason: r.text(4)?,
                    detail: r.opt_text(5)?,
                    by: r.text(6)?,
                })
            },
        )?;
        // What there was before the chain, of this job.
        let adopted = self
            .rows(
                "read the rows from before the chain",
                "SELECT what, id FROM {chain_adopted} a
                 WHERE (what = 'run' AND id IN (SELECT key FROM {runs} WHERE job = $1))
                    OR (what = 'audit' AND id IN (SELECT CAST(id AS TEXT) FROM {audit}
                                                  WHERE job = $1))
                    OR (what = 'revision' AND id IN (SELECT revision || ' ' || key
                                                     FROM {revisions} WHERE job = $1))
                    OR (what = 'message' AND id IN (SELECT o.seq || ' ' || o.key
                                                    FROM {outbox} o JOIN {runs} r
                                                    ON r.key = o.key WHERE r.job = $1))",
                &j,
                &mut |r| Ok((r.text(0)?, r.text(1)?)),
            )?
            .into_iter()
            .collect();
        Ok(ChainRows {
            runs,
            messages,
            revisions,
            audit,
            adopted,
        })
    }
}

/// One stored chain entry.
fn link(r: &dyn Row) -> Result<Link> {
    Ok(Link {
        job: r.text(0)?,
        seq: r.int(1)?,
        kind: r.text(2)?,
        key: r.opt_text(3)?,
        entry: r.text(4)?,
        prev: r.text(5)?,
        hash: r.text(6)?,
        key_id: r.opt_text(7)?,
        signature: r.opt_text(8)?,
    })
}

/// The entry of a claim that takes an existing row over (a stopped
/// owner's, or a retry's): the next fence, and PREPARED when the row's
/// report is kept (`report_kept`), else CLAIMED for `req`'s component.
fn taken(
    req: &ClaimRequest<'_>,
    existing: &Existing,
    report_kept: bool,
    from: Option<String>,
    audit: Option<AuditFact>,
) -> Entry {
    let state = if report_kept {
        RunState::Prepared
    } else {
        RunState::Claimed
    };
    Entry {
        revision: Some(existing.revision),
        fence: Some(existing.fence + 1),
        state: Some(state.as_str().into()),
        from,
        component: (!report_kept).then(|| req.component.to_string()),
        audit,
        ..Entry::new("claim", req.now, Some(req.window.key().as_str()))
    }
}

/// A delivery's outcome as an entry binds it.
fn delivered(done: &Attempted<'_>) -> Outcome {
    Outcome {
        seq: done.seq,
        state: MessageState::Delivered.as_str().into(),
        status: Some(done.status.into()),
    }
}

/// Inside a write transaction: confirms the run is still ours and
/// delivering (PREPARED under our fence), and stamps it.
fn still_delivering<T: Tx>(tx: &mut T, lease: &Lease) -> Result<()> {
    let owned = tx.exec(
        "check the claim",
        "UPDATE {runs} SET updated_at = {now}
         WHERE key = $1 AND fence = $2 AND state = 'PREPARED'",
        &[Text(lease.key.as_str()), Int(lease.fence.0)],
    )?;
    fenced(owned, lease)
}

/// Marks a message delivered, inside a transaction that still holds the
/// claim (fenced on the run row).
fn record_delivery<T: Tx>(tx: &mut T, lease: &Lease, done: &Attempted<'_>) -> Result<()> {
    still_delivering(tx, lease)?;
    tx.exec(
        "record a delivery",
        "UPDATE {outbox} SET state = 'DELIVERED', in_flight = false,
            attempts = attempts + $3, last_status = $4, updated_at = {now}
         WHERE key = $1 AND seq = $2",
        &[
            Text(lease.key.as_str()),
            Int(i64::from(done.seq)),
            Int(i64::from(done.tries)),
            Text(done.status),
        ],
    )?;
    Ok(())
}

/// Starts a new series of attempts at a FAILED or ABANDONED window (see
/// [`Decision::Restart`]), keeping its old error in an audit line.
fn restart<T: Tx>(
    tx: &mut T,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    existing: &Existing,
    process: Option<&str>,
) -> Result<AuditFact> {
    let audit = audit(
        tx,
        &AuditRow {
            job: req.window.job.as_str(),
            key: Some(key.as_str()),
            action: AuditAction::Retry,
            old_state: Some(existing.state.as_str()),
            reason: req.purpose.reason().unwrap_or(""),
            detail: existing.error.as_deref(),
            actor: req.purpose.by().unwrap_or(req.owner),
        },
    )?;
    tx.exec(
        "restart the window",
        "UPDATE {runs} SET state = CASE WHEN report IS NULL THEN 'CLAIMED' ELSE 'PREPARED' END,
            fence = $3, owner = $4, lease_expires_at = {after $5}, attempt = 1,
            component = CASE WHEN report IS NULL THEN $6 ELSE component END,
            error = NULL, retryable = false, retry_at = NULL, updated_at = {now},
            owner_process = $7
         WHERE key = $1 AND fence = $2",
        &[
            Text(key.as_str()),
            Int(existing.fence),
            Int(existing.fence + 1),
            Text(req.owner),
            After(Some(req.lease)),
            Text(req.component),
            OptText(process),
        ],
    )?;
    // Its undelivered messages are sent again, with their keys; one whose
    // at-most-once send may have arrived keeps its in-flight mark, so the
    // delivery abandons it again rather than risk a second copy.
    tx.exec(
        "restart the window's messages",
        "UPDATE {outbox} SET state = 'PENDING', updated_at = {now}
         WHERE key = $1 AND state <> 'DELIVERED'",
        &[Text(key.as_str())],
    )?;
    Ok(audit)
}

/// The audit line of a granted claim of a window a person named
/// ([`Purpose::Named`]): `run`, with who asked and the state it found.
fn named<T: Tx>(
    tx: &mut T,
    req: &ClaimRequest<'_>,
    old_state: Option<&str>,
) -> Result<Option<AuditFact>> {
    let crate::store::Purpose::Named { by } = req.purpose else {
        return Ok(None);
    };
    let key = req.window.key();
    audit(
        tx,
        &AuditRow {
            job: req.window.job.as_str(),
            key: Some(key.as_str()),
            action: AuditAction::Run,
            old_state,
            reason: "",
            detail: None,
            actor: by,
        },
    )
    .map(Some)
}

/// Archives a DONE window's row and messages as a revision and claims its
/// next revision afresh (see [`Decision::Rerun`]).
fn rerun<T: Tx>(
    tx: &mut T,
    key: &WindowKey,
    req: &ClaimRequest<'_>,
    existing: &Existing,
    process: Option<&str>,
) -> Result<(AuditFact, ArchivedFact)> {
    let reason = req.purpose.reason().unwrap_or("");
    let report = tx.one(
        "read the report to archive",
        "SELECT report FROM {runs} WHERE key = $1",
        &[Text(key.as_str())],
        &mut |r| r.opt_text(0),
    )?;
    let archived = ArchivedFact {
        revision: existing.revision,
        state: existing.state.as_str().into(),
        report: report.flatten().map(|r| digest(r.as_bytes())),
    };
    archive(tx, key)?;
    // The windows that used this one's revision are stale now; this
    // window's own marks were about the revision it leaves.
    let next = existing.revision + 1;
    tx.exec(
        "mark the windows that used it stale",
        "INSERT INTO {stale} (key, revision, job, about, cause, since)
         SELECT u.key, u.revision, u.job, u.upstream_key, $3, {now}
         FROM {uses} u JOIN {runs} d ON d.key = u.key AND d.revision = u.revision
         WHERE u.upstream_key = $1 AND u.upstream_revision < $2
         ON CONFLICT (key, revision, about) DO UPDATE SET
            cause = excluded.cause, since = excluded.since",
        &[
            Text(key.as_str()),
            Int(i64::from(next)),
            Text(&format!(
                "upstream `{key}` was run again as revision {next}{}",
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({reason})")
                }
            )),
        ],
    )?;
    tx.exec(
        "clear the window's stale marks",
        "DELETE FROM {stale} WHERE key = $1",
        &[Text(key.as_str())],
    )?;
    let audit = audit(
        tx,
        &AuditRow {
            job: req.window.job.as_str(),
            key: Some(key.as_str()),
            action: AuditAction::Rerun,
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
    tx.exec(
        "claim the next revision",
        "UPDATE {runs} SET state = 'CLAIMED', revision = revision + 1, reason = $3,
            fence = $4, owner = $5, lease_expires_at = {after $6}, attempt = 1, component = $7,
            report = NULL, report_cursor = NULL, journal = NULL, error = NULL, retryable = false,
            retry_at = NULL, digest_prompt = NULL, described = false, pruned_at = NULL,
            inputs = NULL,
            created_at = {now}, updated_at = {now}, owner_process = $8
         WHERE key = $1 AND fence = $2",
        &[
            Text(key.as_str()),
            Int(existing.fence),
            Text(reason),
            Int(existing.fence + 1),
            Text(req.owner),
            After(Some(req.lease)),
            Text(req.component),
            OptText(process),
        ],
    )?;
    Ok((audit, archived))
}

/// Copies the window's row and messages into the revision tables and
/// removes its messages and digest note, inside a write transaction.
fn archive<T: Tx>(tx: &mut T, key: &WindowKey) -> Result<()> {
    for sql in [
        "INSERT INTO {revisions} (key, revision, job, window_end, state, fence, attempt, owner,
            component, report, report_cursor, journal, error, reason, digest_prompt, described,
            created_at, updated_at, pruned_at)
         SELECT key, revision, job, window_end, state, fence, attempt, owner, component, report,
            report_cursor, journal, error, reason, digest_prompt, described, created_at,
            updated_at, pruned_at
         FROM {runs} WHERE key = $1",
        "INSERT INTO {revision_messages} (key, revision, seq, destination, idempotency_key,
            content_type, body, state, attempts, in_flight, last_status, updated_at)
         SELECT o.key, r.revision, o.seq, o.destination, o.idempotency_key, o.content_type,
            o.body, o.state, o.attempts, o.in_flight, o.last_status, o.updated_at
         FROM {outbox} o JOIN {runs} r ON r.key = o.key WHERE o.key = $1",
        "DELETE FROM {outbox} WHERE key = $1",
        "DELETE FROM {digests} WHERE key = $1",
    ] {
        tx.exec("archive the revision", sql, &[Text(key.as_str())])?;
    }
    Ok(())
}

/// One audit line to write (at the store's clock).
struct AuditRow<'a> {
    job: &'a str,
    key: Option<&'a str>,
    action: AuditAction,
    old_state: Option<&'a str>,
    reason: &'a str,
    detail: Option<&'a str>,
    actor: &'a str,
}

/// Records in `tx` that `actor` paused `job` (its pause row written): the
/// audit line and the chain's entry of it.
pub(super) fn paused_in<T: Tx>(
    tx: &mut T,
    chain: &mut Chain,
    job: &str,
    actor: Actor<'_>,
    now: Timestamp,
) -> Result<()> {
    let line = audit(
        tx,
        &AuditRow {
            job,
            key: None,
            action: AuditAction::Pause,
            old_state: None,
            reason: actor.reason,
            detail: None,
            actor: actor.by,
        },
    )?;
    chain.append(
        job,
        &Entry {
            audit: Some(line),
            ..Entry::new("pause", now, None)
        },
    )?;
    Ok(())
}

/// Writes an audit line; what the chain's entry binds of it.
fn audit<T: Tx>(tx: &mut T, row: &AuditRow<'_>) -> Result<AuditFact> {
    let id = tx.one(
        "write the audit line",
        "INSERT INTO {audit} (at, job, key, action, old_state, reason, detail, actor)
         VALUES ({now}, $1, $2, $3, $4, $5, $6, $7)
         RETURNING id",
        &[
            Text(row.job),
            OptText(row.key),
            Text(row.action.as_str()),
            OptText(row.old_state),
            Text(row.reason),
            OptText(row.detail),
            Text(row.actor),
        ],
        &mut |r| r.int(0),
    )?;
    Ok(AuditFact {
        id: id.ok_or_else(|| Error::host("the audit line's insert returned no id"))?,
        action: row.action.as_str().into(),
        key: row.key.map(str::to_string),
        old_state: row.old_state.map(str::to_string),
        reason: row.reason.into(),
        detail: row.detail.map(str::to_string),
        by: row.actor.into(),
    })
}

/// What [`run_record`] reads, over [`RUN_TABLES`], but for the last three
/// columns (see [`SqlStore::run_columns`]).
const RUN_COLUMNS: &str = "r.key, r.job, {t r.window_start}, {t r.window_end}, r.timezone, \
     r.state, r.fence, r.attempt, r.owner, {t r.lease_expires_at}, r.component, r.report, \
     r.report_cursor, r.error, {t r.created_at}, {t r.updated_at}, {t r.retry_at}, \
     {len r.journal}, (SELECT count(*) FROM {outbox} o WHERE o.key = r.key), \
     (SELECT count(*) FROM {outbox} o WHERE o.key = r.key AND o.state = 'DELIVERED'), \
     r.digest_prompt, d.key IS NOT NULL, d.cache_key, d.model, d.error, {t d.sent_at}, \
     {t d.updated_at}, r.described, ";

/// The tables [`RUN_COLUMNS`] reads.
const RUN_TABLES: &str = "{runs} r LEFT JOIN {digests} d ON d.key = r.key";

/// The committed report in columns `[summary, cursor, prompt,
/// described]` of `r`: none without a summary.
fn stored_report(
    r: &dyn Row,
    [summary, cursor, prompt, described]: [usize; 4],
) -> Result<Option<StoredReport>> {
    let Some(summary) = r.opt_text(summary)? else {
        return Ok(None);
    };
    Ok(Some(StoredReport {
        summary,
        cursor: r.opt_text(cursor)?,
        prompt: r.opt_text(prompt)?,
        described: r.flag(described)?,
    }))
}

fn run_record(r: &dyn Row) -> Result<RunRecord> {
    Ok(RunRecord {
        key: WindowKey::from_stored(r.text(0)?),
        job: r.text(1)?,
        window_start: r.time(2)?,
        window_end: r.time(3)?,
        timezone: r.text(4)?,
        state: state(r, 5)?,
        fence: Fence(r.int(6)?),
        attempt: r.count(7)?,
        owner: r.text(8)?,
        lease_until: r.time(9)?,
        component: r.text(10)?,
        report: stored_report(r, [11, 12, 20, 27])?,
        error: r.opt_text(31)?,
        skip_reason: r.opt_text(32)?,
        created_at: r.time(14)?,
        updated_at: r.time(15)?,
        retry_at: r.opt_time(16)?,
        journal_bytes: r.opt_int(17)?.map(i64::unsigned_abs),
        messages: r.count(18)?,
        delivered: r.count(19)?,
        digest: if r.flag(21)? {
            Some(DigestRecord {
                cache_key: r.opt_text(22)?,
                model: r.opt_text(23)?,
                error: r.opt_text(24)?,
                sent_at: r.opt_time(25)?,
                updated_at: r.time(26)?,
            })
        } else {
            None
        },
        revision: r.count(28)?,
        reason: r.opt_text(29)?,
        pruned_at: r.opt_time(30)?,
    })
}

/// The columns [`message_record`] reads.
const MESSAGE_COLUMNS: &str = "seq, destination, idempotency_key, content_type, {len body}, \
     state, attempts, last_status, in_flight";

fn message_record(r: &dyn Row) -> Result<MessageRecord> {
    Ok(MessageRecord {
        seq: r.count(0)?,
        destination: r.text(1)?,
        idempotency_key: r.text(2)?,
        content_type: r.text(3)?,
        bytes: r.int(4)?.unsigned_abs(),
        state: stored(r, 5, MessageState::parse)?,
        attempts: r.count(6)?,
        last_status: r.opt_text(7)?,
        in_flight: r.flag(8)?,
    })
}

/// A `pauses` row: job, note, actor, since.
fn pause_row(r: &dyn Row) -> Result<Pause> {
    Ok(Pause {
        job: r.text(0)?,
        note: r.text(1)?,
        by: r.text(2)?,
        since: r.time(3)?,
    })
}

fn staged(r: &dyn Row) -> Result<StagedMessage> {
    Ok(StagedMessage {
        seq: r.count(0)?,
        destination: r.text(1)?,
        idempotency_key: r.text(2)?,
        content_type: r.text(3)?,
        body: r.bytes(4)?,
    })
}

/// A run state read back from the store.
fn state(r: &dyn Row, i: usize) -> Result<RunState> {
    stored(r, i, RunState::parse)
}

/// One of a few names read back from the store.
fn stored<T>(r: &dyn Row, i: usize, parse: fn(&str) -> Option<T>) -> Result<T> {
    let s = r.text(i)?;
    parse(&s).ok_or_else(|| {
        Error::Store(
            format!(
                "the store holds an unknown name `{}` (column {i} of a read); it was written by a \
             newer jobhost or changed by hand",
                crate::core::text::echoed(&s, 40)
            )
            .into(),
        )
    })
}

/// The job of a window key (`<job>:<label>`).
fn job_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(job, _)| job)
}
