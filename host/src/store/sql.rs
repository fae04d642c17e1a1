//! What a backend gives the transaction scripts of [`super::scripts`]: a
//! transaction to run statements in ([`Backend::begin`], [`Tx`]), the rows
//! they return ([`Row`]), and its SQL dialect. The scripts are written once,
//! in a SQL both databases speak, with a few marks in braces that each
//! backend renders in its own words:
//!
//! | mark | SQLite | PostgreSQL |
//! |---|---|---|
//! | `{runs}` and every other table | `runs` | `jobhost_runs` |
//! | `{now}` | the host's lease clock, a parameter | `now()` |
//! | `{after $N}` | `$N` bound as the instant `now + d` | `now() + make_interval(secs => $N)` |
//! | `{time $N}` | `$N` bound as unix seconds | `to_timestamp($N)` |
//! | `{t expr}` (an instant read) | `expr` (unix seconds) | `expr` in microseconds |
//! | `{now t}` | the lease clock, as read | `now()` in microseconds |
//! | `{len expr}` | `length(expr)` | `octet_length(expr)::int8` |
//! | `{C}` (a collation) | nothing | `COLLATE "C"` |
//! | `{lock}` | nothing (the write lock is the file's) | `FOR UPDATE` |
//! | `{keys $N}` (a JSON list of text) | `json_each` | `jsonb_array_elements_text` |
//! | `{cross}` (a join in this order) | `CROSS JOIN` | `JOIN` |
//! | `{by_state}` | `runs` held to its state index | `jobhost_runs` |
//!
//! and `greatest`/`least` of two values are SQLite's `max`/`min`. Everything
//! else (`ON CONFLICT`, `RETURNING`, `UPDATE ... FROM`, `true`) is common.

use std::time::Duration;

use jiff::Timestamp;

use super::Held;
use super::chain::{GENESIS, Head, Link};
use crate::core::error::{Error, Result};

/// A statement parameter, named by what it means; each backend binds it in
/// its own type (an instant is whole seconds on SQLite, a `timestamptz` on
/// PostgreSQL).
#[derive(Debug, Clone, Copy)]
pub enum Val<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    Flag(bool),
    Bytes(&'a [u8]),
    /// An instant, for `{time $N}`.
    Time(Timestamp),
    /// The lower end of a range, for `{time $N}`: none is before every
    /// instant.
    Lower(Option<Timestamp>),
    /// The upper end of a range, for `{time $N}`: none is after every
    /// instant.
    Upper(Option<Timestamp>),
    /// A time from now on the store's clock, for `{after $N}`; none is
    /// NULL.
    After(Option<Duration>),
}

/// Why a statement or a transaction's start failed.
#[derive(Debug)]
pub enum Fail {
    /// Another process held what it needs for longer than the backend
    /// waits (a claim answers `Claim::Locked`; anything else fails).
    Locked(Error),
    Other(Error),
}

impl From<Fail> for Error {
    fn from(f: Fail) -> Error {
        match f {
            Fail::Locked(e) | Fail::Other(e) => e,
        }
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Other(e)
    }
}

/// What a transaction is for, which decides how long it waits for another
/// process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A claim: it waits [`super::CLAIM_WAIT`] on PostgreSQL, then answers
    /// busy.
    Claim,
    /// Every other write.
    Write,
    /// A read that must see one state of the store.
    Read,
}

/// One backend: a connection and its dialect.
pub trait Backend {
    type Tx<'a>: Tx
    where
        Self: 'a;

    /// Begins a transaction; `now` is the host's lease clock (SQLite's
    /// clock; PostgreSQL reads its own).
    fn begin(&mut self, kind: Kind, what: &str, now: Timestamp) -> Result<Self::Tx<'_>, Fail>;

    /// Begins a transaction that appends to the chains of `jobs` (sorted,
    /// each once), holding them until it ends, so that no other
    /// transaction appends to them meanwhile; returns each job's last
    /// entry as found. Every chained transaction takes its chains first,
    /// before any row, and in the same order, so two never wait for each
    /// other. SQLite's write lock is the file's; PostgreSQL overrides this
    /// to take a lock per job and read the heads in the round trip of its
    /// `BEGIN`.
    fn begin_chained(
        &mut self,
        kind: Kind,
        what: &str,
        now: Timestamp,
        jobs: &[&str],
    ) -> Result<(Self::Tx<'_>, Vec<Head>), Fail> {
        let mut tx = self.begin(kind, what, now)?;
        let mut heads = Vec::with_capacity(jobs.len());
        for job in jobs {
            let found = tx.one(
                "read the chain's head",
                "SELECT seq, hash FROM {chain} WHERE job = $1 ORDER BY seq DESC LIMIT 1",
                &[Val::Text(job)],
                &mut |r| Ok((r.int(0)?, r.text(1)?)),
            )?;
            let (seq, hash) = found.unwrap_or_else(|| (0, GENESIS.to_string()));
            heads.push(Head {
                job: (*job).to_string(),
                seq,
                hash,
            });
        }
        Ok((tx, heads))
    }

    /// What a claim that found the window held answers, and how long it
    /// waited.
    fn held(&self) -> (Held, Duration);

    /// Whether the store has the tables of the operator's verbs (one
    /// opened read only may be of the schema before).
    fn current(&self) -> bool;

    /// Whether the store has the tables of jobs that build on jobs (the
    /// upstream windows each run used, and stale marks).
    fn needs_tables(&self) -> bool;

    /// Whether the store keeps the chain (one opened read only may be of
    /// the schema before).
    fn chain_tables(&self) -> bool;

    /// Whether the store keeps incidents and notifications (one opened
    /// read only may be of the schema before).
    fn notice_tables(&self) -> bool;

    /// Whether the store keeps each job's counts by state as it changes
    /// (`run_counts`).
    fn counted(&self) -> bool;

    /// Whether the store has the index by job, state and window.
    fn state_index(&self) -> bool;

    /// Whether the store keeps a skip's reason in a column of its own (one
    /// opened read only may keep it in `error`).
    fn skip_column(&self) -> bool;

    /// After a prune committed: give freed space back, where the backend
    /// can without a long lock. A failure leaves it for later.
    fn after_prune(&mut self) {}
}

/// An open transaction, rolled back when dropped without a commit.
pub trait Tx {
    /// Runs a statement; the rows it changed.
    fn exec(&mut self, what: &str, sql: &str, args: &[Val<'_>]) -> Result<u64, Fail>;

    /// Runs a statement and maps each row it returns.
    fn query<T>(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        map: &mut dyn FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>, Fail>;

    /// Commits.
    fn commit(self, what: &str) -> Result<()>;

    /// Writes `links` (the entries of a transaction begun with
    /// [`Backend::begin_chained`]), then commits. PostgreSQL overrides this
    /// to send them with its `COMMIT`, in one round trip.
    fn commit_chained(mut self, what: &str, links: &[Link]) -> Result<()>
    where
        Self: Sized,
    {
        for l in links {
            self.exec(
                "append to the chain",
                "INSERT INTO {chain} (job, seq, kind, key, entry, prev, hash, key_id, signature)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                &[
                    Val::Text(&l.job),
                    Val::Int(l.seq),
                    Val::Text(&l.kind),
                    Val::OptText(l.key.as_deref()),
                    Val::Text(&l.entry),
                    Val::Text(&l.prev),
                    Val::Text(&l.hash),
                    Val::OptText(l.key_id.as_deref()),
                    Val::OptText(l.signature.as_deref()),
                ],
            )?;
        }
        self.commit(what)
    }

    /// The first row a statement returns, mapped, if any.
    fn one<T>(
        &mut self,
        what: &str,
        sql: &str,
        args: &[Val<'_>],
        map: &mut dyn FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Option<T>, Fail> {
        Ok(self.query(what, sql, args, map)?.into_iter().next())
    }
}

/// One row a statement returned; a value of another type than asked for is
/// a damaged store, said as such.
pub trait Row {
    fn text(&self, i: usize) -> Result<String>;
    fn opt_text(&self, i: usize) -> Result<Option<String>>;
    fn int(&self, i: usize) -> Result<i64>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>>;
    fn flag(&self, i: usize) -> Result<bool>;
    fn opt_bytes(&self, i: usize) -> Result<Option<Vec<u8>>>;
    /// An instant read with `{t ...}`.
    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>>;

    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        self.opt_bytes(i)?.ok_or_else(|| damaged(i, "a NULL"))
    }

    fn time(&self, i: usize) -> Result<Timestamp> {
        self.opt_time(i)?.ok_or_else(|| damaged(i, "a NULL"))
    }

    /// A count or number that fits in 32 bits.
    fn count(&self, i: usize) -> Result<u32> {
        let n = self.int(i)?;
        u32::try_from(n).map_err(|_| damaged(i, &format!("the number {n}")))
    }
}

/// A value the store should not hold.
pub(crate) fn damaged(column: usize, what: &str) -> Error {
    Error::Store(
        format!(
            "the store holds {what} where it should not (column {column} of a read); it was \
         changed by hand or damaged: restore it from a backup"
        )
        .into(),
    )
}

/// Renders the marks of a statement (see the module's table) with `mark`,
/// which answers the text of one mark given its name and argument; `$N`
/// placeholders are kept as they are.
pub(crate) fn render(sql: &str, mark: impl Fn(&str, &str) -> String) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut rest = sql;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').unwrap_or(after.len());
        let inner = &after[..close];
        let (name, arg) = inner.split_once(' ').unwrap_or((inner, ""));
        out.push_str(&mark(name, arg));
        rest = after.get(close + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// The store's tables by the name the scripts use.
pub(crate) const TABLES: &[&str] = &[
    "runs",
    "outbox",
    "cursors",
    "schedule",
    "digests",
    "revisions",
    "revision_messages",
    "audit",
    "pauses",
    "forgotten",
    "run_counts",
    "uses",
    "stale",
    "shadows",
    "chain",
    "chain_adopted",
    "incidents",
    "notifications",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_rendered_and_the_rest_is_kept() {
        let sql = "SELECT {t r.at}, x FROM {runs} r WHERE k = $1{lock}";
        let out = render(sql, |name, arg| match name {
            "t" => format!("T({arg})"),
            "lock" => " FOR UPDATE".into(),
            table => format!("p_{table}"),
        });
        assert_eq!(
            out,
            "SELECT T(r.at), x FROM p_runs r WHERE k = $1 FOR UPDATE"
        );
    }
}
