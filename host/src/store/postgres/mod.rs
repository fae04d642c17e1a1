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
//!   statements (no session advisory locks, no temporary tables, nothing
//!   prepared by name), so a transaction pooler in front of the database is
//!   safe.
//!
//! Tables are prefixed `jobhost_` and live in the connection's current
//! schema (choose one with `options=-csearch_path%3Dname` in the URL);
//! `schema` migrates them, `connect` connects, and `support` holds the
//! transactions with their time limits and the errors every statement uses.
//! The transactions themselves are [`super::scripts`], written once for
//! both backends.

pub(crate) mod connect;
mod schema;
mod support;

use std::time::Duration;

use jiff::Timestamp;
use postgres::Client;
use postgres::types::{ToSql, Type};

use self::schema::{check_version, latest, migrate, schema_version};
use self::support::{Limits, lock_timed_out};
use super::chain::{GENESIS, Head, Link};
use super::scripts::SqlStore;
use super::sql::{self, Backend, Fail, Kind, Row, Tx, Val, damaged};
use super::{Held, PostgresUrl};
use crate::core::error::{Error, Result};

/// Every write transaction but a claim's: it waits [`super::WRITE_WAIT`]
/// for a row another session holds, then fails (retryable).
const WRITE: Limits = Limits {
    lock_wait: super::WRITE_WAIT,
    statement: Some(super::STATEMENT_TIMEOUT),
};

/// A claim's transaction: it waits [`super::CLAIM_WAIT`] for the window's
/// row, then answers busy.
const CLAIM: Limits = Limits {
    lock_wait: super::CLAIM_WAIT,
    statement: Some(super::STATEMENT_TIMEOUT),
};

/// The schema whose tables and columns the latest reads and writes: v4.
/// Later ones add only ways to read it faster.
const OPERATOR_SCHEMA: i64 = 4;

/// The schema that added the tables of jobs that build on jobs.
const NEEDS_SCHEMA: i64 = 8;

/// The class of the transaction locks that serialize appends to a job's
/// chain: `pg_advisory_xact_lock(class, hashtext(schema.job))` ("jobs" in
/// ASCII). Advisory locks belong to the database, so the store's schema is
/// in the key: stores in two schemas of one database never wait for each
/// other's jobs (but for the rare two names of one hash, which only wait).
const CHAIN_LOCK: i32 = 0x6a6f_6273;

/// The schema that keeps the chain (`chain`, `chain_adopted`).
const CHAIN_SCHEMA: i64 = 9;

/// The schema that keeps incidents and their notifications.
const NOTICE_SCHEMA: i64 = 10;

/// The oldest schema read-only commands still read, treating what it lacks
/// as empty: the one before [`OPERATOR_SCHEMA`].
const READABLE: i64 = OPERATOR_SCHEMA - 1;

/// The first schema with the `jobhost_runs_by_state` index.
const STATE_INDEX_SCHEMA: i64 = 5;

/// The first schema with a column for the skip's reason.
const SKIP_REASON_SCHEMA: i64 = 7;

/// A claim store in a PostgreSQL database.
pub type PostgresStore = SqlStore<Postgres>;

/// A connection to a database that holds (or will hold) jobhost's tables.
pub struct Postgres {
    client: Pooled,
    url: PostgresUrl,
    /// The schema version: the latest, or the one before when opened read
    /// only (see [`PostgresStore::open_read_only`]).
    version: i64,
}

impl SqlStore<Postgres> {
    /// Connects to the database at `url` and migrates its jobhost tables.
    ///
    /// # Errors
    ///
    /// `Error::Input` for a malformed URL or a database that holds tables of
    /// a newer jobhost; `Error::Store` when the database cannot be reached,
    /// refuses the login, or fails a statement.
    pub fn open(url: &PostgresUrl) -> Result<PostgresStore> {
        let mut db = Postgres::connect(url)?;
        let created = match schema_version(&mut db.client, url)? {
            Some(v) if v == latest() => false,
            _ => migrate(&mut db.client, url)?,
        };
        Ok(SqlStore::new(db, created))
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
        let mut db = Postgres::connect(url)?;
        match schema_version(&mut db.client, url)? {
            None => Ok(None),
            Some(v) if v == latest() => Ok(Some(SqlStore::new(db, false))),
            // An older version is read as it is, what it lacks read as
            // empty: a monitor keeps working between a deploy and the first
            // run that migrates.
            Some(v) if (READABLE..latest()).contains(&v) => {
                db.version = v;
                Ok(Some(SqlStore::new(db, false)))
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

    /// The store's URL, as it may be shown.
    pub fn url(&self) -> &PostgresUrl {
        &self.backend.url
    }
}

impl Postgres {
    fn connect(url: &PostgresUrl) -> Result<Postgres> {
        let client = match Pooled::idle(url) {
            Some(client) => client,
            None => Pooled {
                client: Some(connect::connect(url)?),
                key: url.secret().to_string(),
            },
        };
        Ok(Postgres {
            client,
            url: url.clone(),
            version: latest(),
        })
    }
}

/// A store's connection, handed back to this process's idle connections
/// for the same URL when the store is dropped: a daemon opens the store
/// for every look and every step of a run, and a new PostgreSQL session
/// costs the server a process of its own each time. Nothing of a session
/// outlives a transaction here (every setting is `SET LOCAL`, every lock
/// transaction-scoped), so a session that is handed back is as good as a
/// new one; one whose transaction could not end, or that is closed, is
/// dropped instead.
struct Pooled {
    client: Option<Client>,
    /// The URL it was opened with, secret included (never shown).
    key: String,
}

/// Idle connections by URL, each with when it went idle.
type Idle = std::collections::HashMap<String, Vec<(Client, std::time::Instant)>>;

/// At most this many idle connections are kept per URL.
const KEEP_IDLE: usize = 8;

/// An idle connection older than this is closed rather than used: the
/// server or the network may have dropped it meanwhile.
const IDLE_FOR: Duration = Duration::from_secs(30);

/// How long a kept connection may take to answer before it is used again.
const STILL_THERE: Duration = Duration::from_secs(2);

fn idle() -> std::sync::MutexGuard<'static, Idle> {
    static IDLE: std::sync::LazyLock<std::sync::Mutex<Idle>> =
        std::sync::LazyLock::new(std::sync::Mutex::default);
    IDLE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Pooled {
    /// A kept connection to `url` that still answers, if there is one.
    fn idle(url: &PostgresUrl) -> Option<Pooled> {
        loop {
            let (mut client, since) = idle().get_mut(url.secret())?.pop()?;
            if since.elapsed() < IDLE_FOR && client.is_valid(STILL_THERE).is_ok() {
                return Some(Pooled {
                    client: Some(client),
                    key: url.secret().to_string(),
                });
            }
        }
    }
}

impl std::ops::Deref for Pooled {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.client
            .as_ref()
            .expect("a store's connection is there until it is dropped")
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("a store's connection is there until it is dropped")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        if client.is_closed() {
            return;
        }
        let mut idle = idle();
        let kept = idle.entry(std::mem::take(&mut self.key)).or_default();
        if kept.len() < KEEP_IDLE {
            kept.push((client, std::time::Instant::now()));
        }
    }
}

impl Backend for Postgres {
    type Tx<'a> = PgTx<'a>;

    fn begin(&mut self, kind: Kind, what: &str, _now: Timestamp) -> Result<PgTx<'_>, Fail> {
        // A read waits as long as a write for what another session holds.
        let limits = if kind == Kind::Claim { CLAIM } else { WRITE };
        support::Tx::begin(&mut self.client, &self.url, what, limits)
            .map(PgTx)
            .map_err(Fail::Other)
    }

    fn begin_chained(
        &mut self,
        kind: Kind,
        what: &str,
        _now: Timestamp,
        jobs: &[&str],
    ) -> Result<(PgTx<'_>, Vec<Head>), Fail> {
        let limits = if kind == Kind::Claim { CLAIM } else { WRITE };
        // Each job's chain is locked (a lock of the transaction, on the
        // job's name) and its last entry read, in the round trip of BEGIN:
        // the chain costs no round trip of its own, and writes nothing but
        // its entries.
        let then: Vec<String> = jobs
            .iter()
            .map(|job| {
                let job = support::literal(job);
                format!(
                    "SELECT pg_advisory_xact_lock({CHAIN_LOCK},
                        hashtext(current_schema() || '.' || {job}));
                     SELECT job, seq, hash FROM jobhost_chain WHERE job = {job}
                     ORDER BY seq DESC LIMIT 1"
                )
            })
            .collect();
        let url = &self.url;
        let (tx, rows) = support::Tx::begin_then(&mut self.client, url, limits, &then.join("; "))
            .map_err(|e| {
            let err = support::pg_in(url, what, &e);
            if lock_timed_out(&e) {
                Fail::Locked(err)
            } else {
                Fail::Other(err)
            }
        })?;
        // Each lock answers a row of its own (one empty value); a job's
        // last entry, when it has one, a row of three.
        let mut heads = Vec::with_capacity(jobs.len());
        for job in jobs {
            let last = rows
                .iter()
                .find(|r| r.len() == 3 && r[0].as_deref() == Some(*job));
            let (seq, hash) = match last {
                None => (0, GENESIS.to_string()),
                Some(r) => {
                    let seq = r[1].as_deref().and_then(|s| s.parse::<i64>().ok());
                    let (Some(seq), Some(hash)) = (seq, r[2].clone()) else {
                        return Err(Fail::Other(damaged(
                            1,
                            "a chain entry whose number or hash is not one",
                        )));
                    };
                    (seq, hash)
                }
            };
            heads.push(Head {
                job: (*job).to_string(),
                seq,
                hash,
            });
        }
        Ok((PgTx(tx), heads))
    }

    fn held(&self) -> (Held, Duration) {
        (Held::Row, super::CLAIM_WAIT)
    }

    fn current(&self) -> bool {
        self.version >= OPERATOR_SCHEMA
    }

    fn needs_tables(&self) -> bool {
        self.version >= NEEDS_SCHEMA
    }

    fn chain_tables(&self) -> bool {
        self.version >= CHAIN_SCHEMA
    }

    fn notice_tables(&self) -> bool {
        self.version >= NOTICE_SCHEMA
    }

    fn counted(&self) -> bool {
        false
    }

    fn state_index(&self) -> bool {
        self.version >= STATE_INDEX_SCHEMA
    }

    fn skip_column(&self) -> bool {
        self.version >= SKIP_REASON_SCHEMA
    }
}

/// A transaction with its time limits (see [`support::Tx`]).
pub struct PgTx<'a>(support::Tx<'a>);

impl PgTx<'_> {
    fn fail(&self, what: &str, e: &postgres::Error) -> Fail {
        let err = self.0.err(what, e);
        if lock_timed_out(e) {
            Fail::Locked(err)
        } else {
            Fail::Other(err)
        }
    }
}

impl Tx for PgTx<'_> {
    fn exec(&mut self, what: &str, sql: &str, args: &[Val<'_>]) -> Result<u64, Fail> {
        let owned = params(args);
        let typed: Vec<_> = owned.iter().map(|(v, t)| (v.as_ref(), t.clone())).collect();
        self.0
            .execute_typed(&render(sql), &typed)
            .map_err(|e| self.fail(what, &e))
    }

    fn query<T>(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        map: &mut dyn FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>, Fail> {
        let owned = params(args);
        let typed: Vec<_> = owned.iter().map(|(v, t)| (v.as_ref(), t.clone())).collect();
        let rows = self
            .0
            .query_typed(&render(sql), &typed)
            .map_err(|e| self.fail(what, &e))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(map(&PgRow(row))?);
        }
        Ok(out)
    }

    fn commit(self, what: &str) -> Result<()> {
        self.0.commit_named(what)
    }

    fn commit_chained(self, what: &str, links: &[Link]) -> Result<()> {
        if links.is_empty() {
            return self.commit(what);
        }
        use support::{literal, opt_literal};
        let rows: Vec<String> = links
            .iter()
            .map(|l| {
                format!(
                    "({}, {}, {}, {}, {}, {}, {}, {}, {})",
                    literal(&l.job),
                    l.seq,
                    literal(&l.kind),
                    opt_literal(l.key.as_deref()),
                    literal(&l.entry),
                    literal(&l.prev),
                    literal(&l.hash),
                    opt_literal(l.key_id.as_deref()),
                    opt_literal(l.signature.as_deref()),
                )
            })
            .collect();
        let first = format!(
            "INSERT INTO jobhost_chain (job, seq, kind, key, entry, prev, hash, key_id, signature)
             VALUES {}",
            rows.join(", ")
        );
        let url = self.0.url;
        self.0
            .commit_after(&first)
            .map_err(|e| support::pg_in(url, what, &e))
    }
}

/// Renders a statement's marks (see [`super::sql`]) as PostgreSQL has them.
fn render(sql: &str) -> String {
    sql::render(sql, |name, arg| match name {
        "now" if arg == "t" => micros("now()"),
        "now" => "now()".to_string(),
        "after" => format!("(now() + make_interval(secs => {arg}))"),
        "time" => format!("to_timestamp({arg})"),
        "t" => micros(arg),
        "len" => format!("octet_length({arg})::int8"),
        "C" => " COLLATE \"C\"".to_string(),
        "lock" => " FOR UPDATE".to_string(),
        "keys" => format!("(SELECT jsonb_array_elements_text({arg}::jsonb))"),
        "cross" => "JOIN".to_string(),
        "by_state" => "jobhost_runs".to_string(),
        table => {
            debug_assert!(sql::TABLES.contains(&table), "no mark or table `{table}`");
            format!("jobhost_{table}")
        }
    })
}

/// Microseconds since the epoch of a `timestamptz` expression, exactly.
fn micros(expr: &str) -> String {
    format!("(extract(epoch FROM {expr}) * 1000000)::int8")
}

/// A parameter with its type: statements are sent unnamed with their types
/// (one round trip each, and nothing prepared that a transaction pooler
/// could lose between connections).
type Param<'a> = (Box<dyn ToSql + Sync + 'a>, Type);

fn params<'a>(args: &[Val<'a>]) -> Vec<Param<'a>> {
    let seconds = |t: Timestamp| t.as_second() as f64 + f64::from(t.subsec_microsecond()) / 1e6;
    args.iter()
        .map(|v| -> Param<'a> {
            match *v {
                Val::Text(s) => (Box::new(s), Type::TEXT),
                Val::OptText(s) => (Box::new(s), Type::TEXT),
                Val::Int(x) => (Box::new(x), Type::INT8),
                Val::Flag(b) => (Box::new(b), Type::BOOL),
                Val::Bytes(b) => (Box::new(b), Type::BYTEA),
                Val::Time(t) => (Box::new(seconds(t)), Type::FLOAT8),
                Val::Lower(t) => (Box::new(t.map_or(f64::NEG_INFINITY, seconds)), Type::FLOAT8),
                Val::Upper(t) => (Box::new(t.map_or(f64::INFINITY, seconds)), Type::FLOAT8),
                Val::After(d) => (Box::new(d.map(|d| d.as_secs_f64())), Type::FLOAT8),
            }
        })
        .collect()
}

/// A row PostgreSQL returned.
struct PgRow<'r>(&'r postgres::Row);

impl PgRow<'_> {
    fn get<'r, T: postgres::types::FromSql<'r>>(&'r self, i: usize) -> Result<T> {
        self.0
            .try_get(i)
            .map_err(|e| damaged(i, &format!("a value it cannot read ({e})")))
    }
}

impl Row for PgRow<'_> {
    fn text(&self, i: usize) -> Result<String> {
        self.get(i)
    }

    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.get(i)
    }

    fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?.ok_or_else(|| damaged(i, "a NULL"))
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        // A literal number is an int4 to PostgreSQL.
        match self.0.try_get::<_, Option<i64>>(i) {
            Ok(v) => Ok(v),
            Err(_) => Ok(self.get::<Option<i32>>(i)?.map(i64::from)),
        }
    }

    fn flag(&self, i: usize) -> Result<bool> {
        self.get(i)
    }

    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>> {
        self.get(i)
    }

    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>> {
        self.get::<Option<i64>>(i)?
            .map(|us| {
                Timestamp::from_microsecond(us)
                    .map_err(|_| damaged(i, &format!("the instant {us} µs")))
            })
            .transpose()
    }
}
