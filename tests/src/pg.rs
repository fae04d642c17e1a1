//! PostgreSQL for the tests: a schema of its own for every test, so tests run
//! in parallel on one server without seeing each other's rows.
//!
//! The server is named by `JOBHOST_TEST_POSTGRES` (for example
//! `postgres://postgres@127.0.0.1:5432/test`); `.ci/run` sets it. Without
//! it the PostgreSQL tests skip, and say so on stderr in a line that the
//! test harness does not capture, so a skip is never mistaken for a pass;
//! under `CI` they fail instead (see [`crate::skip`]). The benchmarks, which
//! CI does not run, skip their PostgreSQL half under `CI` too.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::skip;

/// The variable that names the test server.
pub const VAR: &str = "JOBHOST_TEST_POSTGRES";

/// How to provide the test server, as a skip or a failure says it.
const HOW: &str = "set it to a PostgreSQL server (for example \
                   postgres://postgres@127.0.0.1:5432/test; .ci/run sets it)";

/// The test server's URL, if [`VAR`] names one.
pub fn configured() -> Option<String> {
    std::env::var(VAR).ok().filter(|url| !url.is_empty())
}

/// The test server's URL, or `None` (with a visible note) when it is not
/// configured. `test` names the test that skips.
///
/// # Panics
///
/// Under `CI` when the server is not configured, naming [`VAR`].
#[track_caller]
pub fn server(test: &str) -> Option<String> {
    let url = configured();
    if url.is_none() {
        skip::missing(test, &format!("{VAR} is not set"), HOW);
    }
    url
}

/// The test server's URL for a benchmark, or `None` with a visible note
/// (under `CI` too: benchmarks are not part of CI).
pub fn bench_server(bench: &str) -> Option<String> {
    let url = configured();
    if url.is_none() {
        skip::skipped(bench, &format!("{VAR} is not set; {HOW}"));
    }
    url
}

/// A schema of its own on the test server, dropped with everything in it
/// when this value is dropped.
pub struct Scratch {
    server: String,
    /// The schema's name; also the connections' `application_name`, so a
    /// test can find (and cut) the connections of the hosts it started.
    pub schema: String,
}

impl Scratch {
    /// Creates a fresh schema on the server named by [`VAR`]; `None` (with a
    /// note) when none is configured.
    ///
    /// # Panics
    ///
    /// When the server is configured but cannot be reached: a configured
    /// server that fails is a failure, not a skip. Under `CI` when none is
    /// configured (see [`server`]).
    #[track_caller]
    pub fn new(test: &str) -> Option<Scratch> {
        server(test).map(Scratch::on)
    }

    /// [`Scratch::new`] for a benchmark: without a server, a skip under
    /// `CI` too (see [`bench_server`]).
    pub fn for_bench(bench: &str) -> Option<Scratch> {
        bench_server(bench).map(Scratch::on)
    }

    /// A fresh schema on `server`.
    fn on(server: String) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let schema = format!(
            "jht_{}_{}_{:04x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            rand::random::<u16>()
        );
        let mut c = connect(&server);
        c.batch_execute(&format!("CREATE SCHEMA {schema}"))
            .unwrap_or_else(|e| panic!("cannot create schema {schema} on {server}: {e}"));
        Scratch { server, schema }
    }

    /// The store URL that puts jobhost's tables into this schema.
    pub fn url(&self) -> String {
        let sep = if self.server.contains('?') { '&' } else { '?' };
        format!(
            "{}{sep}options=-csearch_path%3D{}&application_name={}",
            self.server, self.schema, self.schema
        )
    }

    /// A client whose search path is this schema.
    pub fn client(&self) -> postgres::Client {
        connect(&self.url())
    }

    /// Ends every connection a host opened to this schema (by its
    /// `application_name`), as a database restart or a network cut would;
    /// returns how many were ended.
    pub fn cut_connections(&self) -> i64 {
        let mut c = connect(&self.server);
        c.query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&self.schema],
        )
        .expect("terminate backends")
        .get(0)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to the test PostgreSQL server {url}: {e}"))
}
