//! The plumbing every statement of the PostgreSQL store goes through:
//! transactions with their time limits, statement parameters with their
//! types, and errors in one line.

use std::time::Duration;

use postgres::Client;
use postgres::error::SqlState;
use postgres::types::{ToSql, Type};

use crate::core::error::{Error, Result};
use crate::store::{IDLE_IN_TRANSACTION, PostgresUrl};

/// How long a transaction may wait for a lock and run each statement.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// `lock_timeout`: the longest wait for a row or table another session
    /// holds.
    pub lock_wait: Duration,
    /// `statement_timeout`, or none (a migration may build an index on a
    /// long history).
    pub statement: Option<Duration>,
}

/// How a transaction begins, in one round trip: it never waits longer than
/// its limits on what another session holds (a host paused or cut off in
/// the middle of a transaction), and the server ends it when it sits idle
/// for [`IDLE_IN_TRANSACTION`] (this host paused or cut off), releasing its
/// rows for everyone else.
fn begin_sql(limits: Limits) -> String {
    format!(
        "BEGIN; SET LOCAL lock_timeout = '{}ms'; \
         SET LOCAL idle_in_transaction_session_timeout = '{}ms'; \
         SET LOCAL statement_timeout = '{}ms'",
        limits.lock_wait.as_millis(),
        IDLE_IN_TRANSACTION.as_millis(),
        limits.statement.map_or(0, |d| d.as_millis())
    )
}

/// A row of a simple query: each value as text, or NULL.
pub(super) type TextRow = Vec<Option<String>>;

/// An open transaction on the store's connection, rolled back when dropped
/// without a commit (every error path). Only one exists at a time, and no
/// statement runs on the connection while it is open except through it.
pub(super) struct Tx<'a> {
    client: &'a mut Client,
    /// The store, for errors that name it.
    pub url: &'a PostgresUrl,
    open: bool,
}

impl<'a> Tx<'a> {
    pub(super) fn begin(
        client: &'a mut Client,
        url: &'a PostgresUrl,
        what: &str,
        limits: Limits,
    ) -> Result<Tx<'a>> {
        if let Err(e) = client.batch_execute(&begin_sql(limits)) {
            // BEGIN may have gone through before a SET failed.
            let _ = client.batch_execute("ROLLBACK");
            return Err(pg_in(url, what, &e));
        }
        Ok(Tx {
            client,
            url,
            open: true,
        })
    }

    /// [`Tx::begin`], with `then` (statements of ours, every value in them
    /// written by [`literal`]) run in the same round trip; the rows they
    /// return, as text. A failure is the server's error, the transaction
    /// rolled back.
    pub(super) fn begin_then(
        client: &'a mut Client,
        url: &'a PostgresUrl,
        limits: Limits,
        then: &str,
    ) -> std::result::Result<(Tx<'a>, Vec<TextRow>), postgres::Error> {
        let answers = match client.simple_query(&format!("{}; {then}", begin_sql(limits))) {
            Ok(a) => a,
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK");
                return Err(e);
            }
        };
        let rows = answers
            .iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                }
                _ => None,
            })
            .collect();
        Ok((
            Tx {
                client,
                url,
                open: true,
            },
            rows,
        ))
    }

    /// Runs `first` (statements of ours, every value in them written by
    /// [`literal`]) and commits, in one round trip; rolled back if either
    /// fails.
    pub(super) fn commit_after(mut self, first: &str) -> std::result::Result<(), postgres::Error> {
        self.open = false;
        let done = self.client.batch_execute(&format!("{first}; COMMIT"));
        if done.is_err() {
            let _ = self.client.batch_execute("ROLLBACK");
        }
        done
    }

    pub(super) fn commit(mut self) -> std::result::Result<(), postgres::Error> {
        self.open = false;
        self.client.batch_execute("COMMIT")
    }

    /// Commits; a failure names what was being committed and the store.
    pub(super) fn commit_named(self, what: &str) -> Result<()> {
        let url = self.url;
        self.commit().map_err(|e| pg_in(url, what, &e))
    }

    /// The error for a statement of this transaction that failed while
    /// doing `what`.
    pub(super) fn err(&self, what: &str, e: &postgres::Error) -> Error {
        pg_in(self.url, what, e)
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.client
    }
}

impl std::ops::DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            // Best effort: on a lost connection the server rolls back anyway.
            let _ = self.client.batch_execute("ROLLBACK");
        }
    }
}

/// One line for a PostgreSQL error: the server's message with its detail
/// and hint, or the client's description of a connection problem.
pub(super) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{} ({})", db.message(), db.code().code());
        if let Some(d) = db.detail() {
            s.push_str("; ");
            s.push_str(d);
        }
        if let Some(h) = db.hint() {
            s.push_str("; hint: ");
            s.push_str(h);
        }
        return s.replace(['\n', '\r'], " ");
    }
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s.replace(['\n', '\r'], " ")
}

/// Whether `e` means the connection is gone (the server shut down or
/// ended it, or the network failed), as opposed to a statement failing.
pub(super) fn connection_lost(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let c = code.code();
        // 57P: the server is shutting down or ended the session; 08: a
        // connection exception; 25P03: an idle transaction was ended.
        return c.starts_with("57P") || c.starts_with("08") || c == "25P03";
    }
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// Whether `e` is a lock wait that ran into its `lock_timeout`.
pub(super) fn lock_timed_out(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE)
}

/// [`pg`] for `cannot <what> in store <url>`.
pub(super) fn pg_in(url: &PostgresUrl, what: &str, e: &postgres::Error) -> Error {
    pg(&format!("cannot {what} in store `{url}`"), e)
}

pub(super) fn pg(context: &str, e: &postgres::Error) -> Error {
    if connection_lost(e) {
        return Error::Store(format!(
            "{context}: the connection to the database was lost ({}); nothing more is written or \
             sent by this process, and the next invocation continues the window",
            describe(e)
        ).into());
    }
    if lock_timed_out(e) {
        return Error::Store(format!(
            "{context}: another session held the rows it needs for longer than the lock timeout \
             (a host paused or cut off in the middle of a transaction); nothing was written or \
             sent, and a later invocation tries again"
        ).into());
    }
    if e.code() == Some(&SqlState::QUERY_CANCELED) {
        return Error::Store(format!(
            "{context}: a statement ran for longer than its time limit ({} s) and was cancelled; \
             nothing was written or sent, and a later invocation tries again",
            crate::store::STATEMENT_TIMEOUT.as_secs()
        ).into());
    }
    Error::store(context, describe(e))
}

/// A statement parameter with its type: statements are sent unnamed with
/// their types (one round trip each, and nothing prepared that a
/// transaction pooler could lose between connections).
pub(super) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

pub(super) fn int8<'a>(v: &'a (dyn ToSql + Sync)) -> Param<'a> {
    (v, Type::INT8)
}

/// `text` as a SQL string constant that cannot be read as anything else:
/// dollar-quoted with a tag the text does not hold (for statements sent in
/// one round trip with `BEGIN` or `COMMIT`, which take no parameters).
pub(super) fn literal(text: &str) -> String {
    let mut n = 0_u32;
    loop {
        let tag = format!("$j{n}$");
        let quoted = format!("{tag}{text}{tag}");
        // The constant ends at the first tag after the opening one: that
        // must be the closing one (the text neither holds the tag nor ends
        // with the start of it).
        if quoted[tag.len()..].find(&tag) == Some(text.len()) {
            return quoted;
        }
        n += 1;
    }
}

/// [`literal`] of an optional text; `NULL` for none.
pub(super) fn opt_literal(text: Option<&str>) -> String {
    text.map_or_else(|| "NULL".to_string(), literal)
}

#[cfg(test)]
mod tests {
    use super::literal;

    #[test]
    fn a_literal_is_quoted_with_a_tag_its_text_does_not_hold() {
        assert_eq!(literal("a'b"), "$j0$a'b$j0$");
        assert_eq!(literal("x$j0$y"), "$j1$x$j0$y$j1$");
        // A text ending with the start of the tag would end the constant
        // early.
        assert_eq!(literal("x$j0"), "$j1$x$j0$j1$");
        assert_eq!(literal("x$"), "$j0$x$$j0$");
    }
}
